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

Unary math (class `Math`, the same shader with a MATH_* define; each is a pass of its own, not
fused, and may carry a fused activation after it):

| op   | formula                                    | attributes                         |
|------|--------------------------------------------|------------------------------------|
| Sqrt | sqrt(max(x, 0))  (ONNX: NaN for x < 0)     |                                    |
| Erf  | erf(x), polynomial, ≤ 2e-7 relative        |                                    |
| Pow  | x^p, p a constant scalar                   | exponent p (a finite number)       |

Pow: p = 0 gives 1 everywhere; an integer p keeps the sign of x for odd p (|p| ≤ 16 by repeated
multiplication, so p = 2 is exact; else exp2(p·log2|x|)); a non-integer p reads x < 0 as 0
(ONNX: NaN); p = 0.5 is Sqrt. 0^p = +Inf for p < 0 and a result beyond float32 is ±Inf. GLSL
3.30 promises no NaN and leaves pow(x, y) undefined for x < 0, hence these definitions; |x| <
2^−126 counts as 0 (drivers may flush subnormals).
"""

import math
import numbers

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


# Pow's forms (shaders/activation.glsl, power()): the uniform u_pow = (form, |p|, odd, 0).
POW_ONE, POW_SQRT, POW_MULTIPLY, POW_INTEGER, POW_REAL = range(5)
POW_MAX_MULTIPLY = 16  # integer exponents up to this by repeated multiplication


@register("Sqrt", "Erf", "Pow")
class Math(Op):
    shader = "activation.glsl"

    def check(self):
        if self.node.op != "Pow":
            return
        p = self.node.attrs.get("exponent")
        if isinstance(p, bool) or not isinstance(p, numbers.Real) or not math.isfinite(p):
            self.fail(f"exponent={p!r} must be a finite number (Pow takes a constant scalar "
                      "exponent only)", UnsupportedOpError)
        self.exponent = float(p)

    def defines(self):
        return {"MATH_" + self.node.op.upper(): 1}

    def uniforms(self):
        if self.node.op != "Pow":
            return {}
        p = self.exponent
        integer = p == int(p)
        if p == 0 or p == 0.5:
            form = POW_ONE if p == 0 else POW_SQRT
        elif integer:
            form = POW_MULTIPLY if abs(p) <= POW_MAX_MULTIPLY else POW_INTEGER
        else:
            form = POW_REAL
        odd = integer and int(p) % 2 == 1
        return {"u_exponent": p, "u_pow": (form, int(min(abs(p), POW_MAX_MULTIPLY)), int(odd), 0)}
