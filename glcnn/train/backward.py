"""The backward graph of a forward Graph, GL-free: ordinary glcnn nodes computing every
gradient, so the trainer compiles them as it compiles any layer.

Tensors (names as the viewer shows them): "grad:T" is dL/dT of forward tensor T, "dz:L" the
gradient of layer L before its activation, "grad:L.weight" / "grad:L.bias" the weight
gradients in the forward layouts, "loss" the loss texel, "target" the target. Walking the
forward nodes backwards:

- loss: LossGrad(y, target) -> grad:y, LossSum(y, target) -> loss;
- a layer's activation (fused, or standalone Relu, ...): ActivationGrad(grad:L, L) -> dz:L;
- Conv / ConvTranspose: ConvGradWeight(x, dz), ConvGradBias(dz), and for an input that is no
  graph input the input gradient: the other kind of conv on dz with the same weight array
  (Conv: ConvTranspose with output_padding = the rows the stride left over; ConvTranspose:
  Conv); a fused residual input gets dz;
- Add: dz to both inputs;
- a tensor with several readers: the Add of their contributions.
"""

from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedOpError, quote
from ..graph.graph import Graph, Node
from ..ops import build_ops
from .grad_ops import GRAD_ACTIVATIONS

CONVS = ("Conv", "ConvTranspose")
SUPPORTED = (*CONVS, *GRAD_ACTIVATIONS, "Add")
TARGET, LOSS = "target", "loss"
_GEOMETRY = ("strides", "pads", "dilations", "group")


@dataclass
class Param:
    """A trained weight: `layer`'s weight `key` ("W" or "B"), its PyTorch name and gradient."""

    layer: str
    key: str
    torch_name: str
    grad: str


def grad_name(tensor: str) -> str:
    return f"grad:{tensor}"


def backward_graph(graph: Graph, loss: str, samples: int = 1) -> tuple[Graph, list[Param]]:
    """The graph computing the gradients of `loss` ("mse" | "l1" | "bce", mean over `samples`
    samples and every element) of `graph`'s only output, and the weights it trains (in graph
    order); its meta["gradients"] maps each forward tensor to the tensor of its gradient.

    Raises:
        UnsupportedOpError: an op, fused attribute or graph shape this phase cannot train,
            naming the layer.
    """
    ops, shapes = build_ops(graph)
    if len(graph.inputs) != 1:
        raise UnsupportedOpError(f"training needs one graph input; this one has "
                                 f"{quote(list(graph.inputs))}")
    if len(graph.outputs) != 1:
        raise UnsupportedOpError(f"training needs one graph output; this one has "
                                 f"{quote(graph.outputs)}")
    for node in graph.nodes:
        _check_trainable(node, shapes)
    out = graph.outputs[0]
    attrs = {"loss": loss, "samples": samples}
    nodes = [Node("LossSum", LOSS, [out, TARGET], dict(attrs)),
             Node("LossGrad", grad_name(out), [out, TARGET], dict(attrs))]
    contributions: dict[str, list[str]] = {out: [grad_name(out)]}
    params: list[Param] = []
    gradients = {}  # forward tensor -> its gradient tensor
    for node in reversed(graph.nodes):
        parts = contributions.get(node.name)
        if not parts:
            continue
        g = gradients[node.name] = _sum(nodes, node.name, parts)
        dz = _activation_grad(nodes, node, g)
        for tensor, grad in _input_grads(nodes, params, node, dz, graph.inputs, shapes):
            contributions.setdefault(tensor, []).append(grad)
    inputs = {name: shapes[name] for name in _read(nodes) if name != TARGET}
    inputs[TARGET] = shapes[out]
    outputs = [LOSS] + [p.grad for p in params]
    backward = Graph(inputs, nodes, outputs, {"gradients": gradients})
    _, bshapes = build_ops(backward)  # checks every backward op, e.g. an activation's alpha
    for tensor, grad in gradients.items():
        if bshapes[grad] != shapes[tensor]:
            raise UnsupportedOpError(f"layer {quote(tensor)}: its gradient has shape "
                                     f"{bshapes[grad]}, the tensor {shapes[tensor]}")
    order = {node.name: i for i, node in enumerate(graph.nodes)}
    return backward, sorted(params, key=lambda p: (order[p.layer], p.key != "W"))


