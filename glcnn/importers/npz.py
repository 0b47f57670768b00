"""glcnn's native model format: one `.npz` holding the graph as JSON plus its weights.

Keys: "glcnn_graph" (UTF-8 JSON as uint8: inputs, outputs, nodes with op/name/inputs/attrs)
and "<layer>::<weight>" arrays. Loaded with allow_pickle=False: nothing is unpickled.
"""

import json
from pathlib import Path

import numpy as np

from ..errors import ModelFileError
from ..graph import Graph, Node

FORMAT = "glcnn-graph-1"


def save(graph: Graph, path) -> None:
    """Write `graph` (structure and weights) to `path` (.npz)."""
    doc = {"format": FORMAT, "inputs": {k: list(v) for k, v in graph.inputs.items()},
           "outputs": graph.outputs, "meta": graph.meta,
           "nodes": [{"op": n.op, "name": n.name, "inputs": n.inputs, "attrs": n.attrs}
                     for n in graph.nodes]}
    arrays = {f"{n.name}::{k}": np.asarray(v, np.float32)
              for n in graph.nodes for k, v in n.weights.items()}
    blob = np.frombuffer(json.dumps(doc).encode(), np.uint8)
    np.savez(Path(path), glcnn_graph=blob, **arrays)


def load(path) -> Graph:
    """Read a graph written by `save`.

    Raises:
        ModelFileError: not an npz, no graph in it (e.g. a bare state_dict), bad JSON.
    """
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError) as exc:
        raise ModelFileError(f"{path}: not a readable .npz file ({exc})") from None
    if "glcnn_graph" not in arrays:
        raise ModelFileError(f"{path}: holds weights only (keys {sorted(arrays)[:4]}...), no "
                             "glcnn graph; build the architecture (glcnn.Builder or "
                             "glcnn.models) and pass these weights to it")
    try:
        doc = json.loads(arrays.pop("glcnn_graph").tobytes().decode())
        assert doc.get("format") == FORMAT, f"format {doc.get('format')!r}, expected {FORMAT}"
        nodes = [Node(n["op"], n["name"], list(n["inputs"]), dict(n.get("attrs", {})))
                 for n in doc["nodes"]]
        graph = Graph({k: tuple(v) for k, v in doc["inputs"].items()}, nodes,
                      list(doc["outputs"]), dict(doc.get("meta", {})))
    except (ValueError, KeyError, TypeError, AssertionError) as exc:
        raise ModelFileError(f"{path}: malformed glcnn graph ({exc})") from None
    by_name = {n.name: n for n in nodes}
    for key, value in arrays.items():
        layer, _, weight = key.rpartition("::")  # layer names may contain "::" (ONNX)
        if layer not in by_name:
            raise ModelFileError(f"{path}: weight {key!r} belongs to no layer")
        by_name[layer].weights[weight] = value
    graph.validate()
    return graph
