"""Rearrange: a general element gather between any two (C, H, W) storage shapes (glcnn-internal;
the ONNX importer makes it for Reshape across layouts, Transpose of rank 3, 5 and 6, Slice with
steps on any axis, Gather with constant indices, Expand and Split).

Output element o = (c·H' + y)·W' + x, unravelled row-major by `dims` into (i_0, …, i_k):

    f = offset + Σ_k i_k · strides[k]
    g = Σ_k j_k · strides2[k]   with (j_0, …) = f unravelled by `dims2`   (g = f without it)
    y[c, y, x] = x.reshape(-1)[g]  = x[g div (H·W), (g div W) mod H, g mod W]

| attribute | default | meaning                                                         |
|-----------|---------|-----------------------------------------------------------------|
| shape     |         | output (C', H', W')                                             |
| dims      |         | 1 to 6 sizes, product C'·H'·W'                                  |
| strides   |         | one per dim, ≥ 0 (0 broadcasts, as Expand)                      |
| offset    | 0       | ≥ 0, added to the first stage's index                           |
| dims2     | none    | 1 to 6 sizes of an optional second stage (with `strides2`)      |
| strides2  | none    | one per dim2, ≥ 0                                               |

No weights. Every reachable index is checked to stay inside its stage (the largest,
offset + Σ (d − 1)·s, is computed exactly) and below 2^31, the shader's integers. Dims of 1
and dims that continue the next one (s_k = d_(k+1)·s_(k+1)) are merged before they reach the
shader, and a one-dim second stage is folded into the first, so the common moves need few
divisions; the dims in use per stage are defines (RANK, RANK2: constant loop bounds, 2x faster
on llvmpipe than uniform ones), their sizes and strides uniforms. An output texel whose 4 lanes
are 4 consecutive input channels at one (y, x) reads that one texel; others read each lane's
channel alone. Measured on llvmpipe, 2 cores, 64×128×128: 3.6–5.2 ms per pass (a copy, the
three 3-axis transposes, a channels-last reshape), the glcnn Transpose 1.5–4.7 ms.
"""

import functools
import math

import numpy as np

from ..errors import ShapeError, UnsupportedOpError, quote
from ..layout import Atlas
from .base import Op, register
from .concat import EPILOGUE_ATTRS

MAX_DIMS = 6  # u_dims[6] and u_dims2[6] in shaders/rearrange.glsl
INT_LIMIT = 1 << 31  # GLSL int: every index the shader computes stays below
# Below this, shaders/rearrange.glsl divides indices in float (common.glsl div_floor, exact up
# to 2^21): on llvmpipe, 2 cores, 64x128x128, the (C, W, H) transpose 8.9 -> 4.7 ms, the
# other permutations and a channels-last reshape likewise 1.6-2x faster.
FLOAT_DIVISION_LIMIT = 1 << 21


def merge_dims(dims, strides) -> tuple[list[int], list[int]]:
    """The same index map (for indices below prod(dims)) with dims of 1 dropped and each dim
    whose stride is the next one's span merged into it; at least one dim."""
    out_dims, out_strides = [], []
    for d, s in zip(dims, strides):
        if d == 1:
            continue
        if out_dims and out_strides[-1] == d * s:
            out_dims[-1], out_strides[-1] = out_dims[-1] * d, s
        else:
            out_dims.append(d)
            out_strides.append(s)
    return (out_dims, out_strides) if out_dims else ([1], [0])


def largest_index(dims, strides, offset: int = 0) -> int:
    """offset + Σ (d − 1)·s: the largest index the stage reaches (strides are ≥ 0)."""
    return offset + sum((d - 1) * s for d, s in zip(dims, strides))


