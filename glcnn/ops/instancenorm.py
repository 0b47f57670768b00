"""InstanceNormalization: y = (x − μ[c]) / sqrt(σ²[c] + ε) · scale[c] + B[c], with μ and σ²
the mean and (biased) variance of channel c over its H×W plane.

| attribute | default | meaning                |
|-----------|---------|------------------------|
| epsilon   | 1e-5    | added to the variance  |

Weights: scale (C,), B (C,).

Statistics are computed two-pass and shifted: d = x − x[c, 0, 0] (exact in float32 when
the values are close, as with a large mean and a small spread), μ' = mean(d), then
σ² = mean((d − μ')²), y = (d − μ') / sqrt(σ² + ε) · scale + B. No E[x²] − E[x]².

Two ways to run it:
- as is (an un-optimised graph): one pass in which every texel computes its channel's
  statistics itself, 2·H·W fetches per texel. Allowed up to H·W = ONE_PASS_MAX_POSITIONS;
  larger planes raise UnsupportedOpError asking for `glcnn.graph.passes.optimize`.
- after `glcnn.graph.passes.expand_reductions` (run by `optimize` and so by `glcnn.load`):
  InstanceNormMean(x) → μ', InstanceNormVariance(x, μ') → σ² (see glcnn/ops/reduce.py,
  each split into a W and an H pass on large planes), then InstanceNormApply(x, μ', σ²),
  which takes the same attributes and weights and can carry a fused activation.
"""

from ..errors import ShapeError, UnsupportedOpError
from ..layout import pack_channels
from .base import Op, register

# 64×64: a one-pass texel then reads 8192 texels, a whole pass 2·(H·W)² per channel slice.
ONE_PASS_MAX_POSITIONS = 4096


@register("InstanceNormalization")
class InstanceNormalization(Op):
    shader = "instancenorm.glsl"
    clamp_activations = True
    stats_inputs = False  # True: mean and variance are inputs 1 and 2 (InstanceNormApply)

    def check(self):
        c = self.in_shapes[0][0]
        self.epsilon = float(self.node.attrs.get("epsilon", 1e-5))
        if not self.epsilon > 0:
            self.fail(f"epsilon={self.epsilon} must be positive", UnsupportedOpError)
        self.scale, self.bias = self.weight("scale", (c,)), self.weight("B", (c,))
        if self.stats_inputs:
            self._check_stats_inputs()

    def _check_stats_inputs(self):
        c = self.in_shapes[0][0]
        if len(self.in_shapes) < 3:
            self.fail(f"needs inputs x, mean and var; has {self.node.inputs}", ShapeError)
        for name, shape in zip(("mean", "var"), self.in_shapes[1:3]):
            if shape != (c, 1, 1):
                self.fail(f"{name} input has shape {shape}, expected {(c, 1, 1)}", ShapeError)

    def _refuse_large_plane(self):
        _, h, w = self.in_shapes[0]
        if h * w > ONE_PASS_MAX_POSITIONS:
            self.fail(f"a {h}×{w} plane ({h * w} positions) is too large to normalise in one "
                      f"pass (limit {ONE_PASS_MAX_POSITIONS}); run "
                      "glcnn.graph.passes.optimize(graph) first (glcnn.load does) to split it into "
                      "reduction passes",
                      UnsupportedOpError)

    def textures(self):
        # Refused here rather than in check() so that shape inference, and with it the pass
        # expanding this op, works on any size; Pipeline asks every op for its textures
        # before allocating anything, so refusing leaks no GL object.
        if not self.stats_inputs:
            self._refuse_large_plane()
        return {"u_params": pack_channels(self.scale, self.bias)}

    def defines(self):
        return {"STATS_INPUT": 1} if self.stats_inputs else {}

    def uniforms(self):
        return {"u_epsilon": self.epsilon}

    def flops(self):
        c, h, w = self.in_shapes[0]
        return c * h * w * (4 + (0 if self.stats_inputs else 4 * h * w))


@register("InstanceNormApply")
class InstanceNormApply(InstanceNormalization):
    """The last pass of an expanded InstanceNormalization: inputs x, μ' and σ² (C, 1, 1)."""

    samplers = ("u_input", "u_mean", "u_var")
    stats_inputs = True
