"""ONNX external data, read by glcnn itself and confined to the model's folder.

An ONNX tensor may keep its bytes in another file (`data_location = EXTERNAL`, with
`location`, `offset` and `length` entries). `onnx.load` follows those entries for dense
initializers and attribute tensors only, with checks that changed between onnx versions
(1.16-1.20 follow symbolic links out of the folder), and never for sparse tensors, which
`numpy_helper.to_array` later reads relative to the working folder. So glcnn parses models
with `load_external_data=False` and `inline` resolves every external reference of the model
(dense, sparse values and indices, Node attributes, subgraphs, functions, training graphs)
before anything else reads it:

- `location` must be a relative path without `..`, resolving (symbolic links followed) to a
  regular file inside the model's folder: absolute paths, `..`, links leading out, devices,
  FIFOs, sockets and folders are refused, with one message per rule that does not depend on
  whether the target exists;
- `offset` and `length` are checked against the file's size and the tensor's declared dims
  before reading, and only `length` bytes are read;
- all the external bytes of a model together stay within the memory budget.

The bytes become the tensor's `raw_data`, so nothing downstream (shape inference, constant
folding, onnxruntime in `glcnn diff`) ever sees an external reference.
"""

import math
import os
import stat

from ..errors import ModelFileError, quote
from ..limits import memory_budget, mib

EXTERNAL, DEFAULT = 1, 0  # onnx.TensorProto.DataLocation
STRING = 8  # onnx.TensorProto.STRING: no raw_data form
PACKED_4BIT = {21, 22, 23}  # UINT4, INT4, FLOAT4E2M1: two elements a byte
RULE = "glcnn reads external data only from regular files inside the model's folder"


def inline(model, path, onnx) -> list[str]:
    """Replace every external-data reference in `model` by the bytes it names.

    Args:
        model: a ModelProto parsed without its external data (changed in place).
        path: the model file; its folder is the only place external data may come from.
        onnx: the onnx module (for element sizes).
    Returns:
        The files read, relative to the model's (resolved) folder, sorted.
    Raises:
        ModelFileError: naming `path`, the tensor and the rule broken.
    """
    reader = _Reader(path, onnx)
    for tensor in _model_tensors(model):
        if tensor.data_location == EXTERNAL:
            reader.inline(tensor)
        elif len(tensor.external_data):  # ignored by onnx; dropped so no reader follows it
            tensor.ClearField("external_data")
    return sorted(reader.files)


def _model_tensors(model):
    """Every TensorProto of `model`, sparse tensors' values and indices included."""
    yield from _graph_tensors(model.graph)
    for function in model.functions:
        for node in function.node:
            yield from _node_tensors(node)
    for training in model.training_info:
        yield from _graph_tensors(training.initialization)
        yield from _graph_tensors(training.algorithm)


def _graph_tensors(graph):
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    for node in graph.node:
        yield from _node_tensors(node)


def _node_tensors(node):
    for attr in node.attribute:
        if attr.HasField("t"):
            yield attr.t
        yield from attr.tensors
        sparse = [attr.sparse_tensor] if attr.HasField("sparse_tensor") else []
        for s in [*sparse, *attr.sparse_tensors]:
            yield from (s.values, s.indices)
        for graph in [attr.g] if attr.HasField("g") else []:
            yield from _graph_tensors(graph)
        for graph in attr.graphs:
            yield from _graph_tensors(graph)


