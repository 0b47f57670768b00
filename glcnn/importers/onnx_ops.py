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
    scalar (1,); a constant varying along N, H or W is unsupported (ONNX broadcasting
    aligns trailing axes, so a (C,) constant against (1, C, H, W) varies along W)."""
    value = float32(value)
    rank = len(imp.shape(x))
    if value.ndim > rank:
        fail(imp, node, f"{what} of shape {value.shape} has more axes than the input")
    dims = (1,) * (rank - value.ndim) + value.shape
    if any(d != 1 for i, d in enumerate(dims) if i != 1):
        fail(imp, node, f"{what} of shape {value.shape} broadcasts along an axis other than "
                        f"the channels of input {list(imp.shape(x))}; only per-channel or "
                        "scalar constants are supported")
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
    if attrs.get("to") != 1:
        fail(imp, node, f"cast of an activation to element type {attrs.get('to')} is not "
                        "supported; glcnn computes in float32")
    imp.alias(node, imp.act(node, 0))


# --- pointwise --------------------------------------------------------------------------
_ACTIVATION_ATTRS = {"Relu": (), "Sigmoid": (), "Tanh": (), "HardSwish": (),
                     "LeakyRelu": ("alpha",), "Elu": ("alpha",), "HardSigmoid": ("alpha", "beta")}


@converts(*_ACTIVATION_ATTRS)
def _activation(imp, node, attrs):
    attrs = only(imp, node, attrs, _ACTIVATION_ATTRS[node.op_type])
    imp.emit(node, node.op_type, [imp.act(node, 0)], attrs)


@converts("Clip")
def _clip(imp, node, attrs):
    bounds = only(imp, node, attrs, ("min", "max"))  # opset < 11: attributes
    for index, key in ((1, "min"), (2, "max")):
        value = weight(imp, node, index, key)
        if value is not None:
            bounds[key] = float(value)
    imp.emit(node, "Clip", [imp.act(node, 0)], bounds)


@converts("PRelu")
def _prelu(imp, node, attrs):
    slope = per_channel(imp, node, weight(imp, node, 1, "slope"), node.input[0], "slope")
    imp.emit(node, "PRelu", [imp.act(node, 0)], {}, {"slope": slope})


# --- binary -------------------------------------------------------------------------------
def _broadcast_last(imp, pairs) -> list[str]:
    """Glcnn tensor names of (glcnn name, ONNX name) `pairs`, a per-channel (C, 1, 1) one
    last: glcnn's Add and Mul broadcast only their second operand (both commute)."""
    vector = [imp.glcnn_shape(onnx_name, repr(onnx_name))[1:] == (1, 1) for _, onnx_name in pairs]
    names = [name for name, _ in pairs]
    return names[::-1] if vector[0] and not vector[1] else names


@converts("Add", "Mul")
def _add_mul(imp, node, attrs):
    consts = [imp.const(name) for name in node.input]
    if consts[0] is None and consts[1] is None:
        pairs = [(imp.act(node, i), node.input[i]) for i in (0, 1)]
        imp.emit(node, node.op_type, _broadcast_last(imp, pairs))
        return
    i = 0 if consts[0] is None else 1
    b = per_channel(imp, node, consts[1 - i], node.input[i], "constant operand")
    imp.emit(node, node.op_type, [imp.act(node, i)], {}, {"B": b})


def _tensor_pair(imp, node) -> list[str] | None:
    """Both inputs as glcnn tensors when glcnn's Sub / Div can take them in ONNX order (the
    second the same shape as the first, or (C, 1, 1)); None when only the first broadcasts."""
    first = imp.glcnn_shape(node.input[0], repr(node.input[0]))
    second = imp.glcnn_shape(node.input[1], repr(node.input[1]))
    if second[1:] == (1, 1) or first[1:] != (1, 1):
        return [imp.act(node, 0), imp.act(node, 1)]
    return None


