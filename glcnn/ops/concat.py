"""Concat along one axis of (C, H, W) (ONNX semantics, NCHW, batch 1).

y[c] = x_i[c − e_(i−1)]   for the input i with e_(i−1) ≤ c < e_i   (channel axis; H, W alike),

e_i being the running total of the inputs' sizes along the axis (e_(−1) = 0). On the channel
axis any channel counts: an output slice may draw its 4 lanes from up to 4 different inputs.
Along H or W each output texel is one whole texel of the input its row or column falls in.

| attribute | default | meaning                                                  |
|-----------|---------|----------------------------------------------------------|
| axis      | 1       | NCHW axis: 1 or −3 (C), 2 or −2 (H), 3 or −1 (W)          |

Inputs: 1 to 8 tensors that agree on the other two axes (chain two Concats for more). No
weights. Variants: ALIGNED (channel axis) when every input but the last has a multiple of 4
channels, so each output slice is one whole input slice (one fetch instead of four per
pixel); ALONG_H, ALONG_W for the spatial axes.
"""

import itertools

from ..errors import ShapeError, UnsupportedOpError
from .base import Op, register

MAX_INPUTS = 8  # samplers u_input0..u_input7 in shaders/concat.glsl


@register("Concat")
class Concat(Op):
    shader = "concat.glsl"

    def check(self):
        axis = int(self.node.attrs.get("axis", 1))
        if axis not in (1, 2, 3, -3, -2, -1):
            self.fail(f"axis={axis} unsupported; only C (1 or -3), H (2 or -2) or W (3 or -1)",
                      UnsupportedOpError)
        self.axis = axis % 4 - 1  # of (C, H, W)
        self.count = len(self.node.inputs) - bool(self.node.attrs.get("residual"))
        if not 1 <= self.count <= MAX_INPUTS:
            self.fail(f"{self.count} inputs; supported 1 to {MAX_INPUTS} (chain Concats for more)",
                      UnsupportedOpError)
        self.parts = self.in_shapes[:self.count]
        others = [i for i in range(3) if i != self.axis]
        if len({tuple(shape[i] for i in others) for shape in self.parts}) != 1:
            names = ", ".join("CHW"[i] for i in others)
            self.fail(f"inputs {self.parts} differ in {names}", ShapeError)

    @property
    def samplers(self):
        return tuple(f"u_input{i}" for i in range(self.count))

    def output_shape(self):
        shape = list(self.parts[0])
        shape[self.axis] = sum(part[self.axis] for part in self.parts)
        return tuple(shape)

    def defines(self):
        if self.axis:
            return {"INPUTS": self.count, ("ALONG_H" if self.axis == 1 else "ALONG_W"): 1}
        aligned = all(shape[0] % 4 == 0 for shape in self.parts[:-1])
        return {"INPUTS": self.count} | ({"ALIGNED": 1} if aligned else {})

    def uniforms(self):
        return {"u_end": tuple(itertools.accumulate(shape[self.axis] for shape in self.parts))}
