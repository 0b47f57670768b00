"""Softmax over one axis of (C, H, W): y = e^(x − M) / S along the axis, with M the line's
maximum (so no exp overflows) and S = Σ e^(x − M) over the line.

| attribute | default | meaning (ONNX opset 13: one axis, not "flatten from axis")         |
|-----------|---------|--------------------------------------------------------------------|
| axis      | -1      | NCHW axis of (1, C, H, W): 1 / -3 channels, 2 / -2 H, 3 / -1 W;     |
|           |         | -1 on a vector (C, 1, 1) means its channels (ONNX's (N, C) classes) |

Axis 0 (the batch) raises UnsupportedOpError. No weights.

Over channels one pass reads each pixel's S = ceil(C/4) slices twice per output texel (for
M, then S): the cost grows as C². Over H or W the 4 lanes of a texel are 4 independent
channels, each walking its line of n texels twice: n² per line. For long lines
`glcnn.graph.passes.expand_reductions` splits the op into SoftmaxStats(x) → (M, S) per
line, then SoftmaxApply(x, stats) (both internal, attribute `axis` in {1, 2, 3}):

| axis      | stats shape  | holds                                      |
|-----------|--------------|--------------------------------------------|
| 1 (C)     | (2, H, W)    | channel 0: M, channel 1: S of each pixel    |
| 2 (H)     | (C, 2, W)    | row 0: M, row 1: S of each column           |
| 3 (W)     | (C, H, 2)    | column 0: M, column 1: S of each row        |

M is one of the input values, so storing it loses nothing in fp32 or fp16.
"""

from ..errors import ShapeError, UnsupportedOpError
from .base import Op, register

_AXIS_DEFINES = {1: {}, 2: {"OVER_H": 1}, 3: {"OVER_W": 1}}


def softmax_axis(axis: int, shape) -> int | None:
    """The NCHW axis 1, 2 or 3 a Softmax with attribute `axis` normalises on a (C, H, W)
    input (-1 on a vector (C, 1, 1) is its channels), or None for the batch or out of range."""
    c, h, w = shape
    if axis == -1 and h == 1 and w == 1:
        return 1
    if not -4 <= axis < 4 or axis % 4 == 0:
        return None
    return axis % 4


def stats_shape(shape, axis: int) -> tuple[int, int, int]:
    """The (M, S) tensor of SoftmaxStats over `axis` of a (C, H, W) input (see the table)."""
    c, h, w = shape
    return {1: (2, h, w), 2: (c, 2, w), 3: (c, h, 2)}[axis]


class _SoftmaxBase(Op):
    shader = "softmax.glsl"

    def check(self):
        raw = int(self.node.attrs.get("axis", -1 if self.node.op == "Softmax" else 1))
        self.axis = softmax_axis(raw, self.in_shapes[0])
        if self.axis is None:
            self.fail(f"axis={raw} unsupported for input {self.in_shapes[0]}; supported: "
                      "1 / -3 (channels), 2 / -2 (H), 3 / -1 (W) of NCHW", UnsupportedOpError)

    def defines(self):
        return dict(_AXIS_DEFINES[self.axis])

    def line(self) -> int:
        """Texels along the axis (slices over channels)."""
        c, h, w = self.in_shapes[0]
        return {1: (c + 3) // 4, 2: h, 3: w}[self.axis]


@register("Softmax")
class Softmax(_SoftmaxBase):

    def flops(self):
        c, h, w = self.in_shapes[0]
        return 3 * c * h * w * (self.line() + 3) // 4


@register("SoftmaxStats")
class SoftmaxStats(_SoftmaxBase):
    """M and S of every line along `axis` (default 1), as the table above places them."""

    def output_shape(self):
        return stats_shape(self.in_shapes[0], self.axis)

    def defines(self):
        return super().defines() | {"STATS": 1}

    def flops(self):
        return 3 * self.in_shapes[0][0] * self.in_shapes[0][1] * self.in_shapes[0][2]


@register("SoftmaxApply")
class SoftmaxApply(_SoftmaxBase):
    """e^(x − M) / S with (M, S) read from a SoftmaxStats output over the same `axis`."""

    samplers = ("u_input", "u_stats")

    def check(self):
        super().check()
        want = stats_shape(self.in_shapes[0], self.axis)
        if len(self.in_shapes) < 2 or self.in_shapes[1] != want:
            self.fail(f"needs inputs x and stats of shape {want}; got {self.in_shapes}",
                      ShapeError)

    def defines(self):
        return super().defines() | {"STATS_INPUT": 1}