def _check_trainable(node: Node, shapes: dict) -> None:
    where = f"layer {quote(node.name)} ({node.label})"
    if node.op not in SUPPORTED:
        raise UnsupportedOpError(f"{where}: training supports {', '.join(SUPPORTED)} so far")
    for key in ("input_activation", "affine"):
        if node.attrs.get(key):
            raise UnsupportedOpError(f"{where}: no backward pass for a fused {key} yet")
    _check_activation(where, _activation(node))
    if node.op == "Add" and (len(node.inputs) != 2 or
                             shapes[node.inputs[0]] != shapes[node.inputs[1]]):
        raise UnsupportedOpError(f"{where}: training supports Add of two tensors of one shape")
    if node.op == "ConvTranspose":
        out_pad = node.attrs.get("output_padding", (0, 0))
        if any(p >= s for p, s in zip(out_pad, node.attrs.get("strides", (1, 1)))):
            raise UnsupportedOpError(f"{where}: output_padding {list(out_pad)} ≥ stride: its "
                                     "input gradient is no plain Conv")


def _check_activation(where: str, act: dict | None) -> None:
    if act is None:
        return
    if act.get("op") not in GRAD_ACTIVATIONS:
        raise UnsupportedOpError(f"{where}: no backward pass for activation "
                                 f"{quote(act.get('op'))}; supported: "
                                 f"{', '.join(GRAD_ACTIVATIONS)}")
    default = GRAD_ACTIVATIONS[act["op"]]
    if default is not None and not float(act.get("alpha", default)) > 0:
        raise UnsupportedOpError(f"{where}: {act['op']} alpha={act['alpha']} must be > 0 to "
                                 "train (its derivative is read from its output)")


def _activation(node: Node) -> dict | None:
    """The activation applied to `node`'s output: fused ({"op": ..., params}) or its own."""
    if node.attrs.get("activation"):
        return node.attrs["activation"]
    return {"op": node.op, **node.attrs} if node.op in GRAD_ACTIVATIONS else None


def _sum(nodes: list[Node], tensor: str, parts: list[str]) -> str:
    """The gradient of `tensor`: its one contribution, or an Add chain of them."""
    total = parts[0]
    for i, part in enumerate(parts[1:], 1):
        name = grad_name(tensor) if i == len(parts) - 1 else f"{grad_name(tensor)}+{i}"
        nodes.append(Node("Add", name, [total, part]))
        total = name
    return total


def _activation_grad(nodes: list[Node], node: Node, g: str) -> str:
    act = _activation(node)
    if act is None:
        return g
    nodes.append(Node("ActivationGrad", f"dz:{node.name}", [g, node.name], {"act": act}))
    return f"dz:{node.name}"


def _input_grads(nodes, params, node: Node, dz: str, graph_inputs, shapes):
    """(tensor, gradient) contributions of `node` to its inputs; adds its weight gradients."""
    if node.op in GRAD_ACTIVATIONS:
        return [(node.inputs[0], dz)]
    if node.op == "Add":
        return [(t, dz) for t in node.inputs]
    x = node.inputs[0]
    geometry = {k: node.attrs[k] for k in (*_GEOMETRY, "output_padding") if k in node.attrs}
    w = node.weights["W"]
    wgrad = grad_name(f"{node.name}.weight")
    nodes.append(Node("ConvGradWeight", wgrad, [x, dz], {"forward": node.op, **geometry},
                      {"W": w}))
    params.append(Param(node.name, "W", f"{node.name}.weight", wgrad))
    if "B" in node.weights:
        bgrad = grad_name(f"{node.name}.bias")
        nodes.append(Node("ConvGradBias", bgrad, [dz]))
        params.append(Param(node.name, "B", f"{node.name}.bias", bgrad))
    out = [(node.inputs[1], dz)] if node.attrs.get("residual") else []
    if x not in graph_inputs:
        nodes.append(_input_grad_node(node, dz, w, shapes[x]))
        out.append((x, f"dx:{node.name}"))
    return out


def _input_grad_node(node: Node, dz: str, w: np.ndarray, x_shape) -> Node:
    """dL/dx of a conv: the other kind of conv on `dz`, same weight array, no bias."""
    attrs = {k: node.attrs[k] for k in _GEOMETRY if k in node.attrs}
    if node.op == "ConvTranspose":
        return Node("Conv", f"dx:{node.name}", [dz], attrs, {"W": w})
    (pt, pl, pb, pr) = node.attrs.get("pads", (0, 0, 0, 0))
    (sy, sx), (dy, dx) = node.attrs.get("strides", (1, 1)), node.attrs.get("dilations", (1, 1))
    kh, kw = w.shape[2:]
    extra = [(x_shape[1] + pt + pb - dy * (kh - 1) - 1) % sy,
             (x_shape[2] + pl + pr - dx * (kw - 1) - 1) % sx]
    return Node("ConvTranspose", f"dx:{node.name}", [dz], attrs | {"output_padding": extra},
                {"W": w})


def _read(nodes: list[Node]) -> list[str]:
    """Tensors the nodes read that none of them makes (forward tensors and the target)."""
    made = {n.name for n in nodes}
    return list(dict.fromkeys(t for n in nodes for t in n.inputs if t not in made))
