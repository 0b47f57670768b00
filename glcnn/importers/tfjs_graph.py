"""TF.js graph-model importer: a frozen TensorFlow graph (`model.json` with "format":
"graph-model", written by tensorflowjs_converter) + `*.bin` weight shards to a glcnn Graph.

model.json's `modelTopology` is a GraphDef as JSON: `node` entries {name, op, input, attr}
(inputs "name", "name:1" or "^control"; attrs as protobuf writes them, strings base64);
every Const's value is in the `weightsManifest` under the node's name (read by
glcnn/importers/tfjs_weights.py: float32, float16, uint8/uint16 quantization, int32).

Steps:
1. parse the nodes; inputs are the Placeholders, outputs the signature's outputs (or the
   nodes nothing reads); walk the graph from the outputs in dependency order;
2. check every op type has a converter or a fold, raising one `UnsupportedOpError` listing
   every unsupported op type with its nodes;
3. convert node by node (glcnn/importers/tfjs_graph_ops.py, tfjs_graph_shapes.py): an op
   whose inputs are all constants is folded in numpy (shape arithmetic), the others emit
   glcnn nodes named after their TF node (helpers "<node>/<role>").

Layout, as the layers importer (glcnn/importers/tfjs.py): TF graphs are NHWC; glcnn tensors
(C, H, W). Filters are transposed to OIHW, "SAME" padding becomes explicit pads (the odd one
at the end), TF axes become NCHW axes; inputs and outputs keep TF's layout for the user:
meta["layout"] = "NHWC" and meta["onnx_input_shapes"] / ["onnx_output_shapes"] hold each
input's and output's TF shape with batch 1 ([1, H, W, C] or [1, F]). A Placeholder whose
height or width is -1 takes `input_size` (glcnn.load, `glcnn.importers.open_inputs`).
"""

import json
from pathlib import Path

import numpy as np

from ..errors import (
    GlcnnError,
    ModelFileError,
    ShapeError,
    UnsupportedOpError,
    WeightError,
    kinds_and_names,
    quote,
)
from ..graph.graph import Graph, Node, bind_output, float32
from ..limits import check_atlas
from ..ops import make_op
from . import tfjs_graph_shapes, tfjs_graph_views  # noqa: F401  (register converters, folds)
from .tfjs_graph_ops import CONVERTERS, FOLDS, Act
from .tfjs_graph_parse import (
    SOURCES,
    TfNode,
    attr_value,
    dependency_order,
    output_names,
    parse_nodes,
)
from .tfjs_weights import read_weights

MALFORMED = (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError,
             ZeroDivisionError)
EXPLAIN = {"SpaceToDepth": "TF.js 4.22 runs no SpaceToDepth op",
           "Swish": "TF.js runs no Swish op; converted graphs carry x·Sigmoid(x)",
           "HardSwish": "TF.js runs no HardSwish op"}


def is_graph_model(doc) -> bool:
    """True for a parsed model.json holding a graph model."""
    return isinstance(doc, dict) and (doc.get("format") == "graph-model" or (
        isinstance(doc.get("modelTopology"), dict) and "node" in doc["modelTopology"]))


def read_json(path: Path) -> dict:
    """model.json of a graph model as a dict.

    Raises:
        ModelFileError: unreadable, not JSON, or not a graph model, naming the file.
    """
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ModelFileError(f"{path}: not a readable JSON model file ({type(exc).__name__}: "
                             f"{exc})") from None
    if not is_graph_model(doc) or not isinstance(doc.get("modelTopology"), dict):
        raise ModelFileError(f"{path}: not a TF.js graph model (no 'modelTopology' GraphDef)")
    return doc


def load(path, input_size=None, doc=None) -> Graph:
    """Read a TF.js graph model into a Graph.

    Args:
        path: model.json; its weight shards are read from the same folder.
        input_size: (H, W) for Placeholders whose height and width are -1.
        doc: model.json already parsed (glcnn/importers/tfjs.py passes it).
    Returns:
        The graph (not optimised: glcnn.load runs the passes), meta["layout"] "NHWC".
    Raises:
        ModelFileError: unreadable or malformed model.json or manifest, missing or short
            shards, a malformed node (naming it).
        UnsupportedOpError: op types glcnn cannot run, all listed in one error; settings or
            shapes a supported op cannot take (naming the node).
        WeightError: a Const missing from the manifest, a weight of the wrong shape.
    """
    path = Path(path)
    doc = read_json(path) if doc is None else doc
    try:
        nodes = parse_nodes(doc["modelTopology"], path.name)
        outputs = output_names(doc, nodes)
        order = dependency_order(nodes, outputs, path.name)
        check_supported(order, path.name)
        weights = read_weights(path, doc.get("weightsManifest", []))
        return GraphImport(path.name, weights, input_size).run(order, outputs)
    except MALFORMED as exc:
        raise ModelFileError(f"{path.name}: malformed graph model ({type(exc).__name__}: "
                             f"{str(exc)[:300]})") from None


