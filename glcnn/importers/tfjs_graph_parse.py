"""Parsing of a TF.js graph model's GraphDef JSON (glcnn/importers/tfjs_graph.py): nodes,
outputs, dependency order and attribute values. No conversion here."""

import base64
import re
from dataclasses import dataclass

from ..errors import ModelFileError, UnsupportedOpError, quote

SOURCES = ("Placeholder", "Const", "NoOp")
# TF's while loops: the only cycles a valid graph has.
CONTROL_FLOW = ("Enter", "Exit", "LoopCond", "Merge", "NextIteration", "Switch")
MAX_NODES = 100_000
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass
class TfNode:
    """One GraphDef node: its data inputs as (node, output index); control inputs dropped."""

    name: str
    op: str
    inputs: list
    attr: dict


def parse_nodes(topology: dict, filename: str) -> dict[str, TfNode]:
    """The GraphDef's nodes by name.

    Raises:
        ModelFileError: no node list, too many nodes, a node without a name, an op type that
            is not an identifier, duplicate names.
    """
    raw = topology["node"]
    if not isinstance(raw, list) or len(raw) > MAX_NODES:
        raise ModelFileError(f"{filename}: modelTopology.node must be a list of at most "
                             f"{MAX_NODES} nodes")
    nodes: dict[str, TfNode] = {}
    for entry in raw:
        name, op = entry["name"], entry["op"]
        if not isinstance(name, str) or not name or not isinstance(op, str) or \
                not IDENTIFIER.match(op):
            raise ModelFileError(f"{filename}: node {quote(name)} has op type {quote(op)}; "
                                 "both must be names (op types identifiers)")
        if name in nodes:
            raise ModelFileError(f"{filename}: two nodes are named {quote(name)}")
        inputs = [_input_ref(s) for s in entry.get("input", []) if not s.startswith("^")]
        attr = entry.get("attr", {})
        if not isinstance(attr, dict):
            raise ModelFileError(f"{filename}: node {quote(name)}: attr is not an object")
        nodes[name] = TfNode(name, op, inputs, attr)
    return nodes


def _input_ref(text: str) -> tuple[str, int]:
    name, _, index = text.rpartition(":")
    return (name, int(index)) if name and index.isdigit() else (text, 0)


def output_names(doc: dict, nodes: dict[str, TfNode]) -> list[str]:
    """The signature's outputs ("Identity:0" -> "Identity"), or else every node no other
    node reads (Consts and NoOps aside), in GraphDef order."""
    signature = doc.get("signature") or (doc.get("userDefinedMetadata") or {}).get("signature")
    if isinstance(signature, dict) and isinstance(signature.get("outputs"), dict):
        names = [_input_ref(str(v.get("name", k)))[0] for k, v in signature["outputs"].items()]
        if names and all(n in nodes for n in names):
            return names
    read = {name for node in nodes.values() for name, _ in node.inputs}
    return [n for n, node in nodes.items() if n not in read and node.op not in SOURCES]


def dependency_order(nodes: dict[str, TfNode], outputs: list[str], filename: str) -> list:
    """The nodes the outputs depend on, each after its inputs (iterative: no recursion).

    Raises:
        ModelFileError: no outputs, an input naming no node, a cycle.
        UnsupportedOpError: a cycle of a while loop (control flow).
    """
    if not outputs:
        raise ModelFileError(f"{filename}: the graph model has no outputs")
    order, state = [], {}  # state: 1 visiting, 2 done
    for out in outputs:
        stack = [(out, None)]
        while stack:
            name, reader = stack.pop()
            if name not in nodes:
                raise ModelFileError(f"{filename}: node {quote(reader)} reads {quote(name)}, "
                                     "which is not a node of the graph")
            if state.get(name) == 2:
                continue
            if state.get(name) == 1:
                state[name] = 2
                order.append(nodes[name])
                continue
            state[name] = 1
            stack.append((name, reader))
            for source, _ in reversed(nodes[name].inputs):
                if state.get(source) == 1:
                    loops = sorted({n.op for n in nodes.values() if n.op in CONTROL_FLOW})
                    if loops:
                        raise UnsupportedOpError(
                            f"{filename}: the graph loops (control flow: {', '.join(loops)}); "
                            "glcnn runs graphs without control flow")
                    raise ModelFileError(f"{filename}: the graph has a cycle through "
                                         f"{quote(source)}")
                if state.get(source) != 2:
                    stack.append((source, name))
    return order


def attr_value(raw):
    """A protobuf-JSON AttrValue as Python: int, float, bool, str (from base64), a type name,
    a shape (list of sizes, -1 unknown; None for an unknown rank) or a list of these."""
    if not isinstance(raw, dict) or not raw:
        return None
    if "list" in raw:
        items = raw["list"] or {}
        for key, cast in (("i", int), ("f", float), ("s", _text), ("b", bool)):
            if key in items:
                return [cast(v) for v in items[key]]
        return []
    if "shape" in raw:
        shape = raw["shape"]
        return None if shape.get("unknownRank") else \
            [int(d.get("size", -1)) for d in shape.get("dim", [])]
    for key, cast in (("s", _text), ("i", int), ("f", float), ("b", bool), ("type", str)):
        if key in raw:
            return cast(raw[key])
    return None


def _text(value: str) -> str:
    return base64.b64decode(value, validate=True).decode("utf-8")


