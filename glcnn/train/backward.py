"""The backward graph of a forward Graph, GL-free: ordinary glcnn nodes computing every
gradient, so the trainer compiles them as it compiles any layer.

Tensors (names as the viewer shows them): "grad:T" is dL/dT of forward tensor T, "dz:L" the
gradient of layer L before its activation, "grad:L.weight" / "grad:L.bias" the weight
gradients in the forward layouts, "loss" the loss texel, "target" the target. Walking the
forward nodes backwards:

- loss: LossGrad(y, target) -> grad:y, LossSum(y, target) -> loss;
- a layer's activation (fused, or standalone Relu, ...): ActivationGrad(grad:L, L) -> dz:L
  (of Sub(L, r) -> act:L for a residual r added after it, L holding act(z) + r),
  folded into the conv or LossGrad computing grad:L where nothing else reads that (the
  "output_grad" epilogue), the unfused op kept for meta["on_demand"] (Trainer.gradient);
- Conv / ConvTranspose: ConvGradWeight(x, dz), ConvGradBias(dz), and for an input that is no
  graph input the input gradient: the other kind of conv on dz with the same weight array
  (Conv: ConvTranspose with output_padding = the rows the stride left over; ConvTranspose:
  Conv; with one group it reads the layer's own filter layout, attrs["filters_transposed"]);
  a fused residual input gets dz;
- Add: dz to both inputs (through ResizeGrad to the one it reads upscaled, attrs["upsample"]:
  glcnn.graph.fuse_resize); any op's fused residual input: dz (grad:L if added after the
  activation);
- MaxPool, AveragePool: PoolGrad(dz, x); Resize: ResizeGrad(dz, x); Concat: a Slice of dz per
  input; Flatten / Reshape: a Rearrange of dz back to x's shape (nothing when the shapes agree);
- Gemm: GemmGradWeight(x, dz), ConvGradBias(dz) (its bias layout is a conv's), and
  GemmGradInput(dz, "weights:L"), the layer's live weight layout as a tensor (the trainer gives
  it the forward pipeline's weight texture);
- a tensor with several readers: the Add of their contributions.

Inputs that are graph inputs get no gradient.
"""

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..errors import UnsupportedOpError, quote
from ..ops.resize import RESIZES, unfused_resize
from ..graph.graph import Graph, Node
from ..layout import matrix_grid, matrix_shape
from ..ops import Op, build_ops
from .grad_ops import GRAD_ACTIVATIONS
from .weights import from_layout as conv_from_layout

CONVS = ("Conv", "ConvTranspose")
POOLS = ("MaxPool", "AveragePool")
FLATTENS = ("Flatten", "Reshape")
SUPPORTED = (*CONVS, *GRAD_ACTIVATIONS, "Add", "Concat", *POOLS, *RESIZES, *FLATTENS, "Gemm")
TARGET, LOSS = "target", "loss"
WEIGHTS = "weights:"  # "weights:L": layer L's weight layout as a backward-graph input
_GEOMETRY = ("strides", "pads", "dilations", "group")
_EPILOGUE = ("activation", "residual", "affine", "input_activation")


@dataclass
class Param:
    """A trained weight: `layer`'s weight `key` ("W" or "B"), its PyTorch name and gradient."""

    layer: str
    key: str
    torch_name: str
    grad: str


def grad_name(tensor: str) -> str:
    return f"grad:{tensor}"


