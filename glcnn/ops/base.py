"""The op contract: what each op declares so the pipeline can run it as one shader pass.

An op never touches GL. It declares its `.glsl` file, output shape, `#define`s, weight
textures (numpy arrays already laid out for upload) and uniforms; `glcnn.runtime.pipeline` does
the rest. Ops register under their ONNX op types with one decorator, `@register("Conv")` or
`@register("Resize", "Upsample")` for a class serving several.
"""

import math
import re
import weakref

import numpy as np

from ..errors import ShapeError, UnsupportedOpError, WeightError, quote
from ..graph.graph import FLOAT32_MAX, RESIDUAL_AFTER, Node, float32
from ..layout import pack_channels
from ..registry import enter

REGISTRY: dict[str, type["Op"]] = {}

# Activations that can run in any op's epilogue (see shaders/common.glsl), with the
# attributes each reads as (name, default) -> uniform slot.
ACTIVATION_DEFAULTS = {
    "Relu": {}, "Sigmoid": {}, "Tanh": {}, "HardSwish": {}, "Silu": {}, "PRelu": {},
    "LeakyRelu": {"alpha": 0.01},
    "Elu": {"alpha": 1.0},
    "HardSigmoid": {"alpha": 0.2, "beta": 0.5},
    "Clip": {"min": -3.4e38, "max": 3.4e38},
}
# Ops whose shader returns the op's own output from compute() (common.glsl applies the epilogue);
# Concat hosts the ReLU of a U-Net's up path, Resize/Pad/pools/DepthToSpace that of others.
EPILOGUE_HOSTS = ("Conv", "ConvTranspose", "BatchNormalization", "Add", "Mul",
                  "InstanceNormalization", "InstanceNormApply", "Gemm", "MatMul", "Concat", "Pad",
                  "Resize", "Upsample", "MaxPool", "AveragePool", "DepthToSpace",
                  "LayerNormalization")
# A per-channel y = y * scale + shift after the activation (attribute "affine": True).
AFFINE_WEIGHTS = ("affine_scale", "affine_shift")
# Activations with a backward pass (glcnn/train), each with its alpha's default (None: none):
# ActivationGrad's, and attrs["output_grad"]'s, an epilogue turning the dL/dy an op computes
# into dL/dz of y = f(z), reading y as its last input (shaders/activation_derivative.glsl).
# f' is computed from y (all a fused epilogue leaves): y > 0 iff z > 0 needs alpha > 0.
GRAD_ACTIVATIONS = {"Relu": None, "LeakyRelu": 0.01, "Sigmoid": None, "Tanh": None, "Elu": 1.0}
# No activation and the piecewise-linear activations as one form (shaders/common.glsl, ACT_CLAMP):
# y = clamp(a·x + b, lo, hi), times x for HardSwish, or x (u_act_on = 0). Each activation's
# ((lo, hi), (a, b, times x)); None takes the activation's own parameters in their order
# (Clip's min and max, HardSigmoid's alpha and beta).
CLAMP_FORMS = {"Relu": ((0.0, math.inf), (1.0, 0.0, 0.0)), "Clip": (None, (1.0, 0.0, 0.0)),
               "HardSigmoid": ((0.0, 1.0), None), "HardSwish": ((0.0, 1.0), (1 / 6, 0.5, 1.0))}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def register(*op_types: str):
    """Class decorator: make `cls` the implementation of each ONNX op type in `op_types`
    (one class may serve several: `@register("Resize", "Upsample")`).

    Raises:
        GlcnnError: an op type is registered twice.
    """
    def wrap(cls):
        enter(REGISTRY, dict.fromkeys(op_types, cls), "the op registry")
        return cls
    return wrap


def make_op(node: Node, in_shapes: list[tuple]) -> "Op":
    """Instantiate the registered op for `node`, validating its attributes and weights.

    Raises:
        UnsupportedOpError, ShapeError, WeightError: naming the layer. An attribute of the
            wrong type or form (a string where a list of ints belongs, a NaN scale, ...)
            that an op's checks do not name is reported as UnsupportedOpError here.
    """
    cls = REGISTRY.get(node.op)
    if cls is None:
        raise UnsupportedOpError(f"layer {quote(node.name)}: op type {quote(node.op)} is not "
                                 f"supported; supported: {', '.join(sorted(REGISTRY))}")
    try:
        return cls(node, in_shapes)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ArithmeticError) as exc:
        raise UnsupportedOpError(f"layer {quote(node.name)} ({node.op}): malformed attributes "
                                 f"{quote(node.attrs, 200)} or weights "
                                 f"{quote(sorted(node.weights))} for inputs {in_shapes} "
                                 f"({type(exc).__name__}: {str(exc)[:200]})") from None


