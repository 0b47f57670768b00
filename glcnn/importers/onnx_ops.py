"""Per-op converters of the ONNX importer: one ONNX node to glcnn nodes (or an alias).

Each converter reads its node through `OnnxImport` (glcnn/importers/onnx.py): `imp.act`
for activation inputs, `imp.const` for constants, and appends glcnn nodes with `imp.emit`.
`CONVERTERS` maps an ONNX op type to (converter, the glcnn op it needs, None for aliases):
the importer reports every op type missing there, or whose glcnn op is not registered.
Attributes are passed on with their ONNX names; constant inputs become attributes (Clip,
Pad, Resize, Slice, Reshape) or weights named as the glcnn op documents (W, B, scale, ...).
Axes are given to glcnn ops in NCHW terms, so a (1, F) tensor's axis 1 is the channel axis.
"""

import numpy as np

from ..errors import UnsupportedOpError, quote
from ..graph.graph import float32
from ..registry import enter
from .onnx_fold import attributes
from .onnx_layout import act_as, glcnn_const

CONVERTERS: dict[str, tuple] = {}


def converts(*op_types, needs="same"):
    """Register a converter for `op_types`; `needs` is the glcnn op it emits ("same": the
    ONNX op type itself; None: it only aliases).

    Raises:
        GlcnnError: an op type is given a converter twice.
    """
    def wrap(fn):
        enter(CONVERTERS, {op: (fn, op if needs == "same" else needs) for op in op_types},
              "the ONNX importer's CONVERTERS")
        return fn
    return wrap


def supported_op_types() -> set[str]:
    """ONNX op types the importer accepts: a converter whose glcnn op is registered."""
    from ..ops import REGISTRY
    return {op for op, (_, needs) in CONVERTERS.items() if needs is None or needs in REGISTRY}


def convert(imp, node) -> None:
    """Convert one ONNX node that does not fold to a constant.

    Raises:
        UnsupportedOpError: naming the node; also for an attribute or constant input of the
            wrong type or form that a converter's own checks do not name.
    """
    try:
        CONVERTERS[node.op_type][0](imp, node, attributes(node))
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ArithmeticError) as exc:
        fail(imp, node, f"malformed attribute or constant input ({type(exc).__name__}: "
                        f"{str(exc)[:200]})")


def fail(imp, node, message: str):
    raise UnsupportedOpError(imp.where(node, message))


def only(imp, node, attrs: dict, allowed) -> dict:
    """`attrs`, after checking every attribute is one of the names in `allowed`: an ONNX
    attribute the converter does not know must not be silently dropped."""
    for key in sorted(set(attrs) - set(allowed)):
        fail(imp, node, f"attribute {key}={quote(attrs[key])} is not supported")
    return dict(attrs)


def no_extra_outputs(imp, node, what: str):
    if any(node.output[1:]):
        fail(imp, node, f"output {list(node.output[1:])} ({what}) is not supported")


def per_channel(imp, node, value, x: str, what: str) -> np.ndarray:
    """A constant broadcast against activation `x` as a per-channel vector (C,) or a
    scalar (1,) of glcnn's channel axis; a constant varying along another glcnn axis is
    unsupported (ONNX broadcasting aligns trailing axes, so a (C,) constant against
    (1, C, H, W) varies along W, and against a channels-last (1, L, C) along the channels)."""
    value = glcnn_const(imp, node, float32(value), x, what)
    if value.shape[1:] != (1, 1):
        fail(imp, node, f"{what} of shape {list(np.shape(value))} (glcnn) broadcasts along an "
                        f"axis other than the channels of input {list(imp.shape(x))}; only "
                        "per-channel or scalar constants are supported")
    return value.reshape(-1)


def axis_nchw(imp, node, axis: int, x: str) -> int:
    """ONNX `axis` of activation `x` in NCHW terms (2-D (1, F): axis 1 is channels)."""
    rank = len(imp.shape(x))
    if not -rank <= axis < rank:
        fail(imp, node, f"axis={axis} is out of range for rank {rank}")
    axis %= rank
    if axis == 0:
        fail(imp, node, "the batch axis 0 is not supported (glcnn runs batch 1)")
    return axis


