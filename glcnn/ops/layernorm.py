"""LayerNormalization over one glcnn axis: each line of x along the axis is normalised by
its own mean and population variance.

    y = (x − μ) / sqrt(σ² + ε) · scale + bias,   μ = mean(x), σ² = mean((x − μ)²) along `axis`

| attribute | default | meaning                                                            |
|-----------|---------|--------------------------------------------------------------------|
| axis      | -1      | NCHW axis of (1, C, H, W): 1 / -3 channels, 2 / -2 H, 3 / -1 W     |
| epsilon   | 1e-5    | added to σ² (≥ 0; σ² + ε below 2^−126 counts as 2^−126: no x/0)    |

Weights: scale (L,) and optional bias (L,), L the size of the axis (ONNX opset 17 with a
single normalised axis). `glcnn.graph.fuse_norm` makes this op from the decomposed chain
(ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add) exporters write.

One fragment per output texel computes its line's μ and σ² (two walks: the mean first, so
the variance sums squares of small deviations); over channels it walks the pixel's
ceil(C/4) slices, over H or W each lane walks its own column or row.
"""

import numpy as np

from ..errors import UnsupportedOpError, WeightError, quote
from ..layout import pack, pack_channels
from .base import Op, register

_DEFINES = {1: "OVER_C", 2: "OVER_H", 3: "OVER_W"}


@register("LayerNormalization")
class LayerNormalization(Op):
    shader = "layernorm.glsl"

    def check(self):
        a = self.node.attrs
        axis = int(a.get("axis", -1))
        if not -3 <= axis <= 3 or axis == 0:
            self.fail(f"axis={axis} unsupported; one NCHW axis: 1 / -3 (C), 2 / -2 (H) or "
                      "3 / -1 (W)", UnsupportedOpError)
        self.axis = axis % 4
        self.epsilon = float(a.get("epsilon", 1e-5))
        if not 0 <= self.epsilon < np.inf:
            self.fail(f"epsilon={quote(a['epsilon'])} must be a finite number ≥ 0",
                      UnsupportedOpError)
        n = self.in_shapes[0][self.axis - 1]
        self.scale = self._vector("scale", n)
        self.bias = self._vector("bias", n) if "bias" in self.node.weights else np.zeros(n)

    def _vector(self, key, n):
        w = self.weight(key).reshape(-1)
        if w.size != n:
            self.fail(f"weight {quote(key)} has {w.size} values; axis {self.axis} of input "
                      f"{self.in_shapes[0]} has {n}", WeightError)
        return w

    def defines(self):
        return {_DEFINES[self.axis]: 1}

    def textures(self):
        if self.axis == 1:
            return {"u_params": pack_channels(self.scale, self.bias)}
        shape = (2, len(self.scale), 1) if self.axis == 2 else (2, 1, len(self.scale))
        return {"u_params": pack(np.stack([self.scale, self.bias]).reshape(shape))}

    def uniforms(self):
        return {"u_epsilon": self.epsilon}

    def flops(self):
        c, h, w = self.in_shapes[0]
        return 6 * c * h * w
