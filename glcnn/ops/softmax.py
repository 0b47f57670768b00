"""Softmax over the channel axis: y[c, h, w] = e^(x[c, h, w] − M) / S, per pixel (h, w),
with M = max_k x[k, h, w] (so no exp overflows) and S = Σ_k e^(x[k, h, w] − M).

| attribute | default | meaning (ONNX opset 13: one axis, not "flatten from axis")       |
|-----------|---------|------------------------------------------------------------------|
| axis      | -1      | 1 or -3: channels of NCHW, any (C, H, W);                         |
|           |         | -1: a vector (C, 1, 1) only, i.e. the class axis of ONNX's (N, C) |

Other axes (0, 2, 3, -2, -4, and -1 when H·W > 1) raise UnsupportedOpError: glcnn keeps
a (N, C) matrix as (C, 1, 1), so an importer maps an (N, C) softmax to axis 1 or -1.
No weights.

As one pass, each output texel reads its pixel's C channels twice (for M, then S): the
cost grows as C². For many classes `glcnn.graph.passes.expand_reductions` splits it into
SoftmaxStats(x) → (2, H, W) holding (M, S), then SoftmaxApply(x, stats) (both internal).
M is one of the input values, so storing it loses nothing in fp32 or fp16.
"""

from ..errors import ShapeError, UnsupportedOpError
from .base import Op, register


@register("Softmax")
class Softmax(Op):
    shader = "softmax.glsl"

    def check(self):
        c, h, w = self.in_shapes[0]
        axis = int(self.node.attrs.get("axis", -1))
        vector = h == 1 and w == 1
        if axis not in (1, -3) and not (axis == -1 and vector):
            self.fail(f"axis={axis} unsupported for input {(c, h, w)}; supported: the "
                      "channel axis, 1 or -3 (NCHW), or -1 on a vector (C, 1, 1)",
                      UnsupportedOpError)

    def flops(self):
        c, h, w = self.in_shapes[0]
        return 3 * c * h * w * (c + 3) // 4


@register("SoftmaxStats")
class SoftmaxStats(Op):
    """M and S of every pixel, as channels 0 and 1 of a (2, H, W) tensor."""

    shader = "softmax.glsl"

    def output_shape(self):
        return 2, *self.in_shapes[0][1:]

    def defines(self):
        return {"STATS": 1}

    def flops(self):
        return 3 * self.in_shapes[0][0] * self.in_shapes[0][1] * self.in_shapes[0][2]


@register("SoftmaxApply")
class SoftmaxApply(Op):
    """e^(x − M) / S with (M, S) read from a SoftmaxStats output."""

    shader = "softmax.glsl"
    samplers = ("u_input", "u_stats")

    def check(self):
        _, h, w = self.in_shapes[0]
        if len(self.in_shapes) < 2 or self.in_shapes[1] != (2, h, w):
            self.fail(f"needs inputs x and stats of shape {(2, h, w)}; got {self.in_shapes}",
                      ShapeError)

    def defines(self):
        return {"STATS_INPUT": 1}
