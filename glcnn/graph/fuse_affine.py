"""Elementwise chains exporters write around convs, made part of the conv (GL-free; run by
`passes.optimize`).

- `fuse_swish`: x · sigmoid(x) → Silu(x); x · hardsigmoid(x) (α = 1/6, β = 1/2) and
  x · clip(x + 3, 0, 6) / 6 (the /6 before or after the product, as a Div or a Mul by 1/6)
  → HardSwish(x). Exporters write these when the framework's op has no ONNX counterpart at
  their opset (PyTorch's SiLU, Paddle's hardswish); as one activation it fuses into the conv.
- `drop_identity_affine`: Mul or Div by 1, Add or Sub of 0 go (PP-OCRv4 rec's swish is
  x · sigmoid(x · 1): without the Mul it is one Silu).
- `fold_affine`: Mul, Add, Sub or Div of a tensor by a constant that is one value or one per
  channel, and BatchNormalization (each a per-channel affine y = x · a + b).
  `into="weights"`: after a Conv or ConvTranspose with nothing fused yet, into its weights
  and bias (as BatchNorm is folded); after a dense layer (Gemm, or MatMul of a vector by a
  constant) likewise, the layer becoming a Gemm with a bias, so the activation after a
  Keras Dense's bias Add fuses too (MTCNN's MatMul → Add → PRelu: one pass).
  `into="epilogue"`: after any epilogue host (`glcnn.ops.base.EPILOGUE_HOSTS`), as the host's
  `affine` epilogue, after its activation (a PP-LCNet block's conv → affine → hardswish →
  affine is one pass).

Both need the tensor between the two nodes to be read by the second alone and to be no output.
"""

import numpy as np

from ..ops import build_ops
from ..ops.base import AFFINE_WEIGHTS, EPILOGUE_HOSTS
from ..ops.batchnorm import batchnorm_affine
from .graph import Graph, Node

_CONVS = ("Conv", "ConvTranspose")
_FUSED = ("activation", "residual", "input_activation", "affine")


def _plain(node: Node | None, *ops: str) -> bool:
    return node is not None and node.op in ops and not any(node.attrs.get(k) for k in _FUSED)


def _constant(node: Node | None, op: str) -> np.ndarray | None:
    """The constant of a plain `op` of one tensor and a constant B, flattened, when it is
    one value or one per channel (B of shape (), (n,) or (n, 1, 1)); else None."""
    if not _plain(node, op) or len(node.inputs) != 1 or "B" not in node.weights \
            or node.attrs.get("swap"):
        return None
    b = np.asarray(node.weights["B"], np.float64)
    if b.ndim == 3 and b.shape[1:] != (1, 1) or b.ndim > 3:
        return None
    return b.reshape(-1)


def _is(node: Node | None, op: str, value: float) -> bool:
    b = _constant(node, op)
    return b is not None and b.size == 1 and bool(np.isclose(b[0], value, rtol=1e-6, atol=0))


def _sixth(graph: Graph, node: Node) -> Node | None:
    """The node dividing `node`'s output by 6 (a Div by 6 or a Mul by 1/6) as its sole reader."""
    user = graph.sole_consumer(node.name)
    return user if _is(user, "Div", 6.0) or _is(user, "Mul", 1 / 6) else None


def _relu6_of(graph: Graph, name: str) -> str | None:
    """x when `name` is clip(x + 3, 0, 6) read once, else None."""
    clip = graph.producer(name)
    if not _plain(clip, "Clip") or float(clip.attrs.get("min", -np.inf)) != 0.0 or \
            float(clip.attrs.get("max", np.inf)) != 6.0 or graph.sole_consumer(name) is None:
        return None
    add = graph.producer(clip.inputs[0])
    if not _is(add, "Add", 3.0) or graph.sole_consumer(add.name) is not clip:
        return None
    return add.inputs[0]


def _gate(graph: Graph, mul: Node) -> tuple[str, list[Node], str] | None:
    """(x, the gate's nodes, activation) when `mul` is x · gate(x) as in the module doc."""
    if not _plain(mul, "Mul") or len(mul.inputs) != 2 or "B" in mul.weights:
        return None
    for x, g in (mul.inputs, mul.inputs[::-1]):
        node = graph.producer(g)
        if node is None or graph.sole_consumer(g) is not mul or x == g:
            continue
        if _plain(node, "Sigmoid") and node.inputs == [x]:
            return x, [node], "Silu"
        if _plain(node, "HardSigmoid") and node.inputs == [x] and np.isclose(
                float(node.attrs.get("alpha", 0.2)), 1 / 6, rtol=1e-6) and \
                float(node.attrs.get("beta", 0.5)) == 0.5:
            return x, [node], "HardSwish"
        if (_is(node, "Div", 6.0) or _is(node, "Mul", 1 / 6)) and \
                _relu6_of(graph, node.inputs[0]) == x:
            clip = graph.producer(node.inputs[0])
            return x, [graph.producer(clip.inputs[0]), clip, node], "HardSwish"
        if _relu6_of(graph, g) == x:
            return x, [graph.producer(node.inputs[0]), node], "HardSwish"
    return None


_IDENTITY = {"Mul": 1.0, "Div": 1.0, "Add": 0.0, "Sub": 0.0}


def drop_identity_affine(graph: Graph) -> Graph:
    """Remove each plain Mul or Div by a constant of ones and Add or Sub of zeros (every
    value of B; one tensor input, the output of its shape, no graph output), its readers
    rewired to its input, in place. Exact: x · 1 = x / 1 = x − 0 = x + 0 = x (but −0 + 0 =
    +0)."""
    candidates = [n for n in graph.nodes if n.op in _IDENTITY and _plain(n, n.op)
                  and len(n.inputs) == 1 and not n.attrs.get("swap") and "B" in n.weights
                  and n.name not in graph.outputs
                  and np.all(np.asarray(n.weights["B"]) == _IDENTITY[n.op])]
    shapes = build_ops(graph)[1] if candidates else {}  # shapes only where one may go
    for node in candidates:
        if shapes[node.name] == shapes[node.inputs[0]]:
            graph.bypass(node)
    return graph


