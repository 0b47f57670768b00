"""Add, Sub, Mul, Div, Max and Min of two tensors, or of a tensor and a constant, with broadcasting
on glcnn shapes (numpy's rule per axis of (C, H, W): sizes equal, or 1 on one side).

| form                          | second operand                                   |
|-------------------------------|--------------------------------------------------|
| tensor ⊕ tensor, same shape   | input 1, (C, H, W)                               |
| tensor ⊕ tensor, per channel  | input 1, (C, 1, 1) (e.g. squeeze-excitation)     |
| tensor ⊕ tensor, broadcast    | input 1, each axis equal to input 0's or 1 on    |
|                               | either side: output the broadcast shape          |
| tensor ⊕ constant             | weight B of shape (), (1,), (C,), (C,1,1), (1,C,1,1) |
| tensor ⊕ constant tensor      | weight B of glcnn shape (C', H', W') (3-D), each |
|                               | axis the output's size or 1 (an atlas texture)   |
| tensor + upscaled tensor      | input 1, (C, H / ky, W / kx), read at (y div ky, |
|                               | x div kx): attrs["upsample"] (an Add only)       |

An Add with attrs["input_gate"] (glcnn.graph.fuse_gate.fuse_gated_adds) reads (x, g, other),
g of shape (C, 1, 1) second as a gated conv's, and adds x·g instead of x (a squeeze-excitation
gate's Mul in its pass).

| attribute | default | meaning                                                          |
|-----------|---------|------------------------------------------------------------------|
| swap      | 0       | 1: b ⊖ a instead of a ⊖ b (Sub, Div: a constant minus or over x) |
| upsample  | none    | {"op": "Resize" or "Upsample", **its attributes}: input 1 is read |
|           |         | through that nearest upscale by whole factors, which           |
|           |         | glcnn.graph.fuse_resize took out of the graph                  |

y = a + b, a − b, a · b, a / b, max(a, b) or min(a, b) (with swap: b + a, b − a, b · a,
b / a; Max and Min are symmetric). The first three
forms are the fast paths (no broadcasting arithmetic in the shader). ONNX Sub and Div with a
constant first operand: c − x is a Sub with swap (as c / x is a Div with swap), which is what
glcnn/importers/onnx_ops.py emits.

Division is defined for every pair of finite inputs, the same on every driver (GLSL 3.30
leaves x / 0 undefined and need not make NaN or Inf):

| divisor b                       | a / b                                            |
|---------------------------------|--------------------------------------------------|
| |b| < 2^−126 (zero, subnormal)  | ±Inf, the sign of a; 0 if also |a| < 2^−126     |
| quotient beyond ±3.4e38         | ±Inf, the sign of a·b                            |
| otherwise                       | a / b (GLSL: within 2.5 ulp)                     |

Drivers may flush subnormals to zero, hence the 2^−126 threshold; IEEE gives NaN for 0 / 0,
which GLSL 3.30 need not produce, hence 0 there. The sign of a zero divisor is ignored (IEEE
gives 1 / −0 = −Inf). In u8 storage an infinite result clamps to its channel's calibrated range.

Weights: B (optional, as above). An Add whose other input is a Conv's only consumer is
fused into that conv by `glcnn.graph.passes.fuse_residual_add` and never runs as its own pass
(Max and Min never fuse so: they always run as their own pass).
"""

import numpy as np

from ..errors import ShapeError, UnsupportedOpError, quote
from ..layout import Atlas, pack, pack_channels
from .base import Op, register


# binary.glsl's u_op for the ops of OP_ARITH (one program for all of them; Div has its own):
# (without swap, with swap) — only Sub subtracts the other way.
ARITH = {"Add": (0, 0), "Sub": (1, 2), "Mul": (3, 3), "Max": (4, 4), "Min": (5, 5)}


def other_index(node) -> int:
    """Where a binary node's second operand is among its inputs: 2 after a fused input gate
    (inputs x, g, other: glcnn.graph.fuse_gate.fuse_gated_adds), else 1."""
    return 2 if node.attrs.get("input_gate") else 1


def broadcast_shape(a: tuple, b: tuple) -> tuple | None:
    """The numpy broadcast of glcnn shapes `a` and `b` (per axis: equal, or 1 on one side),
    or None if they do not broadcast."""
    if any(m != n and 1 not in (m, n) for m, n in zip(a, b)):
        return None
    return tuple(max(m, n) for m, n in zip(a, b))


