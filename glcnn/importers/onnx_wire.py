"""Read an ONNX file's large weights as numpy views of the file's bytes.

`onnx.load` parses the whole ModelProto, copying every weight into protobuf, and
`numpy_helper.to_array` copies it again; for a 167 MB U-Net that was 0.3 s of a 1.2 s warm
load. Here the file is read once, the protobuf wire format of ModelProto.graph is walked,
and each large initializer stored as little-endian `raw_data` becomes a read-only numpy view
of the file's bytes. The ModelProto that protobuf parses is the file with those initializers'
`raw_data` left out (their name, dims and type stay), so it is small and fast to parse.

Anything this walker does not expect (a malformed or truncated file, external data, a
repeated graph field, a big-endian host) makes `split` return None, and the caller reads the
file the ordinary way, with its ordinary errors. Wire format:
https://protobuf.dev/programming-guides/encoding/ ; field numbers: onnx/onnx.proto.

`check_text` and `check_opsets` are the parsed model's first sanity checks (names that are
text, opset versions this onnx knows).
"""

import math
import sys

import numpy as np

from ..errors import ModelFileError, quote
from ..graph.graph import OP_TYPE

MODEL_GRAPH = 7           # ModelProto.graph
GRAPH_INITIALIZER = 5     # GraphProto.initializer
TENSOR_DIMS, TENSOR_DATA_TYPE, TENSOR_NAME, TENSOR_RAW_DATA = 1, 2, 8, 9
# TensorProto fields a weight may carry and still be read here: anything else (segment,
# typed *_data, external_data, data_location, doc_string, metadata) leaves it to protobuf.
TENSOR_FIELDS = {TENSOR_DIMS, TENSOR_DATA_TYPE, TENSOR_NAME, TENSOR_RAW_DATA}
# ONNX element types stored here as views (raw_data is little-endian by the ONNX spec).
DTYPES = {1: np.float32, 6: np.int32, 7: np.int64, 11: np.float64}
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


class WireError(ValueError):
    """The bytes are not the protobuf this walker expects (the caller falls back)."""


def split(data: bytes, min_elements: int) -> tuple[bytes, dict[str, np.ndarray]] | None:
    """Separate the large weights from the rest of a serialised ModelProto.

    Args:
        data: the file's bytes.
        min_elements: initializers with more elements than this become views; smaller ones
            (shape tensors, which onnx shape inference reads) stay in the protobuf.
    Returns:
        (the ModelProto bytes without those initializers' raw_data, {name: read-only array
        over `data`}), or None if the file is anything but the plain case.
    """
    if sys.byteorder != "little":
        return None
    try:
        return _split(memoryview(data), min_elements)
    except (WireError, IndexError, UnicodeDecodeError):
        return None


def _split(data: memoryview, min_elements: int):
    graphs = [f for f in _fields(data, 0, len(data)) if f[0] == MODEL_GRAPH]
    if len(graphs) != 1 or graphs[0][1] != LENGTH:  # protobuf would merge repeated graphs
        return None
    _, _, head, start, end = graphs[0]
    kept, weights, cursor = [], {}, start
    for number, wire, field_start, value_start, value_end in _fields(data, start, end):
        if number != GRAPH_INITIALIZER or wire != LENGTH:
            continue
        tensor = _tensor(data, value_start, value_end, min_elements)
        if tensor is None:
            continue
        if tensor[0] in weights:  # a duplicated name: protobuf's reading decides
            return None
        name, array, stripped = tensor
        weights[name] = array
        kept += [data[cursor:field_start], _key(GRAPH_INITIALIZER, LENGTH),
                 _varint_bytes(len(stripped)), stripped]
        cursor = value_end
    if not weights:
        return None
    body = b"".join([*kept, data[cursor:end]])
    model = b"".join([data[:head], _key(MODEL_GRAPH, LENGTH), _varint_bytes(len(body)), body,
                      data[end:]])
    return model, weights


