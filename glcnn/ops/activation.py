"""Pointwise activations, by ONNX op type (and "Silu" = x·sigmoid(x)).

| op          | formula                              | attributes (default)          |
|-------------|--------------------------------------|-------------------------------|
| Relu        | max(x, 0)                            |                               |
| LeakyRelu   | x ≥ 0 ? x : α·x                      | alpha (0.01)                  |
| PRelu       | x ≥ 0 ? x : slope[c]·x               | weight slope: (C,), (C,1,1), (1,) |
| Clip        | min(max(x, min), max)  (ReLU6: 0, 6) | min, max (±3.4e38)            |
| Sigmoid     | 1 / (1 + e^−x)                       |                               |
| Tanh        | tanh(x)                              |                               |
| Elu         | x > 0 ? x : α·(e^x − 1)              | alpha (1.0)                   |
| HardSigmoid | clamp(α·x + β, 0, 1)                 | alpha (0.2), beta (0.5)       |
| HardSwish   | x · clamp(x/6 + 1/2, 0, 1)           |                               |
| Silu        | x · sigmoid(x)                       |                               |

All run the same shader: the identity, with the activation in the shared epilogue
(shaders/common.glsl), which is also how they fuse into a preceding Conv. One class serves
every name because the ops differ only in that epilogue define.
"""

from ..errors import UnsupportedOpError
from ..layout import pack_channels
from .base import ACTIVATION_DEFAULTS, Op, register


@register(*ACTIVATION_DEFAULTS)  # the activations the epilogue can fuse, and no others
class Activation(Op):
    shader = "activation.glsl"

    def check(self):
        if self.node.attrs.get("activation"):
            self.fail("an activation layer cannot carry a second fused activation",
                      UnsupportedOpError)
        if self.node.op == "PRelu":
            self.prelu_slope(self.in_shapes[0][0])
        # The epilogue machinery reads the activation from attrs["activation"].
        params = {k: self.node.attrs[k] for k in ACTIVATION_DEFAULTS[self.node.op]
                  if k in self.node.attrs}
        self.epilogue = {"op": self.node.op, **params}
        self.check_activation(self.epilogue)

    def all_defines(self):
        return super().all_defines() | {"ACT_" + self.node.op.upper(): 1}

    def all_uniforms(self):
        values = [float(self.epilogue.get(k, v))
                  for k, v in ACTIVATION_DEFAULTS[self.node.op].items()] + [0.0, 0.0]
        return super().all_uniforms() | {"u_act": tuple(values[:2])}

    def textures(self):
        if self.node.op == "PRelu":
            return {"u_slope": pack_channels(self.prelu_slope(self.in_shapes[0][0]))}
        return {}
