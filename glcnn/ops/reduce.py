"""Reductions over the channel axis or the spatial axes.

| op                   | y over the reduced positions p              | inputs         |
|----------------------|---------------------------------------------|----------------|
| GlobalAveragePool    | mean_p x[c, p]          (axes fixed [2, 3]) | x              |
| GlobalMaxPool        | max_p x[c, p]           (axes fixed [2, 3]) | x              |
| ReduceMean           | mean_p x[p]                                 | x              |
| ReduceMax            | max_p x[p]                                  | x              |
| ReduceSum            | Σ_p x[p]                                    | x              |
| InstanceNormMean     | mean_p (x[c, p] − x[c, 0, 0])               | x              |
| InstanceNormVariance | mean_p (x[c, p] − x[c, 0, 0] − m[c])²       | x, m (C, 1, 1) |

| attribute | default  | meaning                                                        |
|-----------|----------|----------------------------------------------------------------|
| axes      | required | NCHW axes reduced (negatives allowed): [1] → (1, H, W),        |
|           |          | [2, 3] → (C, 1, 1), [3] → (C, H, 1), [2] → (C, 1, W); never N, |
|           |          | nor C together with H or W                                     |
| keepdims  | 1        | 0 only over both spatial axes: ONNX's (1, C) is glcnn's vector |
|           |          | (C, 1, 1) (an importer checks other keepdims=0 shapes itself)  |

No weights. The InstanceNorm ops are glcnn-internal: `glcnn.graph.passes.expand_reductions`
makes them from InstanceNormalization. Their shift by the channel's first value keeps float32
sums accurate when the mean is large and the spread small (x − x[c, 0, 0] is then exact).

One fragment per output texel loops over the reduced axis; with both spatial axes it sums
row by row (each row's sum formed on its own, then added), so one fragment walks a whole
plane; for large planes `expand_reductions` splits such a node into a W pass, run by H·S
fragments in parallel, and a short H pass. Over channels one fragment per pixel walks the
S = ceil(C/4) slices, summing blocks of 32 slices on their own (6625 classes: 1657 fetches).
"""

from ..errors import ShapeError, UnsupportedOpError, quote
from .base import Op, register

_KINDS = {"GlobalAveragePool": {}, "ReduceMean": {}, "GlobalMaxPool": {"REDUCE_MAX": 1},
          "ReduceMax": {"REDUCE_MAX": 1}, "ReduceSum": {"REDUCE_SUM": 1},
          "InstanceNormMean": {"SHIFT": 1}, "InstanceNormVariance": {"SHIFT": 1, "VARIANCE": 1}}


def spatial_axes(axes) -> tuple[int, ...]:
    """NCHW `axes` (negatives allowed) as sorted non-negative ints; ValueError if out of range."""
    if any(not -4 <= int(a) < 4 for a in axes):
        raise ValueError(axes)
    return tuple(sorted({int(a) % 4 for a in axes}))


@register(*_KINDS)
class Reduce(Op):
    shader = "reduce.glsl"

    def check(self):
        a = self.node.attrs
        if self.node.op.startswith("Global"):
            self.axes, keepdims = (2, 3), 1
        else:
            try:
                self.axes = spatial_axes(a.get("axes", (0, 1, 2, 3)))
            except ValueError:
                self.fail(f"axes={quote(a['axes'])} out of range for NCHW", UnsupportedOpError)
            keepdims = int(a.get("keepdims", 1))
        internal = self.node.op.startswith("InstanceNorm")
        if not self.axes or 0 in self.axes or (1 in self.axes and (internal or len(self.axes) > 1)):
            given = quote(a["axes"]) if "axes" in a else "all (default)"
            self.fail(f"axes={given} unsupported; the channel axis 1 alone, or the spatial "
                      "axes 2 (H) and 3 (W) of NCHW can be reduced", UnsupportedOpError)
        if keepdims == 0 and self.axes != (2, 3):
            self.fail(f"keepdims=0 with axes={quote(a['axes'])} unsupported; only over both "
                      "spatial axes (giving the vector (C, 1, 1))", UnsupportedOpError)
        if self.node.op == "InstanceNormVariance":
            c = self.in_shapes[0][0]
            if self.in_shapes[1] != (c, 1, 1):
                self.fail(f"mean input has shape {self.in_shapes[1]}, expected {(c, 1, 1)}",
                          ShapeError)

    @property
    def samplers(self):
        return ("u_input", "u_center") if self.node.op == "InstanceNormVariance" else ("u_input",)

    def output_shape(self):
        c, h, w = self.in_shapes[0]
        return 1 if 1 in self.axes else c, 1 if 2 in self.axes else h, 1 if 3 in self.axes else w

    def defines(self):
        over = {"OVER_C": 1 in self.axes, "OVER_H": 2 in self.axes, "OVER_W": 3 in self.axes}
        return _KINDS[self.node.op] | {key: 1 for key, on in over.items() if on}

    def flops(self):
        c, h, w = self.in_shapes[0]
        return c * h * w * (3 if self.node.op == "InstanceNormVariance" else 1)
