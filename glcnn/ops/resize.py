"""Resize and Upsample on H and W (ONNX semantics, NCHW, batch 1): nearest or bilinear.

Per axis, output index o reads the input coordinate x(o) = α·o + β:

| coordinate_transformation_mode | α                                | β                           |
|--------------------------------|----------------------------------|-----------------------------|
| asymmetric                     | 1/s                              | 0                           |
| half_pixel                     | 1/s                              | 1/(2s) − 1/2                |
| pytorch_half_pixel             | as half_pixel; 0 if out = 1      | as half_pixel; 0 if out = 1 |
| align_corners                  | (in − 1)/(out − 1); 0 if out = 1 | 0                           |
| tf_half_pixel_for_nn           | 1/s                              | 1/(2s)                      |
| half_pixel_symmetric           | 1/s                              | 1/(2s) − 1/2 + c            |

with c = in/2 · (1 − out/(s·in)), which is 0 unless in·s is fractional.

nearest rounds x by nearest_mode and clamps to [0, in − 1]; linear clamps x to [0, in − 1]
and interpolates between floor(x) and floor(x) + 1 (bilinear over H and W). `out` is the
integer output length, as in onnxruntime and PyTorch (the ONNX reference takes in·s for
align_corners; the ONNX importer refuses scales where that differs).

Scales and sizes are attributes here: the ONNX importer turns Resize's constant `scales` /
`sizes` inputs (and Upsample's `scales`) into

    scales = [sh, sw]   floats; the NCHW form [1, 1, sh, sw] is accepted too
    sizes  = [oh, ow]   ints;   or [1, C, oh, ow]

Output size floor(in · s); with sizes, s = out / in.

| attribute                      | default            | supported                              |
|--------------------------------|--------------------|----------------------------------------|
| mode                           | nearest            | nearest, linear                        |
| coordinate_transformation_mode | half_pixel         | the table above (Upsample: asymmetric) |
| nearest_mode                   | round_prefer_floor | also round_prefer_ceil, floor, ceil    |
|                                |                    | (Upsample: floor)                      |
| antialias                      | 0                  | 0 (1 only with nearest, where ignored) |
| keep_aspect_ratio_policy       | stretch            | stretch                                |

Weights: none. Upsample (the pre-opset-10 name) must have scales ≥ 1, as onnxruntime
demands. The coordinates are computed here once with exact rational arithmetic, so the
spec's ties (e.g. x = 2.5 when downscaling by 2) round as written rather than as float32
noise falls, and are uploaded as the u_coords table read by shaders/resize.glsl.
"""

import functools
import math
from fractions import Fraction

import numpy as np

from ..errors import UnsupportedOpError, quote
from ..graph.graph import Node
from .base import Op, register

HALF = Fraction(1, 2)
ROUNDING = {
    "round_prefer_floor": lambda x: math.ceil(x - HALF),
    "round_prefer_ceil": lambda x: math.floor(x + HALF),
    "floor": math.floor,
    "ceil": math.ceil,
}
COORDINATE_MODES = ("asymmetric", "half_pixel", "pytorch_half_pixel", "align_corners",
                    "tf_half_pixel_for_nn", "half_pixel_symmetric")
DEFAULTS = {  # op type -> (coordinate_transformation_mode, nearest_mode)
    "Resize": ("half_pixel", "round_prefer_floor"),
    "Upsample": ("asymmetric", "floor"),
}
RESIZES = tuple(DEFAULTS)  # the op types this class runs (and glcnn/train/backward.py trains)


def fused_upscale(resize: Node) -> dict:
    """The attribute an op that reads `resize`'s input upscaled itself carries in its place
    (glcnn.graph.fuse_resize: an Add's "upsample", a Conv's "input_upsample"): {"op": its op
    type, **its attributes}."""
    return {"op": resize.op, **resize.attrs}


def unfused_resize(upscale: dict, name: str, source: str) -> Node:
    """The Resize node named `name`, reading `source`, that a `fused_upscale` attribute
    describes (for the references, the Conv's own check, and a Trainer running it apart)."""
    attrs = {k: v for k, v in upscale.items() if k != "op"}
    return Node(upscale["op"], name, [source], attrs)