def weight(imp, node, index: int, what: str):
    """The constant at input `index` of `node` (None if the input is absent or "").

    Raises:
        UnsupportedOpError: the input is present but not a constant.
    """
    name = node.input[index] if len(node.input) > index else ""
    value = imp.const(name)
    if name and value is None:
        fail(imp, node, f"{what} (input {index}, {quote(name)}) must be an initializer or a "
             "constant")
    return value


# --- no-ops -------------------------------------------------------------------------------
@converts("Identity", needs=None)
def _identity(imp, node, attrs):
    """An alias of its input: no pass runs."""
    imp.alias(node, imp.act(node, 0))


@converts("Dropout", needs=None)
def _dropout(imp, node, attrs):
    """Inference Dropout is the identity; training mode (an input from opset 12, is_test=0
    before opset 7) and the mask output are refused."""
    training = weight(imp, node, 2, "training_mode")
    if (training is not None and bool(training)) or \
            not attrs.get("is_test", 0 if imp.opset < 7 else 1):
        fail(imp, node, "training mode is not supported (inference only)")
    no_extra_outputs(imp, node, "dropout mask")
    imp.alias(node, imp.act(node, 0))


@converts("Cast", needs=None)
def _cast(imp, node, attrs):
    """A cast to float32 is an alias; casting an activation to another type is refused."""
    if attrs.get("to") != 1:
        fail(imp, node, f"cast of an activation to element type {attrs.get('to')} is not "
                        "supported; glcnn computes in float32")
    imp.alias(node, imp.act(node, 0))


# --- pointwise --------------------------------------------------------------------------
_ACTIVATION_ATTRS = {"Relu": (), "Sigmoid": (), "Tanh": (), "HardSwish": (),
                     "LeakyRelu": ("alpha",), "Elu": ("alpha",), "HardSigmoid": ("alpha", "beta")}


@converts(*_ACTIVATION_ATTRS)
def _activation(imp, node, attrs):
    """The activation with its ONNX attributes; fused into the op before it where that op takes
    an epilogue."""
    attrs = only(imp, node, attrs, _ACTIVATION_ATTRS[node.op_type])
    imp.emit(node, node.op_type, [imp.act(node, 0)], attrs)


@converts("Clip")
def _clip(imp, node, attrs):
    """min and max from attributes (before opset 11) or constant inputs."""
    bounds = only(imp, node, attrs, ("min", "max"))  # opset < 11: attributes
    for index, key in ((1, "min"), (2, "max")):
        value = weight(imp, node, index, key)
        if value is not None:
            bounds[key] = float(value)
    imp.emit(node, "Clip", [imp.act(node, 0)], bounds)


@converts("PRelu")
def _prelu(imp, node, attrs):
    """A per-channel (or scalar) constant slope."""
    slope = per_channel(imp, node, weight(imp, node, 1, "slope"), node.input[0], "slope")
    imp.emit(node, "PRelu", [imp.act(node, 0)], {}, {"slope": slope})


# --- binary -------------------------------------------------------------------------------
def _tensors(imp, node) -> list[tuple[str, tuple]]:
    """Both activation inputs as (glcnn tensor, glcnn shape), rank-3 ones in one layout.

    Raises:
        UnsupportedOpError: inputs of different ranks (ONNX aligns their trailing axes,
            which glcnn's (C, H, W) placement does not keep).
    """
    ranks = {len(imp.shape(name)) for name in node.input[:2]}
    if len(ranks) != 1:
        fail(imp, node, f"inputs of shapes {[list(imp.shape(n)) for n in node.input[:2]]}: "
                        "only tensors of the same rank broadcast against each other")
    lc = any(name in imp.channels_last for name in node.input[:2])
    out = []
    for i in (0, 1):
        shape = imp.glcnn_shape(node.input[i], repr(node.input[i]))
        flipped = lc and ranks == {3} and node.input[i] not in imp.channels_last
        out.append((act_as(imp, node, i, lc), shape[::-1] if flipped else shape))
    return out


