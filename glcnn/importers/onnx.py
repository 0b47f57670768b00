"""ONNX importer: a `.onnx` file (e.g. from `torch.onnx.export`) to a glcnn Graph (no GL).

Steps:
1. read and sanity-check the protobuf, large weights read apart as views of the file
   (`onnx_wire`) (`ModelFileError` naming the file otherwise); external data is read by
   glcnn, only from regular files inside the model's folder (`onnx_external`);
2. give a symbolic batch dimension the value 1, open H and W of 4-D inputs `input_size`
   (`onnx_inputs` says which are open), and run onnx shape inference;
3. fold everything computable from initializers and static shapes (`onnx_fold`): the
   Shape/Gather/Unsqueeze/Concat/Cast/Constant arithmetic PyTorch emits disappears;
4. check every remaining node has a converter and its glcnn op is registered, raising one
   `UnsupportedOpError` that lists every unsupported op type with its node names;
5. convert node by node (`onnx_ops`, `onnx_spatial`): constant inputs become weights
   (named as the glcnn op expects) or attributes (Clip min/max, Pad pads, Resize
   scales/sizes, Slice bounds); Identity, Dropout, float Casts and Reshape/Flatten/
   Squeeze/Unsqueeze that keep the glcnn shape ((1, C, 1, 1) <-> (1, C)) become aliases.

Tensors: 4-D (1, C, H, W) maps to glcnn (C, H, W), 2-D (1, F) to (F, 1, 1), rank 3 to
(C, 1, L) either way round, rank 5 and 6 keep their flat order (`onnx_layout`); another rank
or a batch > 1 raises `UnsupportedOpError`. Names: graph inputs and outputs keep their
ONNX names; every other tensor keeps its ONNX name with "::" (the .npz key separator)
replaced by "_", made unique. `Graph.meta["onnx_output_shapes"]` records the ONNX shape of
each output, e.g. [1, 1000] for a classifier, so a caller can restore it.
"""

import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..errors import (
    GlcnnError,
    ModelFileError,
    ShapeError,
    UnsupportedOpError,
    kinds_and_names,
    quote,
)
from ..graph.graph import Graph, Node, bind_output, float32
from ..limits import memory_budget, mib
from . import (  # noqa: F401 (onnx_spatial, onnx_moves, onnx_seq register converters)
    onnx_external,
    onnx_fold,
    onnx_layout,
    onnx_moves,
    onnx_seq,
    onnx_spatial,
    onnx_wire,
)
from .onnx_fold import onnx_module
from .onnx_inputs import check_input_size
from .onnx_layout import dims_text

FLOAT = 1  # onnx.TensorProto.FLOAT


def load(path, input_size=None) -> Graph:
    """Read an ONNX model into a Graph.

    Args:
        path: a `.onnx` file (external data only from regular files in its folder).
        input_size: (H, W) for 4-D inputs whose height and width the model leaves open
            (symbolic or -1, as PyTorch exports with dynamic_axes); ignored where fixed.
    Returns:
        The graph: tensors (C, H, W), batch 1; not yet optimised (glcnn.load runs the passes).
        `meta["external_data"]` lists the external-data files read (relative to the model's
        folder), if any, so the prepared-model cache can tell when one changes.
    Raises:
        ModelFileError: onnx not installed, not an ONNX file, truncated, missing tensors,
            external data outside the model's folder or not matching its tensor.
        UnsupportedOpError: ops, attribute values, ranks, batch sizes or dtypes glcnn
            cannot run; unsupported op types are all listed in one error; an open C, or
            open H/W without `input_size`.
    """
    model, weights, files = _read(path, split=True)
    graph = OnnxImport(model, Path(path).name, weights, input_size).run()
    if files:
        graph.meta["external_data"] = files
    return graph


def read_model(path):
    """Parse `path` as an ONNX ModelProto and check it holds a graph.

    Raises:
        ModelFileError: naming the file.
    """
    return _read(path, split=False)[0]


def read_split(path):
    """`read_model`, the large initializers read apart (`onnx_wire`) when the file allows.

    Returns:
        (model, {initializer name: read-only array}): the named initializers are in the
        model without their data.
    Raises:
        ModelFileError: naming the file.
    """
    return _read(path, split=True)[:2]


def _read(path, split: bool):
    """(model with its external data inlined, {name: array read apart}, external files)."""
    try:
        model, weights = _parse(Path(path), split)
    except Exception as exc:  # DecodeError, OSError, external-data errors, ...
        raise ModelFileError(f"{path}: not a readable ONNX model ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else 'corrupt'})") from None
    if model.ir_version <= 0 or not model.graph.output:
        raise ModelFileError(f"{path}: not an ONNX model (no graph outputs; empty, truncated "
                             "or another format)")
    onnx_wire.check_text(model, path)
    onnx_wire.check_opsets(model, path, onnx_module())
    files = onnx_external.inline(model, path, onnx_module())
    return model, weights, files


