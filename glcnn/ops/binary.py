"""Add, Sub, Mul and Div of two tensors, or of a tensor and a per-channel constant (ONNX
broadcasting of the second operand).

| form                          | second operand                                   |
|-------------------------------|--------------------------------------------------|
| tensor ⊕ tensor, same shape   | input 1, (C, H, W)                               |
| tensor ⊕ tensor, per channel  | input 1, (C, 1, 1) (e.g. squeeze-excitation)     |
| tensor ⊕ constant             | weight B of shape (), (1,), (C,), (C,1,1), (1,C,1,1) |

y = a + b, a − b, a · b or a / b. Division is defined for every pair of finite inputs, the
same on every driver (GLSL 3.30 leaves x / 0 undefined and need not make NaN or Inf):

| divisor b                       | a / b                                            |
|---------------------------------|--------------------------------------------------|
| |b| < 2^−126 (zero, subnormal)  | ±Inf, the sign of a; 0 if also |a| < 2^−126     |
| quotient beyond ±3.4e38         | ±Inf, the sign of a·b                            |
| otherwise                       | a / b (GLSL: within 2.5 ulp)                     |

Drivers may flush subnormals to zero, hence the 2^−126 threshold; IEEE gives NaN for 0 / 0,
which GLSL 3.30 need not produce, hence 0 there. The sign of a zero divisor is ignored (IEEE
gives 1 / −0 = −Inf). In u8 storage an infinite result clamps to its channel's calibrated range.

Weights: B (optional, as above). An Add whose other input is a Conv's only consumer is
fused into that conv by `glcnn.graph.passes.fuse_residual_add` and never runs as its own pass.
"""

import numpy as np

from ..errors import ShapeError, UnsupportedOpError
from ..layout import pack_channels
from .base import Op, register


@register("Add", "Sub", "Mul", "Div")
class Binary(Op):
    shader = "binary.glsl"

    def check(self):
        c, h, w = self.in_shapes[0]
        tensors = len(self.node.inputs) - bool(self.node.attrs.get("residual"))
        if tensors == 2:
            other = self.in_shapes[1]
            if other not in ((c, h, w), (c, 1, 1)):
                self.fail(f"cannot broadcast {other} onto {(c, h, w)}; "
                          f"supported: same shape or ({c}, 1, 1)", ShapeError)
            self.mode = "TENSOR" if other == (c, h, w) else "CHANNEL"
        elif tensors == 1 and "B" in self.node.weights:
            b = self.weight("B").reshape(-1)
            if b.size not in (1, c):
                self.fail(f"constant B has {b.size} values; expected 1 or {c} (per channel)",
                          UnsupportedOpError)
            self.constant = np.broadcast_to(b, (c,))
            self.mode = "CONSTANT"
        else:
            self.fail("needs a second tensor input or a constant weight 'B'", UnsupportedOpError)

    @property
    def samplers(self):
        return ("u_input", "u_other") if self.mode != "CONSTANT" else ("u_input",)

    def defines(self):
        return {"OP_" + self.node.op.upper(): 1, "OTHER_" + self.mode: 1}

    def textures(self):
        return {"u_params": pack_channels(self.constant)} if self.mode == "CONSTANT" else {}