@register("Add", "Sub", "Mul", "Div", "Max", "Min")
class Binary(Op):
    shader = "binary.glsl"

    def check(self):
        c, h, w = self.in_shapes[0]
        self.out = (c, h, w)
        tensors = len(self.node.inputs) - bool(self.node.attrs.get("residual"))
        k = other_index(self.node)
        if k == 2:
            self._check_gate()
            tensors -= 1
        if int(self.node.attrs.get("swap", 0)) not in (0, 1):
            self.fail(f"swap={quote(self.node.attrs['swap'])} must be 0 or 1", UnsupportedOpError)
        if tensors == 2 and "upsample" in self.node.attrs:
            self._upsample(k)
        elif tensors == 2:
            other = self.in_shapes[k]
            self.mode = {(c, 1, 1): "CHANNEL", (c, h, w): "TENSOR"}.get(other, "BROADCAST")
            self._broadcast(other, f"input {quote(self.node.inputs[k])}", ShapeError)
        elif tensors == 1 and "B" in self.node.weights:
            b = self.weight("B")
            if b.ndim == 3 and b.shape[1:] != (1, 1) or b.ndim == 3 and b.shape[0] not in (1, c):
                self.mode, self.constant = "ATLAS", b
                self._broadcast(b.shape, "constant B", UnsupportedOpError)
                return
            b = b.reshape(-1)
            if b.size not in (1, c):
                self.fail(f"constant B has {b.size} values; expected 1 or {c} (per channel), "
                          "or a glcnn-shaped (C, H, W) array", UnsupportedOpError)
            self.constant = np.broadcast_to(b, (c,))
            self.mode = "CONSTANT"
        else:
            self.fail("needs a second tensor input or a constant weight 'B'", UnsupportedOpError)
        if k == 2 and self.mode not in ("TENSOR", "UPSAMPLE"):
            self.fail(f"input_gate needs a second tensor of the first's shape {(c, h, w)} "
                      f"(or upscaled); has {tuple(self.in_shapes[2])}", UnsupportedOpError)

    def _check_gate(self) -> None:
        """attrs["input_gate"]: an Add of x, x's (C, 1, 1) gate and a second tensor."""
        c = self.in_shapes[0][0]
        if self.node.op != "Add" or len(self.node.inputs) != 3 or \
                self.node.attrs.get("residual") or self.in_shapes[1] != (c, 1, 1):
            self.fail(f"input_gate: an Add of two tensors and the first's (C, 1, 1) gate; has "
                      f"inputs {list(self.in_shapes)}", UnsupportedOpError)

    def _upsample(self, k: int) -> None:
        """Input k read upscaled by whole factors (ky, kx) onto input 0's (C, H, W)."""
        c, h, w = self.in_shapes[0]
        other = self.in_shapes[k]
        if self.node.op != "Add" or not isinstance(self.node.attrs["upsample"], dict):
            self.fail(f"upsample={quote(self.node.attrs['upsample'])}: an Add's, a dict of the "
                      "upscaling Resize's attributes", UnsupportedOpError)
        oc, oh, ow = other
        if oc != c or h % oh or w % ow:
            self.fail(f"input {quote(self.node.inputs[k])} of shape {tuple(other)} does not "
                      f"upscale by whole factors to {self.in_shapes[0]}", ShapeError)
        self.mode, self.factors = "UPSAMPLE", (h // oh, w // ow)

    def _broadcast(self, other: tuple, what: str, error):
        out = broadcast_shape(self.in_shapes[0], other)
        if out is None:
            self.fail(f"cannot broadcast {what} of shape {tuple(other)} with "
                      f"{self.in_shapes[0]}: each axis must match or be 1", error)
        self.out = out

    def output_shape(self):
        return self.out

    @property
    def samplers(self):
        if self.mode in ("CONSTANT", "ATLAS"):
            return ("u_input",)
        return ("u_input", "u_gate", "u_other") if other_index(self.node) == 2 else \
            ("u_input", "u_other")

    def defines(self):
        other = {"OTHER_" + self.mode: 1} | ({"FIRST_GATE": 1}
                                             if other_index(self.node) == 2 else {})
        if self.node.op in ARITH:
            return {"OP_ARITH": 1} | other
        return {"OP_DIV": 1} | other | ({"SWAP": 1} if self._swap() else {})

    def _swap(self) -> bool:
        return bool(int(self.node.attrs.get("swap", 0)))

    def textures(self):
        if self.mode == "ATLAS":
            return {"u_const": pack(self.constant)}
        return {"u_params": pack_channels(self.constant)} if self.mode == "CONSTANT" else {}

    def uniforms(self):
        out = {"u_op": ARITH[self.node.op][self._swap()]} if self.node.op in ARITH else {}
        if self.mode == "ATLAS":
            out["u_const_shape"] = Atlas.of(self.constant.shape).shape_uniform
        if self.mode == "UPSAMPLE":
            out["u_upsample"] = self.factors[::-1]  # (kx, ky)
        return out
