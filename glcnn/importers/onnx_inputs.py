"""Which dims of an ONNX model's inputs are open, read without importing the model (no GL).

`glcnn.load` asks this at every load of an `.onnx` file, so it must cost next to nothing: the
protobuf wire format is walked over a memory map of the file (`onnx_wire`), reading only
ModelProto.graph.input and the initializer names (the pages of the weights are never
touched, and the onnx package is not imported). A file the walker does not expect is read
by onnx instead, with the importer's own errors.

Open dims are those without a positive `dim_value` (a `dim_param` such as "height", -1, or
nothing). A 4-D input (N, C, H, W) may leave N open (glcnn pins it to 1) and H, W (bound when
the model is specialised for a size); an open C, or an open dim of any other input, is
refused.
"""

import mmap
from pathlib import Path

from ..errors import GlcnnError, UnsupportedOpError, quote
from . import onnx_wire
from .onnx_fold import onnx_module
from .onnx_wire import LENGTH, VARINT, WireError

_fields, _signed = onnx_wire._fields, onnx_wire._signed  # the walker's own readers

MODEL_GRAPH, GRAPH_INITIALIZER, GRAPH_INPUT = 7, 5, 11
VALUE_NAME, VALUE_TYPE = 1, 2                 # ValueInfoProto
TYPE_TENSOR, TENSOR_SHAPE, SHAPE_DIM = 1, 2, 1  # TypeProto.tensor_type, .shape, .dim
DIM_VALUE = 1                                 # TensorShapeProto.Dimension.dim_value
TENSOR_NAME = 8                               # TensorProto.name


def open_inputs(path) -> dict[str, tuple]:
    """The inputs of ONNX model `path` whose H or W is open, e.g. {"input": (1, 3, "H", "W")}.

    Returns:
        {input name: (1, C, H, W)} with "H" / "W" in place of each open size; {} for a model
        with static sizes (or one whose inputs the importer will refuse for another reason,
        such as an input that is not 4-D).
    Raises:
        UnsupportedOpError: an open C.
        ModelFileError: onnx is not installed (for a file the walker does not expect).
    """
    try:
        declared = _read_wire(Path(path))
    except (OSError, ValueError, IndexError, WireError):
        declared = _read_protobuf(path)
    filename = Path(path).name
    return {name: labelled for name, dims in declared.items()
            if (labelled := _labelled(filename, name, dims)) is not None}


def _labelled(filename: str, name: str, dims) -> tuple | None:
    """(1, C, H, W) of a 4-D input with "H"/"W" for open sizes; None if nothing is open."""
    if dims is None or len(dims) != 4 or all(d is not None for d in dims[1:]):
        return None  # not an image input: the importer says what it takes (rank, batch)
    if dims[1] is None:
        raise UnsupportedOpError(
            f"{filename}: input {quote(name)} has shape "
            f"[{', '.join('?' if d is None else str(d) for d in dims)}]; only the height and "
            "width of a 4-D (N, C, H, W) image input may be open (C must be fixed)")
    return (1, dims[1], dims[2] or "H", dims[3] or "W")


def _read_wire(path: Path) -> dict[str, list | None]:
    """{graph input that is no initializer: dims (None where open), or None if unranked}."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        view = memoryview(data)
        try:
            return _graph_inputs(view)
        finally:
            view.release()


def _graph_inputs(data) -> dict:
    graphs = [f for f in _fields(data, 0, len(data)) if f[0] == MODEL_GRAPH and f[1] == LENGTH]
    if len(graphs) != 1:
        raise WireError("not one graph")
    inputs, initializers = {}, set()
    for number, wire, _, start, end in _fields(data, graphs[0][3], graphs[0][4]):
        if number == GRAPH_INPUT and wire == LENGTH:
            name, dims = _value_info(data, start, end)
            inputs[name] = dims
        elif number == GRAPH_INITIALIZER and wire == LENGTH:
            initializers.add(_string(data, start, end, TENSOR_NAME))
    return {n: d for n, d in inputs.items() if n not in initializers}


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
    found = [bytes(data[b:e]).decode() for n, w, _, b, e in _fields(data, start, end)
             if n == field and w == LENGTH]
    return found[-1] if found else ""


def _read_protobuf(path) -> dict[str, list | None]:
    """`_read_wire` through the onnx package (for files the walker does not expect); {} for
    a file onnx cannot read either, whose import then says what is wrong."""
    try:
        graph = onnx_module().load(str(path), load_external_data=False).graph
    except Exception:  # noqa: BLE001 - DecodeError, OSError, ...: the importer reports it
        return {}
    initializers = {t.name for t in graph.initializer}
    return {i.name: [d.dim_value if d.dim_value > 0 else None
                     for d in i.type.tensor_type.shape.dim]
            if i.type.tensor_type.HasField("shape") else None
            for i in graph.input if i.name not in initializers}


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