@register(*RESIZES)
class Resize(Op):
    shader = "resize.glsl"

    def check(self):
        coordinates, rounding = DEFAULTS[self.node.op]
        self.mode = self.choice("mode", "nearest", ("nearest", "linear"))
        self.coordinates = self.choice("coordinate_transformation_mode", coordinates,
                                       COORDINATE_MODES)
        self.rounding = self.choice("nearest_mode", rounding, tuple(ROUNDING))
        self.choice("keep_aspect_ratio_policy", "stretch", ("stretch",))
        if int(self.node.attrs.get("antialias", 0)) and self.mode != "nearest":
            self.fail(f"antialias=1 with mode={quote(self.mode)} unsupported", UnsupportedOpError)
        self.scales, self.size = self.scales_and_size()

    def choice(self, key: str, default: str, allowed: tuple) -> str:
        value = self.node.attrs.get(key, default)
        if value not in allowed:
            self.fail(f"{key}={quote(value)} unsupported; supported: {', '.join(allowed)}",
                      UnsupportedOpError)
        return value

    def scales_and_size(self):
        """((sh, sw) as exact Fractions, (oh, ow)) from the `scales` or `sizes` attribute."""
        a, (c, h, w) = self.node.attrs, self.in_shapes[0]
        if ("scales" in a) == ("sizes" in a):
            self.fail("needs exactly one of the attributes scales, sizes", UnsupportedOpError)
        key = "scales" if "scales" in a else "sizes"
        values = [float(v) for v in a[key]]
        expected_nc = [1, 1] if key == "scales" else [1, c]
        if len(values) not in (2, 4) or (len(values) == 4 and values[:2] != expected_nc):
            self.fail(f"{key}={quote(a[key])} must be [h, w] or [{expected_nc[0]}, "
                      f"{expected_nc[1]}, h, w]: only H and W can be resized", UnsupportedOpError)
        if min(values[-2:]) <= 0:
            self.fail(f"{key}={quote(a[key])} must be positive", UnsupportedOpError)
        if key == "sizes":
            size = tuple(int(v) for v in values[-2:])
            scales = (Fraction(size[0], h), Fraction(size[1], w))
        else:
            size = (math.floor(h * values[-2]), math.floor(w * values[-1]))
            scales = (Fraction(values[-2]), Fraction(values[-1]))
        if self.node.op == "Upsample" and min(scales) < 1:
            self.fail(f"Upsample scales {quote(a[key])} must be ≥ 1; use Resize",
                      UnsupportedOpError)
        if min(size) < 1:
            self.fail(f"{key}={quote(a[key])} gives an empty output from {self.in_shapes[0]}")
        return scales, size

    def output_shape(self):
        return (self.in_shapes[0][0], *self.size)

    def defines(self):
        factors = self.integer_upscale()
        if factors is None:
            return {self.mode.upper(): 1}
        return {"NEAREST": 1, "UPSCALE_Y": factors[0], "UPSCALE_X": factors[1]}

    def integer_upscale(self) -> tuple[int, int] | None:
        """(ky, kx) when nearest output pixel (y, x) reads input (y div ky, x div kx) for every
        output pixel (a nearest upscale by whole factors, whatever the coordinate mode agrees
        to it), so the shader computes its source instead of reading the u_coords table; else
        None."""
        return self._whole_factors if self.mode == "nearest" else None

    @functools.cached_property
    def _whole_factors(self) -> tuple[int, int] | None:  # the exact table built once per op
        table = self.textures()["u_coords"]
        factors = []
        for row, axis in ((1, 0), (0, 1)):
            n_in, n_out = self.in_shapes[0][1 + axis], self.size[axis]
            if n_out % n_in:
                return None
            k = n_out // n_in
            if not np.array_equal(table[row, :n_out, 0], np.arange(n_out) // k):
                return None
            factors.append(k)
        return tuple(factors)

    def textures(self):
        """u_coords: row 0 for output columns, row 1 for output rows; texels (i0, i1, t, 0)."""
        table = np.zeros((2, max(self.size), 4), np.float32)
        for row, axis in ((0, 1), (1, 0)):
            n_in, n_out = self.in_shapes[0][1 + axis], self.size[axis]
            alpha, beta = source_affine(self.coordinates, n_in, n_out, self.scales[axis])
            for o in range(n_out):
                table[row, o] = self.taps(alpha * o + beta, n_in)
        return {"u_coords": table}

    def taps(self, x: Fraction, n_in: int) -> tuple[int, int, float, int]:
        """(i0, i1, t, 0): nearest reads i0; linear mixes i0 and i1 by t."""
        if self.mode == "nearest":
            i = min(max(ROUNDING[self.rounding](x), 0), n_in - 1)
            return i, i, 0.0, 0
        x = min(max(x, Fraction(0)), Fraction(n_in - 1))
        first = math.floor(x)
        return first, min(first + 1, n_in - 1), float(x - first), 0

    def flops(self):
        return int(np.prod(self.output_shape())) * (1 if self.mode == "nearest" else 6)


def source_affine(mode: str, n_in: int, n_out: int, s: Fraction) -> tuple[Fraction, Fraction]:
    """(α, β) of the source coordinate α·o + β, as in the module's table."""
    if n_out == 1 and mode in ("align_corners", "pytorch_half_pixel"):
        return Fraction(0), Fraction(0)
    if mode == "align_corners":
        return Fraction(n_in - 1, n_out - 1), Fraction(0)
    if mode == "asymmetric":
        return 1 / s, Fraction(0)
    if mode == "tf_half_pixel_for_nn":
        return 1 / s, HALF / s
    beta = HALF / s - HALF  # half_pixel, pytorch_half_pixel
    if mode == "half_pixel_symmetric":
        beta += Fraction(n_in, 2) * (1 - n_out / (s * n_in))
    return 1 / s, beta
