"""Concat on the channel axis (ONNX semantics, NCHW, batch 1).

y[c] = x_i[c − e_(i−1)]   for the input i with e_(i−1) ≤ c < e_i,

e_i being the running total of the inputs' channel counts (e_(−1) = 0). Any channel
counts: an output slice may draw its 4 lanes from up to 4 different inputs.

| attribute | default | meaning                                       |
|-----------|---------|-----------------------------------------------|
| axis      | 1       | must be the channel axis: 1 or −3 (NCHW)      |

Inputs: 1 to 8 tensors of equal H and W (chain two Concats for more). No weights.
Variant: ALIGNED when every input but the last has a multiple of 4 channels, so each
output slice is one whole input slice (one fetch instead of four per pixel).
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
        if axis not in (1, -3):
            self.fail(f"axis={axis} unsupported; only the channel axis (1 or -3)",
                      UnsupportedOpError)
        self.count = len(self.node.inputs) - bool(self.node.attrs.get("residual"))
        if not 1 <= self.count <= MAX_INPUTS:
            self.fail(f"{self.count} inputs; supported 1 to {MAX_INPUTS} (chain Concats for more)",
                      UnsupportedOpError)
        self.parts = self.in_shapes[:self.count]
        if len({shape[1:] for shape in self.parts}) != 1:
            self.fail(f"inputs {self.parts} differ in H, W", ShapeError)

    @property
    def samplers(self):
        return tuple(f"u_input{i}" for i in range(self.count))

    def output_shape(self):
        return (sum(shape[0] for shape in self.parts), *self.parts[0][1:])

    def defines(self):
        aligned = all(shape[0] % 4 == 0 for shape in self.parts[:-1])
        return {"INPUTS": self.count} | ({"ALIGNED": 1} if aligned else {})

    def uniforms(self):
        return {"u_end": tuple(itertools.accumulate(shape[0] for shape in self.parts))}