def unfuse_upsamples(graph: Graph) -> Graph:
    """`graph` with each Conv's fused input upscale (attrs["input_upsample"],
    glcnn.graph.fuse_resize.fuse_upsampled_convs) a Resize node of its own again, named
    "<conv>/input_upsample": the weight gradient reads the upscaled input, and the input
    gradient reaches u through the Resize's gradient. A new Graph where there is one, else
    `graph` itself."""
    if not any(n.attrs.get("input_upsample") for n in graph.nodes):
        return graph
    nodes = []
    for node in graph.nodes:
        upsample = node.attrs.get("input_upsample")
        if upsample:
            resize = unfused_resize(upsample, f"{node.name}/input_upsample", node.inputs[0])
            attrs = {k: v for k, v in node.attrs.items() if k != "input_upsample"}
            nodes.append(resize)
            node = dataclasses.replace(node, inputs=[resize.name, *node.inputs[1:]], attrs=attrs)
        nodes.append(node)
    return dataclasses.replace(graph, nodes=nodes)


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
        for tensor, grad in _input_grads(nodes, params, node, g, dz, graph.inputs, shapes):
            contributions.setdefault(tensor, []).append(grad)
    nodes, on_demand = _fuse_activation_grads(nodes)
    inputs = {name: shapes[name] for name in _read(nodes) if name != TARGET}
    inputs[TARGET] = shapes[out]
    outputs = [LOSS] + [p.grad for p in params]
    backward = Graph(inputs, nodes, outputs, {"gradients": gradients, "on_demand": on_demand})
    _, bshapes = build_ops(backward)  # checks every backward op, e.g. an activation's alpha
    for tensor, grad in gradients.items():
        if bshapes[grad] != shapes[tensor]:
            raise UnsupportedOpError(f"layer {quote(tensor)}: its gradient has shape "
                                     f"{bshapes[grad]}, the tensor {shapes[tensor]}")
    order = {node.name: i for i, node in enumerate(graph.nodes)}
    return backward, sorted(params, key=lambda p: (order[p.layer], p.key != "W"))


def _fuse_activation_grads(nodes: list[Node]) -> tuple[list[Node], list[str]]:
    """Fold each ActivationGrad into the conv or LossGrad computing the gradient it reads, when
    nothing else reads that (the op's epilogue attrs["output_grad"]: one pass fewer per layer,
    0.2-0.4 ms each on llvmpipe). The unfused op stays, right after, to be drawn on demand
    only (its output is a gradient `Trainer.gradient` shows); returns the nodes and those."""
    readers: dict[str, int] = {}
    for node in nodes:
        for tensor in node.inputs:
            readers[tensor] = readers.get(tensor, 0) + 1
    made = {node.name: node for node in nodes}
    fused: dict[str, Node] = {}  # the gradient's name -> the op computing dL/dz instead
    for node in nodes:
        producer = made.get(node.inputs[0]) if node.op == "ActivationGrad" else None
        # Convs reading their layer's filters only: the trainer gives the unfused one the
        # weights its gradient was made with.
        if producer is not None and readers[producer.name] == 1 and \
                (producer.op == "LossGrad" or producer.attrs.get("filters_transposed")) and \
                not any(producer.attrs.get(k) for k in _EPILOGUE):
            fused[producer.name] = Node(producer.op, node.name, [*producer.inputs, node.inputs[1]],
                                        producer.attrs | {"output_grad": node.attrs["act"]},
                                        producer.weights)
    gone = {node.name for node in fused.values()}  # the ActivationGrads folded in
    out = []
    for node in nodes:
        if node.name in fused:
            out += [fused[node.name], node]
        elif node.name not in gone:
            out.append(node)
    return out, list(fused)


def _check_trainable(node: Node, shapes: dict) -> None:
    where = f"layer {quote(node.name)} ({node.label})"
    if node.op not in SUPPORTED:
        raise UnsupportedOpError(f"{where}: training supports {', '.join(SUPPORTED)} so far")
    for key in ("input_activation", "affine", "input_gate", "input_mean", "input_upsample"):
        if node.attrs.get(key):
            raise UnsupportedOpError(f"{where}: no backward pass for a fused {key} yet")
    _check_activation(where, _activation(node))
    if node.op == "Add" and (len(node.inputs) != 2 or not node.attrs.get("upsample") and
                             shapes[node.inputs[0]] != shapes[node.inputs[1]]):
        raise UnsupportedOpError(f"{where}: training supports Add of two tensors of one shape")
    if node.op == "Gemm" and (float(node.attrs.get("alpha", 1.0)) != 1 or
                              float(node.attrs.get("beta", 1.0)) != 1):
        raise UnsupportedOpError(f"{where}: training needs alpha = beta = 1 (has "
                                 f"alpha={node.attrs.get('alpha', 1.0)}, "
                                 f"beta={node.attrs.get('beta', 1.0)})")
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
    y = node.name  # the activation's output, from which ActivationGrad reads its derivative
    if node.residual_after_activation:  # node.name is act(z) + r: take r off again
        y = f"act:{node.name}"
        nodes.append(Node("Sub", y, [node.name, node.inputs[-1]]))
    nodes.append(Node("ActivationGrad", f"dz:{node.name}", [g, y], {"act": act}))
    return f"dz:{node.name}"


