"""Slice restricted to the spatial axes (ONNX Slice on H and W, step 1): Cropping2D.

| attribute | meaning                                                      |
|-----------|--------------------------------------------------------------|
| starts    | first index per axis (negative counts from the end)          |
| ends      | one past the last index (clamped to the size, like ONNX)     |
| axes      | NCHW axes: 2 (H), 3 (W) or -2, -1; default (2, 3)            |
| steps     | must be 1 if given                                           |
"""

from ..errors import UnsupportedOpError
from .base import Op, register


@register("Slice")
class Slice(Op):
    shader = "slice.glsl"

    def check(self):
        a = self.node.attrs
        starts, ends = list(a.get("starts", ())), list(a.get("ends", ()))
        axes = [int(v) % 4 for v in a.get("axes", (2, 3)[:len(starts)])]
        if any(int(s) != 1 for s in a.get("steps", ())):
            self.fail(f"steps {a['steps']} unsupported; only step 1", UnsupportedOpError)
        if len(starts) != len(ends) or len(axes) != len(starts) or not set(axes) <= {2, 3}:
            self.fail(f"starts/ends/axes {starts}/{ends}/{a.get('axes')} must crop only "
                      "axes 2 (H) and 3 (W)", UnsupportedOpError)
        _, h, w = self.in_shapes[0]
        self.window = {2: (0, h), 3: (0, w)}
        for start, end, axis in zip(starts, ends, axes):
            size = h if axis == 2 else w
            self.window[axis] = slice(int(start), int(end)).indices(size)[:2]  # clamps as ONNX
        if any(stop <= first for first, stop in self.window.values()):
            self.fail(f"crop (rows, cols) = {self.window[2]}, {self.window[3]} is empty")

    def output_shape(self):
        (y0, y1), (x0, x1) = self.window[2], self.window[3]
        return self.in_shapes[0][0], y1 - y0, x1 - x0

    def uniforms(self):
        return {"u_origin": (self.window[3][0], self.window[2][0])}
