"""Flatten and Reshape to a vector: (C, H, W) → (C·H·W, 1, 1) in ONNX/numpy C order,
y[c·H·W + h·W + w] = x[c, h, w]. glcnn stores an (N, F) matrix (batch 1) as (F, 1, 1).

| op      | attribute | supported values                                                |
|---------|-----------|-----------------------------------------------------------------|
| Flatten | axis (1)  | 0, 1, -3, -4 (NCHW, batch 1: all give (1, C·H·W))               |
| Reshape | shape     | a vector: (1, F), (F,), (1, F, 1, 1) with 0 (copy the input's    |
|         |           | dim, allowzero=0) and one -1 (inferred); or the input's own shape |

No weights. When H = W = 1 the result is the input itself; `glcnn.graph.passes` then drops the
node where it can (see `drop_identity_reshapes`), otherwise it runs as a copy pass.
"""

import numpy as np

from ..errors import UnsupportedOpError
from .base import Op, register


def resolve_shape(target, in_shape) -> tuple[int, ...] | None:
    """ONNX Reshape's `target` with 0 (copy) and -1 (infer) resolved against `in_shape`;
    None if it cannot hold the same number of elements."""
    dims = [in_shape[i] if d == 0 and i < len(in_shape) else d for i, d in enumerate(target)]
    known = int(np.prod([d for d in dims if d != -1]))
    if dims.count(-1) > 1 or any(d < -1 or d == 0 for d in dims) or known == 0:
        return None
    if -1 in dims:
        dims[dims.index(-1)] = int(np.prod(in_shape)) // known
    return tuple(dims) if int(np.prod(dims)) == int(np.prod(in_shape)) else None


@register("Flatten", "Reshape")
class Flatten(Op):
    shader = "flatten.glsl"

    def check(self):
        c, h, w = self.in_shapes[0]
        self.keep = False  # a Reshape to the input's own shape
        if self.node.op == "Flatten":
            axis = int(self.node.attrs.get("axis", 1))
            if axis not in (0, 1, -3, -4):
                self.fail(f"axis={axis} unsupported; only 0 or 1 (flatten to a vector)",
                          UnsupportedOpError)
            return
        target = [int(d) for d in self.node.attrs.get("shape", ())]
        if int(self.node.attrs.get("allowzero", 0)) and 0 in target:
            self.fail(f"shape={target} with allowzero=1 makes an empty tensor", UnsupportedOpError)
        dims = resolve_shape(target, (1, c, h, w))
        f = c * h * w
        if dims not in ((1, f), (f,), (1, f, 1, 1), (1, c, h, w)):
            self.fail(f"shape={target} on input {(1, c, h, w)} unsupported; only a vector "
                      "(1, F), (F,), (1, F, 1, 1) or the input's own shape", UnsupportedOpError)
        self.keep = dims == (1, c, h, w)

    def output_shape(self):
        c, h, w = self.in_shapes[0]
        return self.in_shapes[0] if self.keep else (c * h * w, 1, 1)

    @property
    def identity(self) -> bool:
        """True when the output holds the input's texels unchanged."""
        return self.output_shape() == self.in_shapes[0]

    def defines(self):
        return {"IDENTITY": 1} if self.identity else {}