def _input_grads(nodes, params, node: Node, g: str, dz: str, graph_inputs, shapes):
    """(tensor, gradient) contributions of `node` to its inputs, given dL/dy `g` and dL/dz
    `dz` of y = act(z); adds its weight gradients. A residual added after the activation
    gets g, one added before it dz."""
    if node.op in GRAD_ACTIVATIONS:
        return [(node.inputs[0], dz)]
    if node.op == "Add" and node.attrs.get("upsample"):  # glcnn.graph.fuse_resize
        x, u, name = *node.inputs, f"du:{node.name}"
        if u in graph_inputs:
            return [(x, dz)]
        resize = unfused_resize(node.attrs["upsample"], f"up:{node.name}", u)
        nodes.append(Node("ResizeGrad", name, [dz, u], {"forward": resize.op} | resize.attrs))
        return [(x, dz), (u, name)]
    if node.op == "Add":
        return [(t, dz) for t in node.inputs]
    residual = g if node.residual_after_activation else dz
    out = [(node.inputs[-1], residual)] if node.attrs.get("residual") else []
    wanted = [t not in graph_inputs for t in node.inputs]
    if node.op in CONVS:
        return out + _conv_grads(nodes, params, node, dz, wanted[0], shapes)
    if node.op == "Gemm":
        return out + _gemm_grads(nodes, params, node, dz, wanted[0], shapes)
    if node.op == "Concat":
        return out + _concat_grads(nodes, node, dz, wanted, shapes)
    if not wanted[0]:
        return out
    x, name = node.inputs[0], f"dx:{node.name}"
    if node.op in FLATTENS:
        if shapes[x] == shapes[node.name]:
            return out + [(x, dz)]
        unflatten = {"shape": list(shapes[x]), "dims": [int(np.prod(shapes[x]))], "strides": [1]}
        nodes.append(Node("Rearrange", name, [dz], unflatten))
    else:
        op = "PoolGrad" if node.op in POOLS else "ResizeGrad"
        nodes.append(Node(op, name, [dz, x], {"forward": node.op} | _forward_attrs(node)))
    return out + [(x, name)]


def _forward_attrs(node: Node) -> dict:
    return {k: v for k, v in node.attrs.items() if k not in _EPILOGUE}


def _conv_grads(nodes, params, node: Node, dz: str, wanted: bool, shapes):
    x = node.inputs[0]
    geometry = {k: node.attrs[k] for k in (*_GEOMETRY, "output_padding") if k in node.attrs}
    w = node.weights["W"]
    wgrad = grad_name(f"{node.name}.weight")
    bias = grad_name(f"{node.name}.bias") if "B" in node.weights else None  # _bias_grad's
    nodes.append(Node("ConvGradWeight", wgrad, [x, dz],
                      {"forward": node.op, "bias_grad": bias, **geometry}, {"W": w}))
    params.append(Param(node.name, "W", f"{node.name}.weight", wgrad))
    _bias_grad(nodes, params, node, dz, "B")
    if not wanted:
        return []
    nodes.append(_input_grad_node(node, dz, w, shapes[x]))
    return [(x, f"dx:{node.name}")]


def _bias_grad(nodes, params, node: Node, dz: str, key: str) -> None:
    """ConvGradBias of weight `key`, if the layer has it: a Gemm's bias layout is a conv's."""
    if key in node.weights:
        bgrad = grad_name(f"{node.name}.bias")
        nodes.append(Node("ConvGradBias", bgrad, [dz]))
        params.append(Param(node.name, "B", f"{node.name}.bias", bgrad))


