"""`fuse_layernorm`: the LayerNorm exporters write as nine elementwise ops becomes one
LayerNormalization pass (glcnn/ops/layernorm.py). GL-free; `passes.optimize` runs it first.

The chain, on a glcnn graph (PaddleOCR's SVTR neck, torch.onnx before opset 17), over one
axis a (NCHW 1, 2 or 3):

    m  = ReduceMean(x, axes=[a])          d = Sub(x, m)
    s  = Pow(d, 2)  or  Mul(d, d)         v = ReduceMean(s, axes=[a])
    e  = Add(v, ε)  (a scalar constant)   r = Sqrt(e)
    y  = Div(d, r)  [→ Mul(y, scale)]     [→ Add(., bias)]   (constants along a only)

is fused when every intermediate is read by the chain alone (d by s and y only) and is no
graph output, and no node of it carries a fused epilogue. The LayerNormalization takes the
name of the chain's last node and reads x; without the Mul its scale is 1.
"""

import numpy as np

from ..ops import build_ops
from .graph import Graph, Node


def _readers(graph: Graph, name: str) -> list[Node]:
    """The nodes reading `name`, or [] if it is a graph output (it must stay)."""
    return [] if name in graph.outputs else graph.consumers(name)


def _plain(node: Node | None, op: str) -> bool:
    return node is not None and node.op == op and not node.attrs.get("activation") \
        and not node.attrs.get("residual") and not node.attrs.get("input_activation")


def _next(graph: Graph, node: Node, op: str) -> Node | None:
    """The sole reader of `node`'s output if it is a plain `op`, else None."""
    readers = _readers(graph, node.name)
    return readers[0] if len(readers) == 1 and _plain(readers[0], op) else None


def _operands(node: Node) -> list[str]:
    """A binary node's tensor inputs in the order it computes them (`swap` reverses)."""
    return node.inputs[::-1] if int(node.attrs.get("swap", 0)) else list(node.inputs)


def _axis(node: Node) -> int | None:
    """The one NCHW axis (1, 2 or 3) a ReduceMean keeping its dims reduces, or None."""
    axes = {int(a) % 4 for a in node.attrs.get("axes", ())}
    if len(axes) != 1 or int(node.attrs.get("keepdims", 1)) != 1 or 0 in axes:
        return None
    return axes.pop()


def _along(node: Node | None, shape, axis: int) -> np.ndarray | None:
    """The constant B of a one-input Mul/Add as a vector along `axis` of `shape`, if it
    varies along that axis only; None otherwise."""
    if node is None or len(node.inputs) != 1 or "B" not in node.weights \
            or int(node.attrs.get("swap", 0)):
        return None
    b = np.asarray(node.weights["B"], np.float32)
    if b.ndim != 3:
        b = b.reshape(-1)
        b = b.reshape(1, 1, 1) if b.size == 1 else b.reshape(-1, 1, 1) if b.size == shape[0] \
            else None
    n = shape[axis - 1]
    if b is None or any(d != 1 for i, d in enumerate(b.shape) if i != axis - 1) \
            or b.shape[axis - 1] not in (1, n):
        return None
    return np.broadcast_to(b.reshape(-1), (n,)).copy()


def _chain(graph: Graph, mean: Node, shapes) -> tuple[list[Node], dict] | None:
    """The nodes of the chain starting at ReduceMean `mean` and the fused node's attributes
    and weights, or None if the pattern does not hold."""
    axis, x = _axis(mean), mean.inputs[0]
    sub = _next(graph, mean, "Sub")
    if axis is None or sub is None or len(sub.inputs) != 2 or _operands(sub) != [x, mean.name]:
        return None
    readers = _readers(graph, sub.name)
    square = next((n for n in readers if n is not sub and (
        _plain(n, "Pow") and n.inputs == [sub.name] and float(n.attrs.get("exponent")) == 2
        or _plain(n, "Mul") and n.inputs == [sub.name, sub.name])), None)
    div = next((n for n in readers if _plain(n, "Div") and _operands(n)[0] == sub.name), None)
    if square is None or div is None or len(readers) != 2 or len(div.inputs) != 2:
        return None
    var = _next(graph, square, "ReduceMean")
    eps = _next(graph, var, "Add") if var is not None and _axis(var) == axis else None
    root = _next(graph, eps, "Sqrt") if eps is not None else None
    if root is None or _operands(div)[1] != root.name or _readers(graph, root.name) != [div] \
            or len(eps.inputs) != 1 or np.size(eps.weights.get("B", ())) != 1:
        return None
    nodes, shape = [mean, sub, square, var, eps, root, div], shapes[x]
    scale, bias, last = np.ones(shape[axis - 1], np.float32), None, div
    mul = _next(graph, div, "Mul")
    if _along(mul, shape, axis) is not None:
        scale, last = _along(mul, shape, axis), mul
        nodes.append(mul)
    add = _next(graph, last, "Add")
    if _along(add, shape, axis) is not None:
        bias, last = _along(add, shape, axis), add
        nodes.append(add)
    epsilon = float(np.asarray(eps.weights["B"]).reshape(-1)[0])
    if epsilon < 0:
        return None
    weights = {"scale": scale} | ({} if bias is None else {"bias": bias})
    return nodes, {"axis": axis, "epsilon": epsilon, "weights": weights}


def fuse_layernorm(graph: Graph) -> Graph:
    """Fuse each decomposed LayerNorm chain (see the module docstring) into one
    LayerNormalization node, in place; returns `graph`."""
    shapes = None
    for mean in [n for n in graph.nodes if _plain(n, "ReduceMean")]:
        if mean not in graph.nodes:  # taken by an earlier fusion
            continue
        shapes = shapes or build_ops(graph)[1]
        found = _chain(graph, mean, shapes)
        if found is None:
            continue
        nodes, fused = found
        last = nodes[-1]
        norm = Node("LayerNormalization", last.name, [mean.inputs[0]],
                    {"axis": fused["axis"], "epsilon": fused["epsilon"]}, fused["weights"])
        graph.nodes[graph.nodes.index(last)] = norm
        for node in nodes[:-1]:
            graph.nodes.remove(node)
    return graph