class Op:
    """Base of every op. Subclasses set `shader` and override the declaring methods.

    `samplers` names the shader sampler for each graph input, in order; each also gets an
    `ivec4 <sampler>_shape` uniform (C, H, W, grid columns).
    """

    shader: str = ""
    samplers: tuple[str, ...] = ("u_input",)
    takes_input_activation = False  # attrs["input_activation"] (convs: ops/conv.py)
    # True: no activation, Relu, Clip, HardSigmoid and HardSwish share one program (ACT_CLAMP,
    # CLAMP_FORMS in uniforms). Worth it for ops whose programs take long to JIT and come in
    # several (MobileNetV2's 1x1 convs; fast style's InstanceNorm with and without Relu; PP-OCR's
    # convs with and without HardSwish, its SE convs' HardSigmoid); costs a multiply-add and
    # two selects per output texel.
    clamp_activations = False
    # Weight samplers the pipeline may give as buffer textures (texelFetch(samplerBuffer)),
    # defining <NAME>_BUFFER (u_weights -> WEIGHTS_BUFFER) and the uniform <sampler>_width,
    # the layout's row length; where the layout has more texels than the GL allows in one,
    # a 2D texture as usual.
    buffer_samplers: tuple[str, ...] = ()

    def __init__(self, node: Node, in_shapes: list[tuple]):
        self.node = node
        self.in_shapes = [tuple(int(v) for v in s) for s in in_shapes]
        self.check()
        self._check_epilogue()

    @property
    def op_type(self) -> str:
        return self.node.op

    # --- what subclasses declare -------------------------------------------------
    def check(self) -> None:
        """Validate attributes and weights; raise a GlcnnError naming the layer."""

    def output_shape(self) -> tuple[int, int, int]:
        return self.in_shapes[0]

    def defines(self) -> dict:
        return {}

    def textures(self) -> dict[str, np.ndarray]:
        """Weight textures: sampler name -> (height, width, 4) float32."""
        return {}

    def texture_shapes(self) -> dict[str, tuple[int, int, int]]:
        """The shapes of `textures()`; an op with large textures (a conv's filter bank) says
        them without laying the weights out, so a Pipeline can check sizes first and lay
        textures out while it uploads others."""
        return {k: v.shape for k, v in self.textures().items()}

    def uniforms(self) -> dict:
        return {}

    def flops(self) -> int:
        """Multiply-adds ×2 (or elementwise ops) for one inference."""
        return int(np.prod(self.output_shape()))

    def block_step(self) -> int | None:
        """If this op's shader implements compute_block() (shaders/common.glsl, "Spatial
        blocking"), the distance between the pixels of one block; None otherwise."""
        return None

    def block_defines(self) -> dict:
        """Defines that only compute_block() reads: the pipeline adds them to `defines()`
        for a blocked pass only, so direct passes that differ in nothing else share a
        program (each program costs 0.1-0.35 s of llvmpipe JIT at a cold first run)."""
        return {}

    # --- shared helpers --------------------------------------------------------------
    def fail(self, message: str, error=ShapeError):
        raise error(f"layer {quote(self.node.name)} ({self.node.op}): {message}")

    def weight(self, key: str, shape: tuple | None = None) -> np.ndarray:
        """The float32 weight `key`, checked against `shape` (None entries match anything)."""
        if key not in self.node.weights:
            self.fail(f"missing weight {quote(key)}; has {quote(sorted(self.node.weights))}",
                      WeightError)
        w = float32(self.node.weights[key])
        if shape is not None and (w.ndim != len(shape) or any(
                e is not None and e != a for e, a in zip(shape, w.shape))):
            self.fail(f"weight {quote(key)} has shape {w.shape}, expected {shape}", WeightError)
        if not _all_finite(w):
            self.fail(f"weight {quote(key)} contains NaN or Inf (or values beyond float32)",
                      WeightError)
        return w

    def attr_ints(self, key: str, n: int, default) -> tuple[int, ...]:
        value = tuple(int(v) for v in self.node.attrs.get(key, default))
        if len(value) != n:
            self.fail(f"attribute {key}={quote(list(value))} must have {n} values",
                      UnsupportedOpError)
        return value

    # --- the fused epilogue: residual add, activation, affine (shaders/common.glsl) --------
    def _check_epilogue(self):
        if "input_activation" in self.node.attrs and not self.takes_input_activation:
            self.fail("input_activation is for Conv and ConvTranspose only", UnsupportedOpError)
        act = self.node.attrs.get("activation")
        if act and act.get("op") not in ACTIVATION_DEFAULTS:
            self.fail(f"cannot fuse activation {quote(act.get('op'))}", UnsupportedOpError)
        if act:
            self.check_activation(act)
        if self.node.attrs.get("residual") not in (None, False, True, RESIDUAL_AFTER):
            self.fail(f"residual {self.node.attrs['residual']!r} unknown; expected true (added "
                      f"before the activation) or {RESIDUAL_AFTER!r} (after it)")
        if self.node.attrs.get("residual") and self.in_shapes[-1] != self.output_shape():
            self.fail(f"residual input has shape {self.in_shapes[-1]}, "
                      f"output is {self.output_shape()}")
        if self.node.attrs.get("affine"):  # glcnn/graph/fuse_affine.py
            for key in AFFINE_WEIGHTS:
                self.weight(key, (self.output_shape()[0],))
        self._check_output_grad()

    def _check_output_grad(self):
        grad = self.node.attrs.get("output_grad")
        if not grad:
            return
        if not isinstance(grad, dict) or grad.get("op") not in GRAD_ACTIVATIONS:
            self.fail(f"output_grad {quote(grad)}: expected one of "
                      f"{', '.join(GRAD_ACTIVATIONS)}", UnsupportedOpError)
        if any(self.node.attrs.get(k) for k in ("activation", "residual", "affine")):
            self.fail("output_grad goes with no activation, residual or affine",
                      UnsupportedOpError)
        if self.in_shapes[-1] != self.output_shape():
            self.fail(f"output_grad's forward output has shape {self.in_shapes[-1]}, "
                      f"expected {self.output_shape()}")
        self.check_grad_alpha()

    def check_grad_alpha(self) -> None:
        """Refuses an output_grad (or ActivationGrad act) alpha ≤ 0 (GRAD_ACTIVATIONS)."""
        if self.grad_alpha() is not None and not self.grad_alpha() > 0:
            op = (self.node.attrs.get("output_grad") or self.node.attrs["act"])["op"]
            self.fail(f"{op} alpha={self.grad_alpha()} must be > 0 to train (its derivative "
                      "is read from its output)", UnsupportedOpError)

    def grad_alpha(self) -> float | None:
        """The alpha of attrs["output_grad"] (or of an ActivationGrad's "act")."""
        act = self.node.attrs.get("output_grad") or self.node.attrs["act"]
        default = GRAD_ACTIVATIONS[act["op"]]
        return None if default is None else float(act.get("alpha", default))

    def check_activation(self, act: dict) -> None:
        """An activation's parameters (ACTIVATION_DEFAULTS: LeakyRelu alpha, ...) must be
        numbers, finite except Clip's bounds (±inf: no bound); NaN is refused everywhere."""
        for key in ACTIVATION_DEFAULTS[act["op"]]:
            value = act.get(key, 0.0)
            if isinstance(value, bool | np.bool_) or \
                    not isinstance(value, int | float | np.integer | np.floating) or \
                    not (abs(value) <= FLOAT32_MAX or act["op"] == "Clip" and value == value):
                self.fail(f"{act['op']} {key}={quote(value)} must be a finite number",
                          UnsupportedOpError)

    def all_samplers(self) -> tuple[str, ...]:
        residual = ("u_residual",) if self.node.attrs.get("residual") else ()
        forward = ("u_forward",) if self.node.attrs.get("output_grad") else ()
        return self.samplers + residual + forward

    def _clamp_form(self) -> bool:
        """Whether the epilogue's activation runs as ACT_CLAMP (see `clamp_activations`)."""
        act = self.node.attrs.get("activation")
        return self.clamp_activations and (act is None or act["op"] in CLAMP_FORMS)

    def all_defines(self) -> dict:
        out = dict(self.defines())
        act = self.node.attrs.get("activation")
        if self._clamp_form():
            out["ACT_CLAMP"] = 1
        elif act:
            out["ACT_" + act["op"].upper()] = 1
        if self.node.attrs.get("residual"):
            out["RESIDUAL"] = 1
        if self.node.residual_after_activation:
            out["RESIDUAL_AFTER"] = 1
        if self.node.attrs.get("affine"):
            out["POST_AFFINE"] = 1
        if self.node.attrs.get("output_grad"):
            out |= {"OUTPUT_GRAD": 1, "GRAD_" + self.node.attrs["output_grad"]["op"].upper(): 1}
        for key in out:
            if not _NAME.match(key):
                self.fail(f"invalid define name {quote(key)}", UnsupportedOpError)
        return out

    def all_textures(self) -> dict[str, np.ndarray]:
        return dict(self.textures()) | self._epilogue_textures()

    def all_texture_shapes(self) -> dict[str, tuple[int, int, int]]:
        """The shapes of `all_textures()` (see `texture_shapes`)."""
        epilogue = {k: v.shape for k, v in self._epilogue_textures().items()}
        return {k: tuple(v) for k, v in self.texture_shapes().items()} | epilogue

    def _epilogue_textures(self) -> dict[str, np.ndarray]:
        act, out = self.node.attrs.get("activation"), {}
        if act and act["op"] == "PRelu":
            out["u_slope"] = pack_channels(self.prelu_slope(self.output_shape()[0]))
        if self.node.attrs.get("affine"):
            out["u_affine"] = pack_channels(*(self.weight(key) for key in AFFINE_WEIGHTS))
        return out

    def all_uniforms(self) -> dict:
        out = dict(self.uniforms())
        act = self.node.attrs.get("activation")
        clamp_form = self._clamp_form()
        if clamp_form:
            out["u_act_on"] = int(act is not None)  # 0: u_act and u_act_form go unread
        if act:
            params = ACTIVATION_DEFAULTS[act["op"]]  # the activation's parameters, in order
            values = tuple(([float(act.get(k, v)) for k, v in params.items()] + [0.0, 0.0])[:2])
            bounds, form = CLAMP_FORMS[act["op"]] if clamp_form else (None, None)
            out["u_act"] = bounds or values
            if clamp_form:
                out["u_act_form"] = form or (*values, 0.0)
        if self.node.attrs.get("output_grad"):
            out["u_grad_alpha"] = self.grad_alpha() or 0.0
        return out

    def prelu_slope(self, channels: int) -> np.ndarray:
        slope = self.weight("slope").reshape(-1)
        if slope.size not in (1, channels):
            self.fail(f"PRelu slope has {slope.size} values for {channels} channels", WeightError)
        return np.broadcast_to(slope, (channels,)).astype(np.float32)

    # --- printing ------------------------------------------------------------------------
    def summary(self) -> str:
        params = sum(int(np.asarray(w).size) for w in self.node.weights.values())
        return (f"{self.node.name:<24} {self.node.label:<24} {str(self.output_shape()):<18}"
                f" {params:>10,} {self.flops() / 1e6:>10.2f}")

    def __repr__(self):
        name = type(self).__name__
        return f"{name}({self.node.name!r}, {self.in_shapes} -> {self.output_shape()})"


# id -> read-only weight arrays already found finite. The graph passes build every op several
# times (for shapes); scanning a U-Net's 167 MB each time cost 0.1 s of its load. Only arrays
# nothing can write to are remembered (views of an ONNX file's bytes, folded weights).
_FINITE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def remember_finite(w: np.ndarray) -> None:
    """Record read-only `w` as found finite without scanning it: the weights of a prepared-model
    cache entry, scanned before the entry was written (glcnn.importers.prepared)."""
    if not w.flags.writeable:
        _FINITE[id(w)] = w


def all_finite(w: np.ndarray) -> bool:
    """True if `w` has no NaN or Inf (remembered for read-only arrays)."""
    return _all_finite(w)


def _all_finite(w: np.ndarray) -> bool:
    if _FINITE.get(id(w)) is w:
        return True
    if not np.isfinite(w).all():
        return False
    if not w.flags.writeable:
        _FINITE[id(w)] = w
    return True


def conv_output_size(size: int, k: int, s: int, d: int, pad: int) -> int:
    return math.floor((size + pad - d * (k - 1) - 1) / s) + 1