def _gemm_grads(nodes, params, node: Node, dz: str, wanted: bool, shapes):
    x = node.inputs[0]
    attrs = {"forward": "Gemm"} | ({"transB": node.attrs["transB"]}
                                   if "transB" in node.attrs else {})
    b = {"B": node.weights["B"]}
    wgrad = grad_name(f"{node.name}.weight")
    nodes.append(Node("GemmGradWeight", wgrad, [x, dz], dict(attrs), dict(b)))
    params.append(Param(node.name, "W", f"{node.name}.weight", wgrad))
    _bias_grad(nodes, params, node, dz, "C")
    if not wanted:
        return []
    layout = WEIGHTS + node.name
    height, width, _ = matrix_shape(shapes[node.name][0], shapes[x][0])
    shapes[layout] = (4, height, width)
    nodes.append(Node("GemmGradInput", f"dx:{node.name}", [dz, layout], dict(attrs), dict(b)))
    return [(x, f"dx:{node.name}")]


def _concat_grads(nodes, node: Node, dz: str, wanted: list[bool], shapes):
    """A Slice of dz along the axis for each input (not the residual one)."""
    axis = int(node.attrs.get("axis", 1)) % 4  # NCHW: 1 (C), 2 (H), 3 (W)
    count = len(node.inputs) - bool(node.attrs.get("residual"))
    out, start = [], 0
    for i, t in enumerate(node.inputs[:count]):
        size = shapes[t][axis - 1]
        if wanted[i]:
            name = f"dx:{node.name}:{i}"
            nodes.append(Node("Slice", name, [dz], {"starts": [start], "ends": [start + size],
                                                     "axes": [axis]}))
            out.append((t, name))
        start += size
    return out


def _input_grad_node(node: Node, dz: str, w: np.ndarray, x_shape) -> Node:
    """dL/dx of a conv: the other kind of conv on `dz`, same weight array, no bias."""
    # weights_of: the layer whose weights it reads (the trainer binds them in each step).
    attrs = {k: node.attrs[k] for k in _GEOMETRY if k in node.attrs} | {"weights_of": node.name}
    if int(attrs.get("group", 1)) == 1:  # reads the layer's own filter layout (ops/conv.py)
        attrs["filters_transposed"] = True
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


def weight_layer(tensor: str) -> str | None:
    """The layer whose weight layout backward input `tensor` is ("weights:L"), else None."""
    return tensor[len(WEIGHTS):] if tensor.startswith(WEIGHTS) else None


def from_layout(op: Op, key: str, layout: np.ndarray) -> np.ndarray:
    """Trained weight `key` ("W" or "B") of `op` in PyTorch's shape from its (height, width, 4)
    texture layout: a conv's (glcnn/train/weights.py), or a Gemm's W (N, K) as nn.Linear's
    weight (layout.pack_matrix) and its bias (N,)."""
    if op.op_type != "Gemm":
        return conv_from_layout(op, key, layout)
    n, k = op.matrix.shape
    if key == "B":
        return np.array(layout[0].reshape(-1)[:n], np.float32)
    rows, row = matrix_grid(n, k)
    s = (n + 3) // 4
    view = layout[:s * rows, :row].reshape(s, rows, row, 4).transpose(0, 3, 1, 2)
    return np.ascontiguousarray(view.reshape(4 * s, rows * row)[:n, :k], np.float32)


def graph_weight(node: Node, key: str, value: np.ndarray) -> tuple[str, np.ndarray]:
    """(weight name, array) of `node` holding trained weight `key` ("W" or "B", PyTorch-shaped
    `value`): a conv's W / B; a Gemm's B (in its transB layout) / C (in its own shape)."""
    if node.op != "Gemm":
        return key, value
    if key == "W":
        return "B", value if int(node.attrs.get("transB", 0)) else np.ascontiguousarray(value.T)
    old = np.shape(node.weights.get("C", ()))
    return "C", value.reshape(old) if int(np.prod(old)) == value.size else value
