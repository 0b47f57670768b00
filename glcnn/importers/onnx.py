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

Tensors: 4-D (1, C, H, W) maps to glcnn (C, H, W) and 2-D (1, F) to (F, 1, 1); any other
rank or a batch > 1 raises `UnsupportedOpError`. Names: graph inputs and outputs keep their
ONNX names; every other tensor keeps its ONNX name with "::" (the .npz key separator)
replaced by "_", made unique. `Graph.meta["onnx_output_shapes"]` records the ONNX shape of
each output, e.g. [1, 1000] for a classifier, so a caller can restore it.
"""

import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..errors import GlcnnError, ModelFileError, UnsupportedOpError, quote
from ..graph.graph import OP_TYPE, Graph, Node, float32
from ..limits import memory_budget, mib
from . import (  # noqa: F401 (onnx_spatial registers converters)
    onnx_external,
    onnx_fold,
    onnx_spatial,
    onnx_wire,
)
from .onnx_fold import onnx_module
from .onnx_inputs import check_input_size

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
    _check_text(model, path)
    _check_opsets(model, path)
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


def _check_text(model, path) -> None:
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


def _check_opsets(model, path) -> None:
    """Opset versions must be ≥ 1, and the default domain's one that this onnx knows
    (onnxruntime refuses opset 99999 and negative opsets; onnx's checks would not run).

    Raises:
        ModelFileError: naming the domain and version.
    """
    newest = onnx_module().defs.onnx_opset_version()
    for opset in model.opset_import:
        default = opset.domain in ("", "ai.onnx")
        if opset.version < 1 or (default and opset.version > newest):
            raise ModelFileError(f"{path}: opset {opset.version} of domain "
                                 f"{quote(opset.domain or 'ai.onnx')} is not a valid version "
                                 f"(1 to {newest} for ai.onnx, with the installed onnx)")


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
        graph = Graph(inputs, self.nodes, list(self.output_names), self._meta())
        graph.validate()
        return graph

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
        for info in self.model.graph.input:
            dims = info.type.tensor_type.shape.dim
            if info.name not in self.input_names or len(dims) != 4:
                continue
            if dims[1].dim_value <= 0:
                raise UnsupportedOpError(f"input {quote(info.name)} leaves its channels open; "
                                         "only the height and width of an image may be open")
            if size is None and min(d.dim_value for d in dims[2:]) <= 0:
                shown = _dims([d.dim_value if d.dim_value > 0 else None for d in dims])
                raise UnsupportedOpError(f"input {quote(info.name)} has a dynamic shape {shown}; "
                                         "pass input_size=(H, W) for its open height and width "
                                         "(glcnn.load specialises it at each input's size)")
            for dim, value in zip(dims[2:], size or ()):
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
            listed = "; ".join(f"{op} (nodes: {', '.join(map(quote, names[:5]))}"
                               f"{', ...' if len(names) > 5 else ''})"
                               for op, names in sorted(missing.items())[:10])
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
                                     f"{_dims(dims)}; pass input_size=(H, W) (glcnn.load "
                                     "specialises open sizes itself)")
        return self.glcnn_shape(name, f"input {quote(name)}")

    def glcnn_shape(self, name, what) -> tuple[int, int, int]:
        """(C, H, W) of ONNX tensor `name`: (1, C, H, W) -> (C, H, W), (1, F) -> (F, 1, 1).

        Raises:
            UnsupportedOpError: another rank or batch, naming `what`.
        """
        dims = self.shapes.get(name)
        if self.is_static(name) and len(dims) in (2, 4) and dims[0] == 1:
            return tuple(dims[1:]) + (1,) * (4 - len(dims))
        reason = "not inferred" if not self.is_static(name) else \
            f"batch size {dims[0]}" if len(dims) in (2, 4) else f"rank {len(dims)}"
        raise UnsupportedOpError(f"{self.filename}: {what} has shape {_dims(dims)} ({reason}); "
                                 "glcnn runs 4-D (1, C, H, W) and 2-D (1, F) tensors, batch 1")

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
            producer = next((n for n in self.nodes if n.name == source), None)
            if producer is not None and source not in self.output_names:
                self._rename(source, out)
            else:  # a graph input or another output: copy it (x·1 is exact)
                self.nodes.append(Node("Mul", out, [source], {}, {"B": np.ones(1, np.float32)}))
            self.names[out] = out

    def _rename(self, old, new):
        for node in self.nodes:
            node.name = new if node.name == old else node.name
            node.inputs = [new if t == old else t for t in node.inputs]
        self.names = {k: new if v == old else v for k, v in self.names.items()}

    def _meta(self) -> dict:
        """ONNX shapes of the inputs and outputs, e.g. [1, 1000] for a classifier's output,
        which glcnn holds as (1000, 1, 1)."""
        def shapes(names):
            return {n: [int(d) for d in self.shapes[n]] for n in names if self.is_static(n)}
        return {"source": "onnx", "layout": "NCHW",
                "onnx_input_shapes": shapes(self.input_names),
                "onnx_output_shapes": shapes(self.output_names)}

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

    def output_of(self, node) -> str:
        return f"output {quote(node.output[0])} of node {quote(_label(node))} ({node.op_type})"

    def where(self, node, message: str) -> str:
        return f"{self.filename}: node {quote(_label(node))} ({node.op_type}): {message}"

    def emit(self, node, op: str, inputs: list[str], attrs=None, weights=None,
             suffix: str = "") -> str:
        """Append a glcnn node for ONNX `node` (output 0, or a helper named with `suffix`);
        weights that are None (absent optional inputs) are left out. Returns its name."""
        out = node.output[0]
        if self.is_static(out):  # unknown shapes are left to the glcnn op's own checks
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


def _dims(dims) -> str:
    return "unknown" if dims is None else "[" + ", ".join("?" if d is None else str(d)
                                                          for d in dims) + "]"


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
