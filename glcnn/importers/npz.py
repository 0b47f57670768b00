"""glcnn's native model format: one `.npz` holding the graph as JSON plus its weights.

Keys: "glcnn_graph" (UTF-8 JSON as uint8: inputs, outputs, nodes with op/name/inputs/attrs)
and "<layer>::<weight>" arrays. Nothing is unpickled: members are read as plain .npy arrays
after their headers are checked (numeric dtype, declared sizes within the memory budget of
glcnn.limits) and, for a native model, each weight's header shape against its layer (the
graph is checked with zero stand-ins of those shapes), so a hostile file is refused before
anything large is allocated or inflated.
"""

import json
import math
import zipfile
from pathlib import Path

import numpy as np

from ..errors import GlcnnError, ModelFileError, WeightError, quote
from ..graph.graph import Graph, Node
from ..limits import memory_budget, mib
from ..ops import build_ops
from ..ops.base import remember_finite

FORMAT = "glcnn-graph-1"
GRAPH_KEY = "glcnn_graph"
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


def read_state_dict(path: Path, check=None) -> dict[str, np.ndarray]:
    """The arrays of a PyTorch-named weights `.npz` (`read_members`), refusing a native model.

    Args:
        check: called with {member: (shape, dtype)} before any data is read (the caller
            compares the shapes with its graph).
    Raises:
        ModelFileError: as `read_members`; a glcnn native model (a whole saved graph), with
            the call that opens it.
    """
    def refuse_native(headers, read):
        if GRAPH_KEY in headers:
            raise ModelFileError(f"{path} is a glcnn native model (a whole saved graph: layers "
                                 "and weights), not a state_dict of weights; open it with "
                                 f"glcnn.load({str(path)!r}) (or glcnn.load_graph for the "
                                 "Graph)")
        if check is not None:
            check(headers)
    return read_members(path, refuse_native)


def read_members(path: Path, check=None) -> dict[str, np.ndarray]:
    """Every member of the npz at `path` as an array, headers checked before any data is read.

    Args:
        check: called as check(headers, read) after the headers ({member: (shape, dtype)})
            are checked and before any data is read; read(member) reads one member's array.
    Raises:
        ModelFileError: naming the file and, where it applies, the member; any GlcnnError
            `check` raises.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            infos = _npy_members(archive, path)
            headers = {name: _member_header(archive, info, f"{path}: member {quote(name)}")
                       for name, info in infos.items()}
            _check_total(headers, path)
            arrays = {}

            def read(name):
                if name not in arrays:
                    arrays[name] = _read_array(archive, infos[name])
                return arrays[name]
            if check is not None:
                check(headers, read)
            for name in infos:
                read(name)
            return arrays
    except GlcnnError:
        raise
    except Exception as exc:  # noqa: BLE001 - zipfile and numpy parse untrusted bytes
        raise ModelFileError(f"{path}: not a readable .npz file ({type(exc).__name__}: "
                             f"{str(exc)[:200]})") from None


def _npy_members(archive: zipfile.ZipFile, path) -> dict:
    infos = {}
    for info in archive.infolist():
        name = info.filename.removesuffix(".npy")
        if not info.filename.endswith(".npy") or name in infos:
            raise ModelFileError(f"{path}: member {quote(info.filename)} is "
                                 + ("duplicated" if name in infos else "not a .npy array"))
        infos[name] = info
    return infos


def _member_header(archive: zipfile.ZipFile, info, what: str) -> tuple[tuple, np.dtype]:
    with archive.open(info) as stream:
        return read_header(stream, what)


def read_header(stream, what: str, error=ModelFileError) -> tuple[tuple, np.dtype]:
    """(shape, dtype) from the header of a .npy stream, which must hold a plain array of
    booleans, integers or floats.

    Raises:
        `error` (ModelFileError by default): naming `what`.
    """
    try:
        version = np.lib.format.read_magic(stream)
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, _, dtype = reader(stream)
    except Exception as exc:  # noqa: BLE001 - numpy parses the header with tokenize and ast
        raise error(f"{what} has no valid .npy header ({type(exc).__name__}: "
                    f"{str(exc)[:200]})") from None
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or \
            dtype.kind not in "biuf":
        raise error(f"{what} has dtype {dtype}; expected plain numbers (float, int or bool); "
                    "nothing is unpickled")
    return tuple(shape), dtype


def _check_total(headers: dict, path) -> None:
    """Refuse declared arrays needing more memory (as float32 textures) than the budget."""
    budget = memory_budget()
    total = sum(math.prod(shape) * max(dtype.itemsize, 4) for shape, dtype in headers.values())
    if total > budget:
        raise ModelFileError(f"{path}: its arrays declare {mib(total)}, over the memory budget "
                             f"of {mib(budget)} (GLCNN_MEMORY_BUDGET)")


def _read_array(archive: zipfile.ZipFile, info) -> np.ndarray:
    with archive.open(info) as stream:
        return np.lib.format.read_array(stream, allow_pickle=False)


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