def _parse(path: Path, split: bool):
    if split and path.suffix.lower() == ".onnx":
        with ThreadPoolExecutor(1) as pool:  # the read runs while Python imports onnx
            data = pool.submit(path.read_bytes)
            onnx = onnx_module()
            parts = onnx_wire.split(data.result(), onnx_fold.INFER_DATA_LIMIT)
        if parts is not None:
            model = onnx.ModelProto()
            model.ParseFromString(parts[0])
            return model, parts[1]
    # External data is never left to onnx, whose checks vary by version (onnx_external).
    return onnx_module().load(str(path), load_external_data=False), {}


def _label(node) -> str:
    return node.name or node.output[0]


class OnnxImport:
    """The state of one conversion; `run()` returns the Graph.

    Converters in `onnx_ops` call `act`, `const`, `shape`, `emit` and `alias`.
    """

    def __init__(self, model, filename: str, weights: dict | None = None, input_size=None):
        self.model, self.filename, self.weights = model, filename, weights or {}
        self.input_size = input_size
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          1)
        self.consts = {t.name: self._initializer(t) for t in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in self.consts]
        self.output_names = [o.name for o in model.graph.output]
        self.nodes: list[Node] = []
        self.names: dict[str, str] = {n: n for n in self.input_names}  # ONNX -> glcnn tensor
        self.used = set(self.input_names) | set(self.output_names)
        self.channels_last: set[str] = set()  # rank-3 ONNX tensors stored (C, 1, L)
        self.converted: dict[tuple, str] = {}  # (ONNX name, layout) -> glcnn tensor

    def _initializer(self, tensor) -> np.ndarray:
        """One initializer as numpy, its declared size checked against the memory budget
        before its data is converted.

        Raises:
            ModelFileError: naming the initializer (a size that disagrees with its data, an
                unknown element type, more bytes than the budget).
        """
        declared = math.prod(tensor.dims) * _itemsize(tensor.data_type) \
            if all(d >= 0 for d in tensor.dims) else -1
        if declared < 0 or declared > memory_budget():
            raise ModelFileError(f"{self.filename}: initializer {quote(tensor.name)} declares dims "
                                 f"{list(tensor.dims)}; negative, or over the memory budget "
                                 f"of {mib(memory_budget())} (GLCNN_MEMORY_BUDGET)")
        if tensor.name in self.weights:
            return self.weights[tensor.name]
        try:
            return onnx_module().numpy_helper.to_array(tensor)
        except Exception as exc:  # noqa: BLE001 - onnx raises ValueError, TypeError, ...
            raise ModelFileError(f"{self.filename}: initializer {quote(tensor.name)} is unreadable "
                                 f"({type(exc).__name__}: {str(exc)[:200]})") from None

    # --- driver --------------------------------------------------------------------------
    def run(self) -> Graph:
        """Convert the model; every GlcnnError raised on the way names the file."""
        try:
            return self._run()
        except GlcnnError as exc:
            if str(exc).startswith(self.filename):
                raise
            raise type(exc)(f"{self.filename}: {exc}") from None

    def _run(self) -> Graph:
        self._check_defined()
        self._pin_batch()
        self._pin_size()
        dynamic, self.shapes, self.types = onnx_fold.fold_graph(self.model, self.consts)
        self._check_supported(dynamic)
        inputs = {name: self._input_shape(name) for name in self.input_names}
        from .onnx_ops import convert
        for node in dynamic:
            convert(self, node)
        self._bind_outputs()
        self._check_sizes(dynamic)  # after the converters' own checks (batch size, ...)
        graph = Graph(inputs, self.nodes, list(self.output_names), self._meta())
        graph.validate()
        return graph

    def _check_sizes(self, dynamic):
        """No tensor comes out of shape inference with a size ≤ 0 (a kernel larger than its
        padded input, e.g. from an input_size too small or not the model's H, W).

        Raises:
            ShapeError: naming the first node that makes one, its shape, and the input size.
        """
        for node in dynamic:
            for name in node.output:
                dims = self.shapes.get(name)
                if dims and any(d is not None and d <= 0 for d in dims):
                    given = (f"input_size={tuple(self.input_size)}" if self.input_size
                             else "the model's input size")
                    inputs = {i.name: dims_text([d.dim_value or None for d in
                                                 i.type.tensor_type.shape.dim])
                              for i in self.model.graph.input if i.name in self.input_names}
                    raise ShapeError(f"node {quote(_label(node))} ({node.op_type}) gives "
                                     f"{quote(name)} the shape {dims_text(dims)}: a size ≤ 0 "
                                     f"with {given} (too small for this model, or not its "
                                     f"height and width; inputs: {inputs})")

    def _check_defined(self):
        """Every tensor a node reads comes from an input, an initializer or an earlier node.

        Raises:
            ModelFileError: naming the node and the undefined tensor.
        """
        defined = set(self.consts) | {i.name for i in self.model.graph.input}
        for node in self.model.graph.node:
            for name in node.input:
                if name and name not in defined:
                    raise ModelFileError(
                        f"{self.filename}: node {quote(_label(node))} ({node.op_type}) reads "
                        f"{quote(name)}, "
                        "which no graph input, initializer or earlier node defines (a missing "
                        "initializer, a cycle, or nodes out of order)")
            for name in node.output:
                if name in defined:
                    raise ModelFileError(f"{self.filename}: node {quote(_label(node))} "
                                         f"({node.op_type}) writes {quote(name)}, which is already "
                                         "defined (duplicated tensor name)")
            defined.update(name for name in node.output if name)

    def _pin_batch(self):
        """A symbolic, -1 or zero leading dimension of a graph input becomes 1 (batch 1)."""
        for info in self.model.graph.input:
            dims = info.type.tensor_type.shape.dim
            if info.name in self.input_names and dims and dims[0].dim_value <= 0:
                dims[0].dim_value = 1

    def _pin_size(self):
        """Open H and W of 4-D inputs become `input_size` before shape inference, so the
        shape arithmetic reading them folds as for a static model; -1 dims declared for
        other tensors are left to inference.

        Raises:
            UnsupportedOpError: an open C, or open H/W without `input_size`. GlcnnError: a
                bad `input_size` (check_input_size).
        """
        size = None if self.input_size is None else check_input_size(self.input_size)
        for info in [*self.model.graph.output, *self.model.graph.value_info]:
            for dim in info.type.tensor_type.shape.dim:  # -1: unknown, for inference to fill
                if dim.HasField("dim_value") and dim.dim_value < 0:
                    dim.ClearField("dim_value")
        from .onnx_inputs import image_axes  # (N, C, H, W), or channels last (N, H, W, C)
        for info in self.model.graph.input:
            dims = info.type.tensor_type.shape.dim
            if info.name not in self.input_names or len(dims) != 4:
                continue
            h, w = image_axes(self.model.graph, info)  # raises for open channels
            if size is None and min(dims[h].dim_value, dims[w].dim_value) <= 0:
                shown = dims_text([d.dim_value if d.dim_value > 0 else None for d in dims])
                raise UnsupportedOpError(f"input {quote(info.name)} has a dynamic shape {shown}; "
                                         "pass input_size=(H, W) for its open height and width "
                                         "(glcnn.load specialises it at each input's size)")
            for dim, value in zip((dims[h], dims[w]), size or ()):
                if dim.dim_value <= 0:
                    dim.dim_value = value

    def _check_supported(self, dynamic):
        from .onnx_ops import supported_op_types
        supported = supported_op_types()
        missing: dict[str, list[str]] = {}
        for node in dynamic:
            default_domain = node.domain in ("", "ai.onnx")
            if not default_domain or node.op_type not in supported:
                kind = node.op_type if default_domain else f"{quote(node.domain)}.{node.op_type}"
                missing.setdefault(kind, []).append(_label(node))
        if missing:  # op types are identifiers (_check_text); names are quoted, lists cut
            listed = kinds_and_names(missing, "nodes", 10)
            raise UnsupportedOpError(f"{self.filename}: {len(missing)} unsupported ONNX op "
                                     f"type(s): {listed}. Supported: "
                                     f"{', '.join(sorted(supported))}")

    def _input_shape(self, name) -> tuple[int, int, int]:
        if name not in self.types:
            raise UnsupportedOpError(f"{self.filename}: input {quote(name)} is not a tensor "
                                     "(a sequence, map or optional); glcnn takes float32 tensors")
        if self.types[name] != FLOAT:
            raise UnsupportedOpError(f"{self.filename}: input {quote(name)} has ONNX element type "
                                     f"{_type_name(self.types[name])}; glcnn takes float32 inputs")
        dims = self.shapes.get(name)
        if dims is None or None in dims:
            raise UnsupportedOpError(f"{self.filename}: input {quote(name)} has a dynamic shape "
                                     f"{dims_text(dims)}; pass input_size=(H, W) (glcnn.load "
                                     "specialises open sizes itself)")
        return self.glcnn_shape(name, f"input {quote(name)}")

    def glcnn_shape(self, name, what) -> tuple[int, int, int]:
        """(C, H, W) of ONNX tensor `name` (`onnx_layout`: (1, C, H, W) -> (C, H, W), ...).

        Raises:
            UnsupportedOpError: a rank or batch glcnn does not run, naming `what`.
        """
        return onnx_layout.glcnn_shape(self, name, what)

    def _bind_outputs(self):
        """Make every graph output a glcnn tensor of the same name."""
        for out in self.output_names:
            source = self.names.get(out)
            if source is None:
                raise UnsupportedOpError(f"{self.filename}: output {quote(out)} is a constant "
                                         "(computed from initializers only); glcnn outputs must "
                                         "depend on a graph input")
            if source == out:
                continue
            if bind_output(self.nodes, source, out, source in self.output_names):
                self.names = {k: out if v == source else v for k, v in self.names.items()}
            self.names[out] = out

    def _meta(self) -> dict:
        """ONNX shapes of the inputs and outputs, e.g. [1, 1000] for a classifier's output,
        which glcnn holds as (1000, 1, 1); the rank-3 outputs and tensors stored channels last."""
        def shapes(names):
            return {n: [int(d) for d in self.shapes[n]] for n in names if self.is_static(n)}
        return {"source": "onnx", "layout": "NCHW",
                "onnx_input_shapes": shapes(self.input_names),
                "onnx_output_shapes": shapes(self.output_names),
                "channels_last_outputs": [n for n in self.output_names if n in self.channels_last],
                "channels_last_tensors": sorted({self.names[n] for n in self.channels_last
                                                 if n in self.names})}

    # --- what converters use ---------------------------------------------------------------
    def const(self, name):
        """The constant value of ONNX tensor `name`, or None for activations and ""."""
        return self.consts.get(name) if name else None

    def act(self, node, index: int) -> str:
        """The glcnn tensor read by input `index` of `node`, which must be an activation.

        Raises:
            UnsupportedOpError: the input is a constant where glcnn needs a tensor.
            ModelFileError: the input is defined nowhere (e.g. a missing initializer).
        """
        name = node.input[index]
        if name in self.names:
            return self.names[name]
        if name in self.consts:
            raise UnsupportedOpError(self.where(node, f"input {index} ({quote(name)}) is a "
                                                      "constant; glcnn needs an activation there"))
        raise ModelFileError(f"{self.filename}: node {quote(_label(node))} ({node.op_type}) reads "
                             f"{quote(name)}, which no node, graph input or initializer defines")

    def shape(self, name) -> tuple:
        """The static ONNX dims of tensor `name` (activation or constant), or ()."""
        if name in self.consts:
            return tuple(self.consts[name].shape)
        return tuple(self.shapes.get(name) or ())

    def is_static(self, name) -> bool:
        """Whether shape inference gave tensor `name` a fully known shape."""
        return name in self.shapes and None not in self.shapes[name]

    def output_of(self, node, index: int = 0) -> str:
        return f"output {quote(node.output[index])} of node {quote(_label(node))} ({node.op_type})"

    def where(self, node, message: str) -> str:
        return f"{self.filename}: node {quote(_label(node))} ({node.op_type}): {message}"

    def emit(self, node, op: str, inputs: list[str], attrs=None, weights=None,
             suffix: str = "", index: int = 0, channels_last: bool | None = None) -> str:
        """Append a glcnn node for ONNX `node` (output `index`, or a helper named with
        `suffix`); weights that are None (absent optional inputs) are left out. A rank-3
        output is stored channels last as said, or (None) when an input is. Returns its name."""
        out = node.output[index]
        if channels_last is None:
            channels_last = any(n in self.channels_last for n in node.input)
        if channels_last and not suffix and len(self.shape(out)) == 3:
            self.channels_last.add(out)
        if self.is_static(out) and not suffix:  # unknown shapes: left to the glcnn op's checks
            self.glcnn_shape(out, self.output_of(node))
        name = self._unique(out + suffix) if suffix or out not in self.output_names else out
        weights = {k: float32(v) for k, v in (weights or {}).items() if v is not None}
        self.nodes.append(Node(op, name, list(inputs), dict(attrs or {}), weights))
        if not suffix:
            self.names[out] = name
        return name

    def alias(self, node, source: str) -> None:
        """ONNX output 0 of `node` is the glcnn tensor `source` (no op runs)."""
        self.names[node.output[0]] = source

    def _unique(self, name: str) -> str:
        base = name.replace("::", "_") or "t"
        name, i = base, 1
        while name in self.used:
            name, i = f"{base}_{i}", i + 1
        self.used.add(name)
        return name


def _itemsize(elem_type: int) -> int:
    """Bytes per element of ONNX element type `elem_type` (8 if unknown, e.g. strings)."""
    try:
        return onnx_module().helper.tensor_dtype_to_np_dtype(elem_type).itemsize
    except (KeyError, ValueError, TypeError):
        return 8


def _type_name(elem_type: int) -> str:
    try:
        return onnx_module().TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"<unknown type {elem_type}>"
