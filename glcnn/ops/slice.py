"""Slice on the spatial axes with positive steps, and a channel range (ONNX Slice).

y[c, oy, ox] = x[c0 + c, y0 + oy·sy, x0 + ox·sx]  (YOLOv5's Focus: x[..., ::2, ::2], ...)

| attribute | meaning                                                      |
|-----------|--------------------------------------------------------------|
| starts    | first index per axis (negative counts from the end)          |
| ends      | one past the last index (clamped to the size, like ONNX)     |
| axes      | NCHW axes: 1 (C), 2 (H), 3 (W) or -3..-1; default (2, 3)     |
| steps     | positive, per axis (default 1); 1 on the channel axis        |
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
        steps = [int(v) for v in a.get("steps", [1] * len(starts))]
        if len(starts) != len(ends) or len(axes) != len(starts) or \
                len(steps) != len(starts) or not set(axes) <= {1, 2, 3} or \
                len(set(axes)) != len(axes):
            self.fail(f"starts/ends/axes/steps {starts}/{ends}/{a.get('axes')}/{a.get('steps')} "
                      "must slice each of axes 1 (C), 2 (H) and 3 (W) at most once",
                      UnsupportedOpError)
        if any(s < 1 for s in steps) or any(s != 1 for s, ax in zip(steps, axes) if ax == 1):
            self.fail(f"steps {steps} on axes {axes} unsupported; steps must be positive, "
                      "and 1 on the channel axis", UnsupportedOpError)
        self.window = {axis: range(size) for axis, size in zip((1, 2, 3), self.in_shapes[0])}
        for start, end, axis, step in zip(starts, ends, axes, steps):
            self.window[axis] = range(*slice(int(start), int(end), step).indices(
                len(self.window[axis])))  # clamps as ONNX
        if any(len(r) == 0 for r in self.window.values()):
            self.fail(f"slice (channels, rows, cols) = {self.window[1]}, {self.window[2]}, "
                      f"{self.window[3]} is empty")

    def output_shape(self):
        return tuple(len(self.window[axis]) for axis in (1, 2, 3))

    def defines(self):
        first = self.window[1].start
        return {"CHANNEL_OFFSET": 1} if first % 4 else {}

    def uniforms(self):
        rows, cols, channels = self.window[2], self.window[3], self.window[1]
        return {"u_origin": (cols.start, rows.start), "u_step": (cols.step, rows.step),
                "u_channel0": channels.start}
