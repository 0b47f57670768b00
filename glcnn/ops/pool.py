"""MaxPool and AveragePool (ONNX semantics, NCHW, batch 1).

y[c, oy, ox] = reduce over taps (ky, kx) of x[c, oy·sy − pt + ky·dy, ox·sx − pl + kx·dx]

MaxPool reduces with max, padded taps being −inf. AveragePool sums the taps inside the
input and divides by the number of taps inside the input (count_include_pad = 0) or inside
the input plus its explicit pads (count_include_pad = 1); windows that ceil_mode adds past
the end padding are never counted (ONNX and PyTorch agree). Output size per axis:

    floor_or_ceil((in + pad_begin + pad_end − d·(k − 1) − 1) / s) + 1

and with ceil_mode a last window starting past the input and the begin padding is dropped.

| attribute         | default   | meaning                                                |
|-------------------|-----------|--------------------------------------------------------|
| kernel_shape      | required  | (kh, kw)                                               |
| strides           | (1, 1)    | (sy, sx)                                               |
| pads              | (0,0,0,0) | (top, left, bottom, right), may be asymmetric          |
| dilations         | (1, 1)    | (dy, dx); AveragePool since opset 19                   |
| ceil_mode         | 0         | 1: round the output size up (rule above)               |
| count_include_pad | 0         | AveragePool: 1 counts the explicit pads in the divisor |
| auto_pad          | NOTSET    | VALID (no pads), SAME_UPPER / SAME_LOWER: output       |
|                   |           | ceil(in / s), the odd pad at the end / the beginning   |
| storage_order     | 0         | MaxPool: only affects the Indices output (not produced)|

No weights. Refused: SAME_* with dilations (implementations disagree), windows holding no
input tap at all (pads ≥ the window), and unknown auto_pad values.
"""

from ..errors import UnsupportedOpError, quote
from .base import Op, register

AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


def pool_output_size(size, k, s, d, pad_begin, pad_end, ceil_mode) -> int:
    span = size + pad_begin + pad_end - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + pad_begin:
        out -= 1  # the last window must start inside the input or the begin padding
    return out


class Pool(Op):
    shader = "pool.glsl"

    def check(self):
        a = self.node.attrs
        if "kernel_shape" not in a:
            self.fail("attribute kernel_shape is required", UnsupportedOpError)
        self.kernel = self.attr_ints("kernel_shape", 2, ())
        self.strides = self.attr_ints("strides", 2, (1, 1))
        self.dilations = self.attr_ints("dilations", 2, (1, 1))
        if min(self.kernel + self.strides + self.dilations) < 1:
            self.fail(f"kernel_shape {self.kernel}, strides {self.strides} and dilations "
                      f"{self.dilations} must be ≥ 1", UnsupportedOpError)
        self.ceil_mode = bool(int(a.get("ceil_mode", 0)))
        self.pads = self.resolve_pads(str(a.get("auto_pad", "NOTSET")))
        if min(self.pads) < 0:  # onnxruntime refuses them too
            self.fail(f"pads {self.pads} must be ≥ 0", UnsupportedOpError)
        axes = zip(self.in_shapes[0][1:], self.kernel, self.strides, self.dilations,
                   self.pads[:2], self.pads[2:])
        self.size = tuple(pool_output_size(*axis, self.ceil_mode) for axis in axes)
        for axis in (0, 1):
            self.check_windows(axis)

    def resolve_pads(self, auto_pad: str) -> tuple[int, int, int, int]:
        """(top, left, bottom, right) for `auto_pad`; ONNX forbids pads with auto_pad set."""
        if auto_pad not in AUTO_PADS:
            self.fail(f"auto_pad={quote(auto_pad)} unknown; supported: {AUTO_PADS}",
                      UnsupportedOpError)
        if auto_pad == "NOTSET":
            return self.attr_ints("pads", 4, (0, 0, 0, 0))
        if any(self.attr_ints("pads", 4, (0, 0, 0, 0))):
            self.fail(f"auto_pad={quote(auto_pad)} together with non-zero pads", UnsupportedOpError)
        if auto_pad == "VALID":
            return (0, 0, 0, 0)
        if self.dilations != (1, 1):
            self.fail(f"auto_pad={quote(auto_pad)} with dilations {self.dilations}",
                      UnsupportedOpError)
        begin, end = [], []  # output ceil(in / s), with or without ceil_mode
        for n, k, s in zip(self.in_shapes[0][1:], self.kernel, self.strides):
            total = max(0, (-(-n // s) - 1) * s + k - n)
            small, large = total // 2, total - total // 2
            begin.append(large if auto_pad == "SAME_LOWER" else small)
            end.append(total - begin[-1])
        return (*begin, *end)

    def check_windows(self, axis: int):
        n, k, s, d, p = (self.in_shapes[0][1 + axis], self.kernel[axis], self.strides[axis],
                         self.dilations[axis], self.pads[axis])
        if self.size[axis] <= 0:
            self.fail(f"input {self.in_shapes[0]} gives an empty output with kernel "
                      f"{self.kernel} and pads {self.pads}")
        for o in range(self.size[axis]):
            if not any(0 <= o * s - p + t * d < n for t in range(k)):
                self.fail(f"pads {self.pads} leave output {'row' if axis == 0 else 'column'} "
                          f"{o} without any input tap (all padding)", UnsupportedOpError)

    def output_shape(self):
        return (self.in_shapes[0][0], *self.size)

    def defines(self):
        return {self.reduction: 1, "KH": self.kernel[0], "KW": self.kernel[1]}

    def uniforms(self):
        return {"u_stride": self.strides[::-1], "u_dilation": self.dilations[::-1],
                "u_pad": (self.pads[1], self.pads[0])}

    def flops(self):
        return int(self.output_shape()[0] * self.size[0] * self.size[1] * self.kernel[0]
                   * self.kernel[1])


@register("MaxPool")
class MaxPool(Pool):
    reduction = "MAX"


@register("AveragePool")
class AveragePool(Pool):
    reduction = "AVERAGE"

    def uniforms(self):
        # The divisor counts the taps inside this half-open box (x0, y0, x1, y1).
        _, h, w = self.in_shapes[0]
        pt, pl, pb, pr = self.pads if int(self.node.attrs.get("count_include_pad", 0)) else (0,) * 4
        return super().uniforms() | {"u_count_box": (-pl, -pt, w + pr, h + pb)}