class _Reader:
    """Reads external data for one model file, keeping the total within the budget."""

    def __init__(self, path, onnx):
        self.path, self.onnx = path, onnx
        self.root = os.path.realpath(os.path.dirname(os.path.abspath(path)))
        self.files, self.total = set(), 0

    def inline(self, tensor) -> None:
        entries = {e.key: e.value for e in tensor.external_data}
        location = entries.get("location", "")
        real = self._confined(tensor, location)
        offset = self._number(tensor, entries, "offset", 0)
        length = self._number(tensor, entries, "length", None)
        expected = self._expected_bytes(tensor, location)
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            self._refuse(tensor, location, f"cannot be opened ({exc.strerror})")
        try:
            info = os.fstat(fd)
            size = info.st_size
            if not stat.S_ISREG(info.st_mode):  # replaced since it was checked
                self._refuse(tensor, location, "is not a regular file")
            length = size - offset if length is None else length
            self._check_range(tensor, location, offset, length, size, expected)
            data = _pread(fd, length, offset)
            if len(data) != length:
                self._refuse(tensor, location, "shrank while it was read")
        finally:
            os.close(fd)
        tensor.raw_data = data
        tensor.ClearField("external_data")
        tensor.data_location = DEFAULT
        self.files.add(os.path.relpath(real, self.root))

    def _confined(self, tensor, location: str) -> str:
        """The resolved path of `location`, checked by every rule (module docstring).
        Only the model's folder is looked at, so the outcome says nothing about other files."""
        parts = location.replace("\\", "/").split("/")
        if not location or "\x00" in location:
            self._refuse(tensor, location, "is empty or not a path")
        if os.path.isabs(location) or location.startswith("\\"):
            self._refuse(tensor, location, "is an absolute path")
        if ".." in parts:
            self._refuse(tensor, location, "climbs out with '..'")
        real = os.path.realpath(os.path.join(self.root, location))
        if real == self.root or os.path.commonpath([self.root, real]) != self.root:
            self._refuse(tensor, location, "leads outside the model's folder (a symbolic link)")
        try:
            mode = os.stat(real).st_mode
        except OSError:
            self._refuse(tensor, location, "does not exist in the model's folder")
        if not stat.S_ISREG(mode):
            self._refuse(tensor, location, "is not a regular file (a folder, device, FIFO or "
                                           "socket)")
        return real

    def _number(self, tensor, entries, key, default):
        if key not in entries:
            return default
        value = entries[key]
        if not (value.isascii() and value.isdigit()) or len(value) > 20:
            self._refuse(tensor, entries.get("location", ""),
                         f"has {key} {quote(value)}, not a non-negative integer")
        return int(value)

    def _expected_bytes(self, tensor, location) -> int | None:
        """Bytes the tensor's dims and element type need (None for an unknown type)."""
        if any(d < 0 for d in tensor.dims) or tensor.data_type == STRING:
            self._refuse(tensor, location, "belongs to a tensor of negative dims or strings")
        count = math.prod(tensor.dims)
        if tensor.data_type in PACKED_4BIT:
            return (count + 1) // 2
        try:
            return count * self.onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        except (KeyError, ValueError, TypeError):
            return None

    def _check_range(self, tensor, location, offset, length, size, expected) -> None:
        if offset > size or length > size - offset:
            self._refuse(tensor, location, f"asks for bytes {offset}..{offset + length} of a "
                                           f"{size}-byte file")
        if expected is not None and length != expected:
            self._refuse(tensor, location, f"holds {length} bytes where the tensor's dims "
                                           f"{list(tensor.dims)[:8]} need {expected}")
        self.total += length
        if self.total > memory_budget():
            self._refuse(tensor, location, f"brings the model's external data to "
                                           f"{mib(self.total)}, over the memory budget of "
                                           f"{mib(memory_budget())} (GLCNN_MEMORY_BUDGET)")

    def _refuse(self, tensor, location: str, rule: str):
        raise ModelFileError(f"{self.path}: tensor {quote(tensor.name)}: external data "
                             f"location {quote(location, 160)} {rule}; {RULE}")


def _pread(fd: int, length: int, offset: int) -> bytes:
    """`length` bytes at `offset`, or fewer if the file shrank since its size was checked."""
    chunks, done = [], 0
    while done < length:
        chunk = os.pread(fd, min(length - done, 1 << 30), offset + done)
        if not chunk:
            break
        chunks.append(chunk)
        done += len(chunk)
    return b"".join(chunks)  # one chunk: no copy