def open_inputs(path, doc=None) -> dict[str, tuple]:
    """Placeholders of graph model `path` whose height or width is -1, as
    {"input": (1, "H", "W", 3)}; only model.json is read.

    Raises:
        UnsupportedOpError: an open channel count. ModelFileError: a malformed model.json.
    """
    path = Path(path)
    doc = read_json(path) if doc is None else doc
    found = {}
    try:
        for node in parse_nodes(doc["modelTopology"], path.name).values():
            shape = attr_value(node.attr.get("shape", {})) if node.op == "Placeholder" else None
            if not isinstance(shape, list) or len(shape) != 4 or -1 not in shape[1:]:
                continue
            if shape[3] == -1:
                raise UnsupportedOpError(f"{path.name}: input {quote(node.name)} has shape "
                                         f"{shape}; only its height and width may be open")
            found[node.name] = (1, "H" if shape[1] == -1 else shape[1],
                                "W" if shape[2] == -1 else shape[2], shape[3])
    except MALFORMED as exc:
        raise ModelFileError(f"{path.name}: malformed graph model ({type(exc).__name__}: "
                             f"{str(exc)[:300]})") from None
    return found


def check_supported(order: list, filename: str) -> None:
    """Raise one UnsupportedOpError naming every unsupported op type and its nodes."""
    missing: dict[str, list[str]] = {}
    for node in order:
        if node.op not in CONVERTERS and node.op not in FOLDS and node.op not in SOURCES:
            missing.setdefault(node.op, []).append(node.name)
    if not missing:
        return
    explained = {f"{op} ({EXPLAIN[op]})" if op in EXPLAIN else op: names
                 for op, names in missing.items()}
    raise UnsupportedOpError(f"{filename}: {len(missing)} unsupported op type(s): "
                             f"{kinds_and_names(explained, 'nodes')}. Supported: "
                             f"{', '.join(sorted(CONVERTERS))}; folded on "
                             f"constants: {', '.join(sorted(set(FOLDS) - set(CONVERTERS)))}")