def _tensor(data, start, end, min_elements):
    """(name, view, the TensorProto's bytes without raw_data) of one initializer, or None
    to leave it to protobuf."""
    dims, dtype, name, raw, kept = [], None, None, None, []
    for number, wire, field_start, value_start, value_end in _fields(data, start, end):
        if number not in TENSOR_FIELDS:
            return None
        if number == TENSOR_DIMS and wire == VARINT:
            dims.append(_signed(value_start))
        elif number == TENSOR_DIMS and wire == LENGTH:
            pos = value_start
            while pos < value_end:
                value, pos = _varint(data, pos)
                dims.append(_signed(value))
        elif number == TENSOR_DATA_TYPE and wire == VARINT:
            dtype = DTYPES.get(value_start)
        elif number == TENSOR_NAME and wire == LENGTH:
            name = bytes(data[value_start:value_end]).decode()
        elif number == TENSOR_RAW_DATA and wire == LENGTH and raw is None:
            raw = (value_start, value_end)
            continue
        else:
            return None
        kept.append(data[field_start:value_end])
    if dtype is None or name is None or raw is None or any(d < 0 for d in dims):
        return None
    count = math.prod(dims)
    if count <= min_elements or (raw[1] - raw[0]) != count * np.dtype(dtype).itemsize:
        return None
    view = np.frombuffer(data.obj, dtype, count, raw[0]).reshape(dims)
    return name, view, b"".join(kept)


def _fields(data, start, end):
    """(number, wire type, field start, value start, value end) of each field in
    data[start:end]; for a varint the value start is the value itself."""
    pos = start
    while pos < end:
        field_start = pos
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            value, pos = _varint(data, pos)
            yield number, wire, field_start, value, pos
        elif wire == LENGTH:
            length, pos = _varint(data, pos)
            if pos + length > end:
                raise WireError("a field runs past its message")
            yield number, wire, field_start, pos, pos + length
            pos += length
        elif wire in (FIXED64, FIXED32):
            value_start, pos = pos, pos + (8 if wire == FIXED64 else 4)
            yield number, wire, field_start, value_start, pos
        else:  # groups (3, 4) are not in onnx.proto; 6 and 7 are invalid
            raise WireError(f"wire type {wire}")
        if pos > end:
            raise WireError("a field runs past its message")


def _varint(data, pos):
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise WireError("varint longer than 10 bytes")


def _signed(value: int) -> int:
    """An int64 field's varint as a Python int (negative values use 10-byte two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _key(number: int, wire: int) -> bytes:
    return _varint_bytes(number << 3 | wire)


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def check_text(model, path) -> None:
    """Names and op types must be text: protobuf hands invalid UTF-8 over as bytes.

    Raises:
        ModelFileError: naming the first such field.
    """
    graph = model.graph
    fields = [o.domain for o in model.opset_import]
    fields += [i.name for i in [*graph.input, *graph.output, *graph.initializer,
                                *graph.value_info]]
    for node in graph.node:
        fields += [node.op_type, node.domain, node.name, *node.input, *node.output]
        fields += [a.name for a in node.attribute]
    bad = next((f for f in fields if not isinstance(f, str)), None)
    if bad is not None:
        raise ModelFileError(f"{path}: a name or op type is not valid UTF-8 ({bad[:40]!r}); "
                             "the file is corrupt")
    bad = next((n.op_type for n in graph.node if not OP_TYPE.match(n.op_type)), None)
    if bad is not None:  # so that messages may print op types bare
        raise ModelFileError(f"{path}: op type {quote(bad)} is not an identifier")


def check_opsets(model, path, onnx) -> None:
    """Opset versions must be ≥ 1, and the default domain's one that this onnx knows
    (onnxruntime refuses opset 99999 and negative opsets; onnx's checks would not run).

    Raises:
        ModelFileError: naming the domain and version.
    """
    newest = onnx.defs.onnx_opset_version()
    for opset in model.opset_import:
        default = opset.domain in ("", "ai.onnx")
        if opset.version < 1 or (default and opset.version > newest):
            raise ModelFileError(f"{path}: opset {opset.version} of domain "
                                 f"{quote(opset.domain or 'ai.onnx')} is not a valid version "
                                 f"(1 to {newest} for ai.onnx, with the installed onnx)")
