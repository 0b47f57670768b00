"""BatchNormalization (inference): y = (x − mean) / sqrt(var + ε) · scale + B.

| attribute | default | meaning                    |
|-----------|---------|----------------------------|
| epsilon   | 1e-5    | added to the variance      |

Weights (all (C,)): scale (γ), B (β), mean, var. Runs as y = x·a + b with
a = scale / sqrt(var + ε), b = B − mean·a precomputed in float64. After a Conv or
ConvTranspose the pass `glcnn.graph.passes.fold_batchnorm` removes it entirely.
"""

import numpy as np

from ..errors import WeightError
from ..layout import pack_channels
from .base import Op, register


def batchnorm_affine(node) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) such that BatchNormalization(x) = a·x + b per channel, in float64."""
    w = {k: np.asarray(node.weights[k], np.float64) for k in ("scale", "B", "mean", "var")}
    a = w["scale"] / np.sqrt(w["var"] + float(node.attrs.get("epsilon", 1e-5)))
    return a, w["B"] - w["mean"] * a


@register("BatchNormalization")
class BatchNormalization(Op):
    shader = "batchnorm.glsl"

    def check(self):
        c = self.in_shapes[0][0]
        for key in ("scale", "B", "mean", "var"):
            self.weight(key, (c,))
        if np.any(np.asarray(self.node.weights["var"]) + self.node.attrs.get("epsilon", 1e-5)
                  <= 0):
            self.fail("var + epsilon must be positive", WeightError)

    def textures(self):
        a, b = batchnorm_affine(self.node)
        return {"u_params": pack_channels(a, b)}