# --- conversion ---------------------------------------------------------------------------
class GraphImport:
    """The state of one conversion; converters in tfjs_graph_ops / tfjs_graph_shapes call its
    helpers. `values` maps TF node names to constants (numpy, TF layout) or `Act`s."""

    def __init__(self, filename: str, weights: dict, input_size=None):
        self.filename, self.weights, self.input_size = filename, weights, input_size
        self.values: dict = {}
        self.inputs: dict[str, tuple] = {}
        self.nodes: list[Node] = []
        self.shapes: dict[str, tuple] = {}

    def run(self, order: list, outputs: list[str]) -> Graph:
        for node in order:
            try:
                self.values[node.name] = self.convert(node)
            except MALFORMED as exc:
                raise ModelFileError(f"{self.where(node)}: malformed node "
                                     f"({type(exc).__name__}: {str(exc)[:300]})") from None
        names = self.bind_outputs(outputs)
        tf = {n: list(self.values[n].shape) for n in names}
        meta = {"source": "tfjs", "format": "graph-model", "layout": "NHWC",
                "onnx_input_shapes": {n: list(self.values[n].shape) for n in self.inputs},
                "onnx_output_shapes": tf}
        graph = Graph(dict(self.inputs), self.nodes, names, meta)
        graph.validate()
        return graph

    def convert(self, node: TfNode):
        if node.op == "Placeholder":
            return self.add_input(node)
        if node.op == "Const":
            return self.constant(node)
        if node.op == "NoOp":
            return None
        args = []
        for name, index in node.inputs:
            if index or self.values[name] is None:
                self.fail(node, f"reads output {index} of {quote(name)}; glcnn reads the "
                                "first output of ops other than NoOp")
            args.append(self.values[name])
        if node.op in FOLDS and all(isinstance(v, np.ndarray) for v in args):
            try:
                return FOLDS[node.op](node, args, lambda key, default: self.attr(node, key,
                                                                                  default))
            except MALFORMED as exc:
                self.fail(node, f"cannot be folded on its constant inputs "
                                f"({type(exc).__name__}: {str(exc)[:200]})")
        if node.op not in CONVERTERS:
            self.fail(node, "glcnn folds this op only when all its inputs are constants; here "
                            "it reads a tensor computed at run time")
        return CONVERTERS[node.op](self, node, args)

    def add_input(self, node: TfNode) -> Act:
        shape = attr_value(node.attr.get("shape", {}))
        if not isinstance(shape, list) or len(shape) not in (2, 4) or shape[0] not in (-1, 1):
            self.fail(node, f"input shape {shape}: glcnn takes images (1, H, W, C) and vectors "
                            "(1, F) with a known rank")
        dims = [1, *shape[1:]]
        if len(dims) == 4 and -1 in dims[1:3] and self.input_size is not None:
            dims[1:3] = [int(v) if d == -1 else d for d, v in zip(dims[1:3], self.input_size)]
        if -1 in dims:
            self.fail(node, f"input shape {shape} leaves sizes open; pass input_size=(H, W) "
                            "(glcnn.load(path, input_size=...)) for height and width")
        chw = (dims[3], dims[1], dims[2]) if len(dims) == 4 else (dims[1], 1, 1)
        if min(chw) < 1:
            raise ShapeError(f"{self.where(node)}: input shape {shape} has sizes below 1")
        check_atlas(chw, f"{self.where(node)}: input")
        self.inputs[node.name] = self.shapes[node.name] = chw
        return Act(node.name, tuple(dims))

    def constant(self, node: TfNode) -> np.ndarray:
        if node.name not in self.weights:
            raise WeightError(f"{self.where(node)}: no weight of this name in the weights "
                              "manifest")
        return self.weights[node.name]

    def bind_outputs(self, outputs: list[str]) -> list[str]:
        """Make each output a glcnn tensor named after its TF node; returns the names."""
        taken: set[str] = set(self.inputs)
        for name in outputs:
            value = self.values[name]
            if not isinstance(value, Act):
                raise UnsupportedOpError(f"{self.filename}: output {quote(name)} is a constant;"
                                         " glcnn's outputs are computed tensors")
            old = value.name
            if old != name:  # keep `old` when renaming it would clash with another tensor
                if bind_output(self.nodes, old, name, old in taken or name in self.shapes):
                    self.shapes[name] = self.shapes.pop(old)
                    self.values = {k: Act(name, v.shape) if isinstance(v, Act) and v.name == old
                                   else v for k, v in self.values.items()}
                else:
                    self.shapes[name] = self.shapes[old]
            self.values[name] = Act(name, value.shape)
            taken.add(name)
        return list(outputs)

    # --- what converters use ---------------------------------------------------------------
    def where(self, node: TfNode) -> str:
        return f"{self.filename}: node {quote(node.name)} ({node.op})"

    def fail(self, node: TfNode, message: str):
        raise UnsupportedOpError(f"{self.where(node)}: {message}")

    def attr(self, node: TfNode, key: str, default=None):
        value = attr_value(node.attr.get(key))
        return default if value is None else value

    def tensor(self, node: TfNode, value) -> Act:
        """`value`, which must be computed at run time (of any rank)."""
        if not isinstance(value, Act):
            self.fail(node, "needs a tensor computed at run time where it reads a constant")
        return value

    def act(self, node: TfNode, value) -> Act:
        """`value`, which must be computed at run time and of rank 2 to 4."""
        value = self.tensor(node, value)
        if value.rank not in (2, 3, 4):
            self.fail(node, f"reads a tensor of shape {list(value.shape)}; glcnn's are "
                            "(1, H, W, C), (1, L, C) and (1, F)")
        return value

    def const(self, node: TfNode, value, what: str, ndim: int | None = None) -> np.ndarray:
        if not isinstance(value, np.ndarray):
            self.fail(node, f"its {what} must be a constant, not a tensor computed at run time")
        if ndim is not None and value.ndim != ndim:
            raise WeightError(f"{self.where(node)}: {what} has shape {list(value.shape)}; "
                              f"expected {ndim} dimensions")
        return value

    def scalar(self, node: TfNode, value, what: str) -> float:
        value = self.const(node, value, what)
        if value.size < 1 or np.any(value != value.flat[0]):
            self.fail(node, f"{what} {value.tolist()!r:.200}: glcnn takes one value here")
        return float(value.flat[0])

    def channel_vector(self, node, value, x, what: str, size: int | None = None) -> np.ndarray:
        """Constant `value` as one value per channel ((C,), (1, 1, C), ... or a scalar)."""
        value = self.const(node, value, what)
        size = self.glcnn_shape(x)[0] if size is None else size
        if value.size == 1:
            return np.full(size, float(value.flat[0]), np.float32)
        if value.size != size or any(d != 1 for d in value.shape[:-1]):
            raise WeightError(f"{self.where(node)}: {what} has shape {list(value.shape)}; "
                              f"expected ({size},), one value per channel")
        return value.reshape(size)

    def nhwc(self, node: TfNode) -> None:
        fmt = self.attr(node, "data_format", "NHWC")
        if fmt != "NHWC":
            self.fail(node, f"data_format {fmt!r}: glcnn reads NHWC graphs (as TF.js runs them)")

    def hw(self, node: TfNode, key: str) -> list[int]:
        """[h, w] of a 4-entry NHWC list attribute (1s for an absent one)."""
        values = self.attr(node, key, [1, 1, 1, 1])
        if len(values) != 4 or values[0] != 1 or values[3] != 1 or min(values) < 1:
            self.fail(node, f"{key} {values}: expected [1, h, w, 1] with h, w ≥ 1")
        return [int(values[1]), int(values[2])]

    def pads(self, node, size, kernel, strides, dilations) -> list[int]:
        """[top, left, bottom, right] of `node`'s padding: SAME (TF: the odd pad at the end),
        VALID or EXPLICIT (explicit_paddings, 8 values in NHWC pairs)."""
        padding = self.attr(node, "padding", "VALID")
        if padding == "VALID":
            return [0, 0, 0, 0]
        if padding == "EXPLICIT":
            p = [int(v) for v in self.attr(node, "explicit_paddings", [])]
            if len(p) != 8 or any(p[:2] + p[6:]) or min(p) < 0:
                self.fail(node, f"explicit_paddings {p}: expected 8 values, pads on H, W only")
            return [p[2], p[4], p[3], p[5]]
        if padding != "SAME":
            self.fail(node, f"padding {padding!r}: expected SAME, VALID or EXPLICIT")
        pads = []
        for n, k, s, d in zip(size, kernel, strides, dilations):
            total = max((-(-n // s) - 1) * s + d * (k - 1) + 1 - n, 0)
            pads.append((total // 2, total - total // 2))
        return [pads[0][0], pads[1][0], pads[0][1], pads[1][1]]

    def glcnn_shape(self, x: Act) -> tuple:
        return self.shapes[x.name]

    def is_vector(self, x: Act) -> bool:
        return x.rank == 2 or x.shape[1:3] == (1, 1)

    def broadcast(self, node, a: tuple, b: tuple) -> tuple:
        rank = max(len(a), len(b))
        try:
            shape = np.broadcast_shapes((1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b)
        except ValueError:
            self.fail(node, f"shapes {list(a)} and {list(b)} do not broadcast")
        return tuple(int(d) for d in shape)

    def operand(self, node, c: np.ndarray, x: Act) -> np.ndarray:
        """Constant `c` as the weight B of a glcnn binary op on `x` (TF broadcasting)."""
        if c.ndim > x.rank or self.broadcast(node, x.shape, c.shape) != x.shape:
            self.fail(node, f"a constant of shape {list(c.shape)} would broadcast "
                            f"{list(x.shape)} to a larger shape")
        full = c.reshape((1,) * (x.rank - c.ndim) + c.shape)
        if full.size == 1:
            return full.reshape(1)
        if x.rank == 2 or full.shape[1:-1] == (1,) * (x.rank - 2):
            return full.reshape(full.shape[-1])
        if x.rank == 3:  # (1, L, C) -> glcnn (C, 1, L)
            return full[0].T[:, None, :]
        return full[0].transpose(2, 0, 1)

    def emit(self, node: TfNode, op: str, inputs: list, attrs: dict, weights: dict,
             rank: int, suffix: str = "") -> Act:
        """Append a glcnn node for `node` (or a helper "<node>/<suffix>"); returns its Act.

        Raises:
            GlcnnError: the glcnn op refuses its attributes, weights or input shapes.
        """
        name = f"{node.name}/{suffix}" if suffix else node.name
        weights = {k: float32(v) for k, v in weights.items() if v is not None}
        glcnn = Node(op, name, list(inputs), dict(attrs), weights)
        try:
            c, h, w = make_op(glcnn, [self.shapes[t] for t in inputs]).output_shape()
        except GlcnnError as exc:
            raise type(exc)(f"{self.where(node)}: {exc}") from None
        if rank == 2 and (h, w) != (1, 1) or rank == 3 and h != 1:
            self.fail(node, f"gives a (C, H, W) = {(c, h, w)} map where TF has rank {rank}")
        self.nodes.append(glcnn)
        self.shapes[name] = (int(c), int(h), int(w))
        c, h, w = int(c), int(h), int(w)
        return Act(name, {2: (1, c), 3: (1, w, c)}.get(rank, (1, h, w, c)))