def fuse_swish(graph: Graph) -> Graph:
    """Rewrite each swish-like chain (module doc) into one activation node, in place."""
    for mul in [n for n in graph.nodes if n.op == "Mul"]:
        if mul not in graph.nodes:
            continue
        found = _gate(graph, mul)
        if found is None:
            continue
        x, gate, op = found
        last = mul
        if op == "HardSwish" and len(gate) == 2:  # x · clip(x + 3, 0, 6), then / 6
            last = _sixth(graph, mul)
            if last is None:
                continue
            gate = gate + [mul]
        for node in gate:
            graph.nodes.remove(node)
        index = graph.nodes.index(last)
        graph.nodes[index] = Node(op, last.name, [x])
    return graph


def scale_conv(conv: Node, scale: np.ndarray, shift: np.ndarray) -> dict[str, np.ndarray]:
    """`conv`'s weights making conv(x) · scale + shift per output channel (float32 products:
    the weights are the bulk of a model's bytes, and float64 copies cost more than a load)."""
    W = np.asarray(conv.weights["W"], np.float32)
    a = np.asarray(scale, np.float32)
    bias = np.asarray(conv.weights.get("B", np.zeros(len(a))), np.float64)
    if conv.op == "Conv":
        W = W * a[:, None, None, None]
    else:  # (Ci, Co/group, kh, kw): output channel g·Cog + j is axis 1 within group g
        group = int(conv.attrs.get("group", 1))
        W = (W.reshape(group, -1, *W.shape[1:]) * a.reshape(group, 1, -1, 1, 1)).reshape(W.shape)
    W.flags.writeable = False  # (ops remember read-only weights as checked: base.py)
    return {**conv.weights, "W": W,
            "B": (bias * np.asarray(scale, np.float64) + shift).astype(np.float32)}


def dense(node: Node, shapes: dict) -> bool:
    """Whether `node` is a dense layer with nothing fused: a Gemm, or a MatMul of a vector
    (K, 1, 1) by a constant B (glcnn/ops/gemm.py)."""
    return _plain(node, "Gemm", "MatMul") and len(node.inputs) == 1 and "B" in node.weights \
        and shapes[node.inputs[0]][1:] == (1, 1) and not int(node.attrs.get("transA", 0)) \
        and not {"a_axes", "out_axes"} & set(node.attrs)


def scale_dense(node: Node, scale: np.ndarray, shift: np.ndarray) -> Node:
    """The Gemm computing dense layer `node`(x) · scale + shift per output: B (K, N) with its
    columns scaled, bias C · scale + shift (α, β and transB applied, float64 sums)."""
    a = node.attrs if node.op == "Gemm" else {}
    b = np.asarray(node.weights["B"], np.float32)
    b = b.T if int(a.get("transB", 0)) else b  # (K, N)
    n = b.shape[1]
    c = np.asarray(node.weights.get("C", 0.0), np.float64).reshape(-1)
    bias = float(a.get("beta", 1.0)) * np.broadcast_to(c, (n,))
    weights = {"B": b * np.asarray(float(a.get("alpha", 1.0)) * scale, np.float32),
               "C": (bias * scale + shift).astype(np.float32)}
    return Node("Gemm", node.name, list(node.inputs), {}, weights)


def _affine(node: Node, channels: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(a, b) with node(x) = x · a + b per channel, for the forms of the module doc."""
    if _plain(node, "BatchNormalization"):
        return batchnorm_affine(node)
    for op in ("Mul", "Add", "Sub", "Div"):
        b = _constant(node, op)
        if b is not None:
            break
    else:
        return None
    if b.size not in (1, channels) or op == "Div" and not np.all(np.abs(b) >= 2.0 ** -126):
        return None
    b = np.broadcast_to(b, (channels,))
    one, zero = np.ones(channels), np.zeros(channels)
    return {"Mul": (b, zero), "Add": (one, b), "Sub": (one, -b), "Div": (1 / b, zero)}[op]


def fold_affine(graph: Graph, into: str) -> Graph:
    """Fold each constant affine node into the node before it (module doc), in place."""
    shapes = build_ops(graph)[1]
    for node in list(graph.nodes):
        host = graph.producer(node.inputs[0]) if node.inputs else None
        if host is None or graph.sole_consumer(host.name) is not node:
            continue
        affine = _affine(node, shapes[host.name][0])
        if affine is None:
            continue
        if into == "weights" and host.op in _CONVS and not any(
                host.attrs.get(k) for k in ("activation", "residual", "affine")):
            host.weights = scale_conv(host, *affine)
        elif into == "weights" and dense(host, shapes):
            folded = scale_dense(host, *affine)
            host.op, host.attrs, host.weights = folded.op, folded.attrs, folded.weights
        elif into == "epilogue" and host.op in EPILOGUE_HOSTS:
            old = [host.weights[k] for k in AFFINE_WEIGHTS] if host.attrs.get("affine") \
                else (1.0, 0.0)
            a, b = affine
            host.attrs = {**host.attrs, "affine": True}
            host.weights = {**host.weights,
                            AFFINE_WEIGHTS[0]: np.asarray(old[0] * a, np.float32),
                            AFFINE_WEIGHTS[1]: np.asarray(old[1] * a + b, np.float32)}
        else:
            continue
        graph.absorb(host, node)
    return graph