@register("Rearrange")
class Rearrange(Op):
    shader = "rearrange.glsl"

    def check(self):
        self.shape = self._ints("shape", minimum=1)
        if len(self.shape) != 3:
            self.fail(f"shape={list(self.shape)} must be an output (C, H, W)", UnsupportedOpError)
        a = self.node.attrs
        offset = self._ints("offset", minimum=0, scalar=True)[0] if "offset" in a else 0
        dims, strides = self._stage("dims", "strides")
        count = math.prod(self.shape)
        if math.prod(dims) != count:
            self.fail(f"dims={list(dims)} hold {math.prod(dims)} elements, the output shape "
                      f"{self.shape} {count}", ShapeError)
        if count >= INT_LIMIT:
            self.fail(f"output {self.shape} has {count} elements; at most 2^31 - 1", ShapeError)
        self.stage1, self.stage2 = (dims, strides, offset), None
        last = largest_index(dims, strides, offset)
        self.largest = max(count - 1, last)  # the largest index the shader divides
        if "dims2" in a or "strides2" in a:
            self.stage2 = self._second_stage(last)
            last = largest_index(*self.stage2)
            self.largest = max(self.largest, last)
        self._check_input(last)

    def _second_stage(self, last: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """dims2 and strides2, checked to hold every index up to `last`, the first stage's."""
        dims2, strides2 = self._stage("dims2", "strides2")
        span = math.prod(dims2)
        if span >= INT_LIMIT:
            self.fail(f"dims2={list(dims2)} hold {span} elements; at most 2^31 - 1", ShapeError)
        if last >= span:
            self.fail(f"the first stage reaches index {last}, but dims2={list(dims2)} hold "
                      f"{span} elements", ShapeError)
        return dims2, strides2

    def _check_input(self, last: int) -> None:
        """The input holds element `last`, and the shader's lane indices stay below 2^31."""
        size = math.prod(self.in_shapes[0])
        _, h, w = self.in_shapes[0]
        if size + 3 * h * w >= INT_LIMIT:  # lanes past C' index up to 3 planes on (rearrange.glsl)
            self.fail(f"input {self.in_shapes[0]} has {size} elements; at most 2^31 - 1 - 3·H·W",
                      ShapeError)
        if last >= size:
            self.fail(f"reaches input element {last}, but the input {self.in_shapes[0]} has "
                      f"{size}", ShapeError)

    def _ints(self, key: str, minimum: int, scalar: bool = False) -> tuple[int, ...]:
        value = self.node.attrs.get(key)
        values = [value] if scalar else value
        if not isinstance(values, list | tuple) or not all(
                isinstance(v, int | np.integer) and not isinstance(v, bool) for v in values):
            self.fail(f"attribute {key}={quote(value)} must be "
                      f"{'an integer' if scalar else 'a list of integers'}", UnsupportedOpError)
        if any(v < minimum for v in values):
            self.fail(f"attribute {key}={quote(value)} must be >= {minimum}", UnsupportedOpError)
        return tuple(int(v) for v in values)

    def _stage(self, dims_key: str, strides_key: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        dims, strides = self._ints(dims_key, 1), self._ints(strides_key, 0)
        if not 1 <= len(dims) <= MAX_DIMS or len(strides) != len(dims):
            self.fail(f"{dims_key}={list(dims)} and {strides_key}={list(strides)} must have the "
                      f"same length, 1 to {MAX_DIMS}", UnsupportedOpError)
        return dims, strides

    def output_shape(self):
        return self.shape

    def index_map(self) -> tuple[list[int], list[int], int, list[int], list[int]]:
        """(dims, strides, offset, dims2, strides2) as the shader takes them: merged, with a
        one-dim second stage folded into the first (dims2 = [] then)."""
        dims, strides, offset = self.stage1
        dims, strides = merge_dims(dims, strides)
        dims2, strides2 = merge_dims(*self.stage2) if self.stage2 else ([], [])
        if len(dims2) == 1:  # g = f·s: scale the first stage
            scale = strides2[0]
            dims, strides = merge_dims(dims, [s * scale for s in strides])
            offset, dims2, strides2 = offset * scale, [], []
        return dims, strides, offset, dims2, strides2

    def tile_copies(self) -> list[tuple[int, int, int, int, int, int, int]] | None:
        """The op as copies of whole tiles (Plan.copies, as a Concat's) when it takes channels
        c0 .. c0 + C' - 1 of its input unchanged, c0 a multiple of 4 and C' too or reaching the
        input's last channel (a YOLO C2f Split, a channel Slice): output slice d is input slice
        d + c0 / 4, texel for texel; else None. On llvmpipe a YOLOv8n Split half (16 of 32
        channels at 80²) took 0.34-0.37 ms drawn."""
        return self._tile_copies

    @functools.cached_property
    def _tile_copies(self):  # asked for by the plan and the compiler: made once (as Concat's)
        dims, strides, offset, dims2, _ = self.index_map()
        (c, h, w), (c_out, h_out, w_out) = self.in_shapes[0], self.shape
        plane = h * w
        if any(self.node.attrs.get(a) for a in EPILOGUE_ATTRS) or dims2 or strides != [1] or \
                (h_out, w_out) != (h, w) or offset % (4 * plane):
            return None
        first = offset // plane  # c0
        if c_out % 4 and first + c_out != c:
            return None
        out = Atlas.of(self.shape)
        step = first // 4
        return Atlas.of(self.in_shapes[0]).copy_rects(
            out, [(d + step, d) for d in range(out.slices)])

    def defines(self):
        dims, _, _, dims2, _ = self.index_map()
        small = {"SMALL_INDICES": 1} if self.largest < FLOAT_DIVISION_LIMIT else {}
        return {"RANK": len(dims), "RANK2": len(dims2)} | small

    def uniforms(self):
        dims, strides, offset, dims2, strides2 = self.index_map()
        return {"u_dims": _padded(dims, 1), "u_strides": _padded(strides, 0), "u_offset": offset,
                "u_dims2": _padded(dims2, 1), "u_strides2": _padded(strides2, 0)}


def _padded(values, fill: int) -> tuple[int, ...]:
    """`values` right-aligned in MAX_DIMS slots (shaders/rearrange.glsl)."""
    return (fill,) * (MAX_DIMS - len(values)) + tuple(values)
