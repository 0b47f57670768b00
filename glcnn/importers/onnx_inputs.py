"""Which dims of an ONNX model's inputs are open, read without importing the model (no GL).

`glcnn.load` asks this at every load of an `.onnx` file, so it must cost next to nothing: the
protobuf wire format is walked over a memory map of the file (`onnx_wire`), reading only
ModelProto.graph.input and the initializer names (the pages of the weights are never
touched, and the onnx package is not imported). A file the walker does not expect is read
by onnx instead, with the importer's own errors.

Open dims are those without a positive `dim_value` (a `dim_param` such as "height", -1, or
nothing). A 4-D input (N, C, H, W) may leave N open (glcnn pins it to 1) and H, W (bound when
the model is specialised for a size); an open C, or an open dim of any other input, is
refused. A channels-last input (N, H, W, C), as Keras models converted by tf2onnx have, is
one with a fixed last dim read by a Transpose (0, 3, 1, 2) (to NCHW for the Convs); its open
dims are H, W at axes 1, 2 (`spatial_axes`), so the graph nodes are walked too (their
attributes only: a few bytes each).
"""

import mmap
from pathlib import Path

from ..errors import GlcnnError, UnsupportedOpError, quote
from . import onnx_wire
from .onnx_fold import onnx_module
from .onnx_wire import LENGTH, VARINT, WireError

_fields, _signed = onnx_wire._fields, onnx_wire._signed  # the walker's own readers

MODEL_GRAPH, GRAPH_NODE, GRAPH_INITIALIZER, GRAPH_INPUT = 7, 1, 5, 11
NODE_INPUT, NODE_OP_TYPE, NODE_ATTRIBUTE = 1, 4, 5  # NodeProto
ATTR_NAME, ATTR_INTS = 1, 8                         # AttributeProto
TO_NCHW = (0, 3, 1, 2)  # the Transpose perm that reads a channels-last input
VALUE_NAME, VALUE_TYPE = 1, 2                 # ValueInfoProto
TYPE_TENSOR, TENSOR_SHAPE, SHAPE_DIM = 1, 2, 1  # TypeProto.tensor_type, .shape, .dim
DIM_VALUE = 1                                 # TensorShapeProto.Dimension.dim_value
TENSOR_NAME = 8                               # TensorProto.name


def open_inputs(path) -> dict[str, tuple]:
    """The inputs of ONNX model `path` whose H or W is open, in the model's own layout with
    "H" / "W" in place of each open size: {"input": (1, 3, "H", "W")}, or for a channels-last
    input {"input_1": (1, "H", "W", 3)}.

    Returns:
        {input name: (1, C, H, W) or (1, H, W, C)}; {} for a model with static sizes (or one
        whose inputs the importer will refuse for another reason, such as an input that is
        not 4-D).
    Raises:
        UnsupportedOpError: an open C.
        ModelFileError: onnx is not installed (for a file the walker does not expect).
    """
    try:
        declared, perms = _read_wire(Path(path))
    except (OSError, ValueError, IndexError, WireError):
        declared, perms = _read_protobuf(path)
    filename = Path(path).name
    return {name: labelled for name, dims in declared.items()
            if (labelled := _labelled(filename, name, dims, perms.get(name, ()))) is not None}


def spatial_axes(dims, perms=()) -> tuple[int, int]:
    """The axes of H and W in a 4-D input's `dims` (None where open): (1, 2) for a
    channels-last input (a fixed last dim, read by a Transpose (0, 3, 1, 2) among the
    Transpose `perms` reading it), else (2, 3)."""
    channels_last = dims[3] is not None and any(tuple(p) == TO_NCHW for p in perms)
    return (1, 2) if channels_last else (2, 3)


def transpose_perms(nodes, name: str) -> list[tuple]:
    """The perms of the Transpose `nodes` (onnx NodeProtos) reading tensor `name`."""
    return [tuple(a.ints) for node in nodes if node.op_type == "Transpose" and name in node.input
            for a in node.attribute if a.name == "perm"]


def image_axes(graph, info) -> tuple[int, int]:
    """The axes of H and W of 4-D input `info` (an onnx ValueInfoProto) of onnx GraphProto
    `graph` (see `spatial_axes`), for the importer.

    Raises:
        UnsupportedOpError: the channel axis is open.
    """
    dims = [d.dim_value if d.dim_value > 0 else None for d in info.type.tensor_type.shape.dim]
    h, w = spatial_axes(dims, transpose_perms(graph.node, info.name))
    if dims[3 if h == 1 else 1] is None:
        raise UnsupportedOpError(f"input {quote(info.name)} leaves its channels open; only "
                                 "the height and width of an image may be open")
    return h, w