def _binary(imp, node, op: str, transform=None) -> None:
    """`op` on both inputs (the smaller second: glcnn's fast forms broadcast the second
    operand; `swap` keeps Sub and Div in ONNX order), or on the activation and a constant:
    per channel as weight B (C,), else B as a glcnn-shaped (C', H', W') array. `transform`
    maps a second-operand constant (x − c = x + (−c), x / c = x · (1 / c))."""
    consts = [imp.const(name) for name in node.input]
    if consts[0] is None and consts[1] is None:
        (a, sa), (b, sb) = _tensors(imp, node)
        swap = sa != sb and sa[1:] == (1, 1) and sa[0] in (sb[0], 1)
        attrs = {"swap": 1} if swap and op in ("Sub", "Div") else {}
        imp.emit(node, op, [b, a] if swap else [a, b], attrs)
        return
    i = 0 if consts[0] is None else 1
    value = consts[1 - i] if transform is None else transform(consts[1 - i])
    b = glcnn_const(imp, node, value, node.input[i], "constant operand")
    b = b.reshape(-1) if b.shape[1:] == (1, 1) else b
    swap = {"swap": 1} if i == 1 and op in ("Sub", "Div") else {}
    imp.emit(node, op, [imp.act(node, i)], swap, {"B": b})


@converts("Add", "Mul")
def _add_mul(imp, node, attrs):
    """Two tensors broadcast per axis (ONNX's rule on glcnn's placement), or a tensor and a
    constant of any broadcastable shape (per channel: fused into the op before it)."""
    _binary(imp, node, node.op_type)


@converts("Sub")
def _sub(imp, node, attrs):
    """a − b; x − c = x + (−c) (an Add fuses into a conv); c − x a Sub with swap."""
    if imp.const(node.input[1]) is not None and imp.const(node.input[0]) is None:
        _binary(imp, node, "Add", lambda c: -np.asarray(c, np.float64))
    else:
        _binary(imp, node, "Sub")


@converts("Div")
def _div(imp, node, attrs):
    """a / b (zero divisors as glcnn/ops/binary.py defines them); division by a constant is a
    Mul by its reciprocal (which fuses into the op before it)."""
    if imp.const(node.input[1]) is not None and imp.const(node.input[0]) is None:
        _binary(imp, node, "Mul", lambda c: 1.0 / np.asarray(c, np.float64))
    else:
        _binary(imp, node, "Div")


@converts("Max", "Min")
def _max_min(imp, node, attrs):
    """Elementwise max / min of exactly two operands: two tensors (broadcast as Add), or a
    tensor and a constant of any broadcastable shape."""
    if len(node.input) != 2 or not all(node.input):
        fail(imp, node, f"has {len(node.input)} inputs; only {node.op_type} of exactly 2 inputs "
                        "(two tensors, or a tensor and a constant) is supported")
    _binary(imp, node, node.op_type)


# --- unary math ---------------------------------------------------------------------------
@converts("Sqrt", "Erf")
def _unary(imp, node, attrs):
    """Elementwise, own pass."""
    imp.emit(node, node.op_type, [imp.act(node, 0)], only(imp, node, attrs, ()))


@converts("Pow")
def _pow(imp, node, attrs):
    """x^p with p a constant scalar (an initializer or a folded constant), as attribute
    `exponent`; GELU's and normalisations' x^2, x^0.5 and the like."""
    p = imp.const(node.input[1])
    if p is None:
        fail(imp, node, f"the exponent (input 1, {quote(node.input[1])}) is a tensor; only a "
                        "constant scalar exponent is supported")
    if np.asarray(p).size != 1:
        fail(imp, node, f"the exponent has shape {list(np.shape(p))}; only a constant scalar "
                        "exponent is supported")
    imp.emit(node, "Pow", [imp.act(node, 0)], {"exponent": float(np.asarray(p).reshape(-1)[0])})


# --- classifier heads (Softmax and MatMul: onnx_seq.py) --------------------------------
@converts("Gemm")
def _gemm(imp, node, attrs):
    """A vector times constant B (transB, alpha, beta) plus constant C."""
    attrs = only(imp, node, attrs, ("alpha", "beta", "transA", "transB"))
    weights = {"B": weight(imp, node, 1, "B"), "C": weight(imp, node, 2, "C")}
    imp.emit(node, "Gemm", [imp.act(node, 0)], attrs, weights)
