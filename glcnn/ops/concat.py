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

Where every output texel is one whole texel of one input (along H or W, or on the channel axis
when every input but the last has a multiple of 4 channels) and nothing is fused into the op,
`tile_copies` gives it as rectangles of texels to copy, which a pipeline copies instead of
running the shader (glcnn.runtime.plan.Plan.copies: no shader samples, no switch over the
inputs, which a SIMD rasteriser runs in full for every texel).
"""

import functools
import itertools

from ..errors import ShapeError, UnsupportedOpError
from ..layout import Atlas
from .base import Op, register

EPILOGUE_ATTRS = ("activation", "residual", "affine", "output_grad")  # fused into the shader

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

    def tile_copies(self) -> list[tuple[int, int, int, int, int, int, int]] | None:
        """The op as copies of texel rectangles between atlases, (input, source x, source y,
        output x, output y, width, height), neighbouring tiles merged; or None where an output
        texel mixes inputs (an input before the last with C % 4 != 0 on the channel axis) or
        the op has a fused epilogue. The rectangles cover every slice of the output (tiles
        past the last slice are the output atlas's empty cells)."""
        return self._tile_copies

    @functools.cached_property
    def _tile_copies(self):  # asked for by the plan and the compiler: made once
        if any(self.node.attrs.get(a) for a in EPILOGUE_ATTRS) or \
                "ALIGNED" not in self.defines() and self.axis == 0:
            return None
        out, rects, offset = Atlas.of(self.output_shape()), [], 0
        for i, part in enumerate(self.parts):
            src = Atlas.of(part)
            step = offset // 4 if self.axis == 0 else 0  # output slice d = s + step
            shift = (offset if self.axis == 2 else 0, offset if self.axis == 1 else 0)
            src.copy_rects(out, [(s, s + step) for s in range(src.slices)], i, shift, rects)
            offset += part[self.axis]
        return rects