def _labelled(filename: str, name: str, dims, perms=()) -> tuple | None:
    """(1, C, H, W) or (1, H, W, C) of a 4-D input with "H"/"W" for open sizes; None if
    nothing is open."""
    if dims is None or len(dims) != 4 or all(d is not None for d in dims[1:]):
        return None  # not an image input: the importer says what it takes (rank, batch)
    h, w = spatial_axes(dims, perms)
    c = 3 if h == 1 else 1
    if dims[c] is None:
        raise UnsupportedOpError(
            f"{filename}: input {quote(name)} has shape "
            f"[{', '.join('?' if d is None else str(d) for d in dims)}]; only the height and "
            "width of a 4-D image input, (N, C, H, W) or (N, H, W, C) read by a Transpose "
            "(0, 3, 1, 2), may be open (C must be fixed)")
    labelled = [1, *dims[1:]]
    labelled[h], labelled[w] = dims[h] or "H", dims[w] or "W"
    return tuple(labelled)


def _read_wire(path: Path) -> tuple[dict[str, list | None], dict[str, list[tuple]]]:
    """({graph input that is no initializer: dims (None where open), or None if unranked},
    {tensor: perms of the Transposes reading it})."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        view = memoryview(data)
        try:
            return _graph_inputs(view)
        finally:
            view.release()


def _graph_inputs(data) -> tuple[dict, dict]:
    graphs = [f for f in _fields(data, 0, len(data)) if f[0] == MODEL_GRAPH and f[1] == LENGTH]
    if len(graphs) != 1:
        raise WireError("not one graph")
    inputs, initializers, perms = {}, set(), {}
    for number, wire, _, start, end in _fields(data, graphs[0][3], graphs[0][4]):
        if number == GRAPH_INPUT and wire == LENGTH:
            name, dims = _value_info(data, start, end)
            inputs[name] = dims
        elif number == GRAPH_INITIALIZER and wire == LENGTH:
            initializers.add(_string(data, start, end, TENSOR_NAME))
        elif number == GRAPH_NODE and wire == LENGTH and \
                _string(data, start, end, NODE_OP_TYPE) == "Transpose":
            perm = _perm(data, start, end)
            for name in _strings(data, start, end, NODE_INPUT):
                perms.setdefault(name, []).append(perm)
    return {n: d for n, d in inputs.items() if n not in initializers}, perms


def _perm(data, start, end) -> tuple:
    """The `perm` ints of a Transpose NodeProto (packed or not); () if it has none."""
    perm = ()
    for attr in _messages(data, start, end, NODE_ATTRIBUTE):
        if _string(data, *attr, ATTR_NAME) == "perm":
            perm = []
            for n, w, _, b, e in _fields(data, *attr):
                if n == ATTR_INTS and w == VARINT:
                    perm.append(_signed(b))
                elif n == ATTR_INTS and w == LENGTH:
                    pos = b
                    while pos < e:
                        value, pos = onnx_wire._varint(data, pos)
                        perm.append(_signed(value))
            perm = tuple(perm)
    return perm


def _value_info(data, start, end) -> tuple[str, list | None]:
    name, dims = _string(data, start, end, VALUE_NAME), None
    for tensor in _messages(data, start, end, VALUE_TYPE, TYPE_TENSOR):
        for shape in _messages(data, *tensor, TENSOR_SHAPE):
            dims = [_dim(data, *dim) for dim in _messages(data, *shape, SHAPE_DIM)]
    return name, dims


def _messages(data, start, end, *path):
    """(start, end) of each embedded message at field `path` below data[start:end]."""
    for number, wire, _, begin, stop in _fields(data, start, end):
        if number == path[0] and wire == LENGTH:
            if len(path) == 1:
                yield begin, stop
            else:
                yield from _messages(data, begin, stop, *path[1:])


def _dim(data, start, end) -> int | None:
    values = [v for n, w, _, v, _ in _fields(data, start, end) if n == DIM_VALUE and w == VARINT]
    value = _signed(values[-1]) if values else 0
    return value if value > 0 else None


def _string(data, start, end, field: int) -> str:
    found = _strings(data, start, end, field)
    return found[-1] if found else ""


def _strings(data, start, end, field: int) -> list[str]:
    return [bytes(data[b:e]).decode() for n, w, _, b, e in _fields(data, start, end)
            if n == field and w == LENGTH]


def _read_protobuf(path) -> tuple[dict[str, list | None], dict[str, list[tuple]]]:
    """`_read_wire` through the onnx package (for files the walker does not expect); ({}, {})
    for a file onnx cannot read either, whose import then says what is wrong."""
    try:
        graph = onnx_module().load(str(path), load_external_data=False).graph
    except Exception:  # noqa: BLE001 - DecodeError, OSError, ...: the importer reports it
        return {}, {}
    initializers = {t.name for t in graph.initializer}
    inputs = {i.name: [d.dim_value if d.dim_value > 0 else None
                       for d in i.type.tensor_type.shape.dim]
              if i.type.tensor_type.HasField("shape") else None
              for i in graph.input if i.name not in initializers}
    return inputs, {name: transpose_perms(graph.node, name) for name in inputs}


def check_input_size(size) -> tuple[int, int]:
    """`size` as (H, W) of positive ints.

    Raises:
        GlcnnError: anything else, e.g. (W, H, C) or (0, 32).
    """
    try:
        h, w = (int(v) for v in size)
        ok = (h, w) == tuple(size) and h > 0 and w > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise GlcnnError(f"input_size={size!r}: expected (H, W), two positive integers")
    return h, w