@converts("Sub")
def _sub(imp, node, attrs):
    """a − b as a glcnn Sub; x − c = x + (−c) (an Add fuses into a conv); c − x and a (C,1,1)
    a minus a full b: (−1)·b + a."""
    x, c = imp.const(node.input[0]), imp.const(node.input[1])
    if c is not None:
        b = per_channel(imp, node, -np.asarray(c), node.input[0], "constant operand")
        imp.emit(node, "Add", [imp.act(node, 0)], {}, {"B": b})
        return
    pair = _tensor_pair(imp, node) if x is None else None
    if pair is not None:
        imp.emit(node, "Sub", pair)
        return
    minus = imp.emit(node, "Mul", [imp.act(node, 1)], {}, {"B": -np.ones(1)}, suffix="/neg")
    if x is None:
        imp.emit(node, "Add", [minus, imp.act(node, 0)])
    else:
        b = per_channel(imp, node, x, node.input[1], "constant operand")
        imp.emit(node, "Add", [minus], {}, {"B": b})


@converts("Div")
def _div(imp, node, attrs):
    """a / b as a glcnn Div (zero divisors as glcnn/ops/binary.py defines them); division by
    a constant becomes a Mul by its reciprocal (which fuses into the op before it)."""
    x, c = imp.const(node.input[0]), imp.const(node.input[1])
    if c is not None:
        b = per_channel(imp, node, 1.0 / np.asarray(c, np.float64), node.input[0], "divisor")
        imp.emit(node, "Mul", [imp.act(node, 0)], {}, {"B": b})
        return
    if x is not None:
        fail(imp, node, "a constant divided by a tensor is not supported")
    pair = _tensor_pair(imp, node)
    if pair is None:
        fail(imp, node, f"dividing {list(imp.shape(node.input[0]))} by "
                        f"{list(imp.shape(node.input[1]))}: only the divisor may broadcast")
    imp.emit(node, "Div", pair)


# --- unary math ---------------------------------------------------------------------------
@converts("Sqrt", "Erf")
def _unary(imp, node, attrs):
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


# --- shape-only ---------------------------------------------------------------------------
@converts("Flatten", "Reshape", "Squeeze", "Unsqueeze", needs=None)
def _reshape(imp, node, attrs):
    """A no-op when the glcnn shapes match ((1, C, 1, 1) <-> (1, C)), else Flatten."""
    x, out = imp.act(node, 0), node.output[0]
    source = imp.glcnn_shape(node.input[0], f"input {quote(node.input[0])}")
    target = imp.glcnn_shape(out, imp.output_of(node))
    if source == target:
        imp.alias(node, x)
    elif target == (int(np.prod(source)), 1, 1) and node.op_type in ("Flatten", "Reshape"):
        from ..ops import REGISTRY
        if "Flatten" not in REGISTRY:
            fail(imp, node, "flattening an image to a vector needs the glcnn Flatten op")
        imp.emit(node, "Flatten", [x], {"axis": 1})
    else:
        fail(imp, node, f"reshaping {list(imp.shape(node.input[0]))} to "
                        f"{list(imp.shape(out))} is not supported")


# --- classifier heads --------------------------------------------------------------------------
@converts("Softmax")
def _softmax(imp, node, attrs):
    attrs = only(imp, node, attrs, ("axis",))
    x, dims = node.input[0], imp.shape(node.input[0])
    axis = axis_nchw(imp, node, int(attrs.get("axis", -1 if imp.opset >= 13 else 1)), x)
    if imp.opset < 13 and int(np.prod(dims[axis + 1:])) != 1:
        fail(imp, node, f"Softmax-{imp.opset} normalises over all axes from {axis} of "
                        f"{list(dims)} together; only a single axis is supported")
    imp.emit(node, "Softmax", [imp.act(node, 0)], {"axis": axis})


@converts("Gemm")
def _gemm(imp, node, attrs):
    attrs = only(imp, node, attrs, ("alpha", "beta", "transA", "transB"))
    weights = {"B": weight(imp, node, 1, "B"), "C": weight(imp, node, 2, "C")}
    imp.emit(node, "Gemm", [imp.act(node, 0)], attrs, weights)


@converts("MatMul")
def _matmul(imp, node, attrs):
    if len(imp.shape(node.input[0])) != 2:
        fail(imp, node, f"input A of shape {list(imp.shape(node.input[0]))}: only a (1, K) "
                        "row vector times a constant matrix is supported")
    imp.emit(node, "MatMul", [imp.act(node, 0)], {}, {"B": weight(imp, node, 1, "B")})
