"""glcnn's native model format: one `.npz` holding the graph as JSON plus its weights.

Keys: "glcnn_graph" (UTF-8 JSON as uint8: inputs, outputs, nodes with op/name/inputs/attrs)
and "<layer>::<weight>" arrays. Nothing is unpickled: members are read as plain .npy arrays
after their headers are checked (numeric dtype, declared sizes within the memory budget of
glcnn.limits) and, for a native model, each weight's header shape against its layer (the
graph is checked with zero stand-ins of those shapes), so a hostile file is refused before
anything large is allocated or inflated.
"""

import json
from pathlib import Path

import numpy as np

from ..errors import GlcnnError, ModelFileError, WeightError, quote
from ..graph.graph import Graph, Node
from ..limits import mib
from ..npy import GRAPH_KEY, read_members
from ..ops import build_ops
from ..ops.base import remember_finite

FORMAT = "glcnn-graph-1"
MAX_GRAPH_JSON = 64 << 20  # bytes of the graph description


def save(graph: Graph, path) -> None:
    """Write `graph` (structure and weights) to `path` (.npz)."""
    doc = document(graph)
    arrays = {f"{n.name}::{k}": np.asarray(v, np.float32)
              for n in graph.nodes for k, v in n.weights.items()}
    blob = np.frombuffer(json.dumps(doc).encode(), np.uint8)
    np.savez(Path(path), glcnn_graph=blob, **arrays)


def document(graph: Graph) -> dict:
    """The JSON-able description of `graph` without its weights (the "glcnn_graph" member)."""
    return {"format": FORMAT, "inputs": {k: list(v) for k, v in graph.inputs.items()},
            "outputs": graph.outputs, "meta": graph.meta,
            "nodes": [{"op": n.op, "name": n.name, "inputs": n.inputs, "attrs": n.attrs}
                      for n in graph.nodes]}


def load(path) -> Graph:
    """Read a graph written by `save`.

    Raises:
        ModelFileError: not an npz, truncated, a member that is not a plain numeric array,
            no graph in it (e.g. a bare state_dict), JSON that is not a glcnn graph, a
            weight of no layer.
        WeightError: a weight holding NaN or Inf (or too large for float32).
        GraphError, TextureSizeError: from `Graph.validate`, prefixed with the file name.
    """
    path = Path(path)
    graphs = []

    def check(headers, read):
        if GRAPH_KEY not in headers:
            raise ModelFileError(f"{path}: holds weights only (keys {sorted(headers)[:4]}...), "
                                 "no glcnn graph; build the architecture (glcnn.Builder or "
                                 "glcnn.graph.models) and pass these weights to it")
        graphs.append(_checked_graph(read(GRAPH_KEY), headers, path))
    arrays = read_members(path, check)
    arrays.pop(GRAPH_KEY)
    graph = graphs[0]
    _attach_weights(graph, arrays, path)
    try:
        graph.validate()
    except GlcnnError as exc:
        raise type(exc)(f"{path.name}: {exc}") from None
    return graph


def _document(blob: np.ndarray, path) -> dict:
    """The graph description: UTF-8 JSON with the format tag, as a dict."""
    if blob.dtype != np.uint8 or blob.ndim != 1 or blob.size > MAX_GRAPH_JSON:
        raise ModelFileError(f"{path}: member {quote(GRAPH_KEY)} must be UTF-8 JSON as up to "
                             f"{mib(MAX_GRAPH_JSON)} of uint8; it is {blob.dtype} {blob.shape}")
    try:
        doc = json.loads(blob.tobytes().decode())
    except (ValueError, RecursionError) as exc:
        raise ModelFileError(f"{path}: member {quote(GRAPH_KEY)} is not JSON "
                             f"({type(exc).__name__}: {str(exc)[:200]})") from None
    return doc


def graph_of(doc, path) -> Graph:
    """The Graph of a description (`document`), without weights; the format tag and the
    fields' types are checked (names and shapes are checked by Graph.validate).

    Raises:
        ModelFileError: naming `path`.
    """
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise ModelFileError(f"{path}: malformed glcnn graph (format {quote(found)}, expected "
                             f"{FORMAT!r})")

    def need(value, kind, what):
        if not isinstance(value, kind):
            raise ModelFileError(f"{path}: malformed glcnn graph: {what} is "
                                 f"{type(value).__name__}, expected {kind.__name__}")
        return value
    nodes = []
    for i, n in enumerate(need(doc.get("nodes"), list, "nodes")):
        n = need(n, dict, f"node {i}")
        nodes.append(Node(n.get("op"), n.get("name"), need(n.get("inputs"), list,
                                                            f"inputs of node {i}"),
                          dict(need(n.get("attrs", {}), dict, f"attrs of node {i}"))))
    inputs = {k: tuple(need(v, list, f"shape of input {quote(k)}"))
              for k, v in need(doc.get("inputs"), dict, "inputs").items()}
    return Graph(inputs, nodes, list(need(doc.get("outputs"), list, "outputs")),
                 dict(need(doc.get("meta", {}), dict, "meta")))


def _checked_graph(blob: np.ndarray, headers: dict, path: Path) -> Graph:
    """The graph of member GRAPH_KEY, each weight a zero stand-in of its member's header
    shape (untouched zero pages cost no memory), checked as a Pipeline checks it
    (`build_ops`): a member of the wrong shape is refused before its data is inflated.

    Raises:
        ModelFileError, WeightError, ShapeError, ...: naming the file and the layer.
    """
    graph = graph_of(_document(blob, path), path)
    by_name = {n.name: n for n in graph.nodes if isinstance(n.name, str)}
    for key, (shape, _) in headers.items():
        layer, _, weight = key.rpartition("::")  # layer names may contain "::" (ONNX)
        if key == GRAPH_KEY:
            continue
        if layer not in by_name or not weight:
            raise ModelFileError(f"{path}: weight {quote(key)} belongs to no layer")
        stand_in = np.zeros(shape, np.float32)
        stand_in.flags.writeable = False
        remember_finite(stand_in)  # no scan of the stand-in for NaN
        by_name[layer].weights[weight] = stand_in
    try:
        build_ops(graph)
    except GlcnnError as exc:
        raise type(exc)(f"{path}: {exc} (judged from the .npy headers of its weights, "
                        "before reading them)") from None
    return graph


def _attach_weights(graph: Graph, arrays: dict, path) -> None:
    """Give each "<layer>::<weight>" array to its layer as float32, refusing NaN and Inf."""
    by_name = {n.name: n for n in graph.nodes if isinstance(n.name, str)}
    for key, value in arrays.items():
        layer, _, weight = key.rpartition("::")  # layer names may contain "::" (ONNX)
        if layer not in by_name or not weight:
            raise ModelFileError(f"{path}: weight {quote(key)} belongs to no layer")
        with np.errstate(over="ignore", invalid="ignore"):
            value = value.astype(np.float32)
        if not np.isfinite(value).all():
            raise WeightError(f"{path}: layer {quote(layer)} ({by_name[layer].op}): weight "
                              f"{quote(weight)} holds NaN or Inf (or values beyond float32); "
                              "glcnn refuses non-finite weights")
        by_name[layer].weights[weight] = value
