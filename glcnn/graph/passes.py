"""Graph rewrites that make a graph faster without changing results (GL-free).

- `expand_reductions`: ops whose one pass is slow on large inputs become several parallel
  passes (InstanceNormalization → mean, variance and normalise passes; a reduction over H
  and W → a W pass and an H pass; Softmax over many channels → a stats and a normalise pass).
- `drop_identity_reshapes`: Flatten/Reshape nodes that leave the texels as they are go.
- `fold_batchnorm`: Conv/ConvTranspose → BatchNormalization becomes one conv with scaled
  weights and a new bias.
- `fold_flatten_order`: Transpose → Flatten → dense layer (a Keras Flatten of channels-last
  data, as tf2onnx writes it) becomes Flatten → dense layer with the rows of its weights
  permuted: the Transpose pass goes.
- `flatten_dense_to_conv`: Flatten → dense layer over a small (C, H, W) tensor becomes one
  conv with an H×W kernel (the same sums, one pass fewer).
- `fuse_space_to_depth`: a channel Concat of the k·k strided views x[:, a::k, b::k] of one
  tensor (YOLOv5's and YOLOX's Focus: eight Slice passes and a Concat) becomes one Rearrange.
- `fuse_residual_add`: Add(conv, other) becomes the conv with `residual` (the add happens in
  the conv's epilogue) when the conv's result is used only by that Add; after the conv's
  activation (`residual_after_activation`) when the conv already applies one (YOLO's
  bottlenecks: x + SiLU(conv)), so it runs again once activations are fused.
- `fuse_resize.fuse_upsampled_adds`: Add(x, nearest upscale of u by whole factors) (a feature
  pyramid's top-down path) reads u upscaled in its own pass; the Resize goes;
  `fuse_upsampled_convs` likewise for the Convs that alone read such an upscale.
- `fuse_activations`: an activation right after an op becomes that op's epilogue.
- `fuse_input_activations`: a ReLU/LeakyReLU read only by convs (a U-Net's down path, whose
  un-activated tensor also feeds a skip Concat) is applied by those convs as they fetch.
- `fuse_affine.fuse_swish`: x·sigmoid(x) and the written-out hardswish forms become one
  activation (after `fuse_affine.drop_identity_affine` took out multiplications by 1 and
  additions of 0); `fuse_affine.fold_affine`: a Mul/Add/Sub/Div by a per-channel constant folds
  into the conv before it (its weights), or after an activation into the host's epilogue.
- `fold_layout.fold_layout`: an NHWC model input's Transpose to NCHW (tf2onnx's first node)
  and an output's Transpose back to NHWC go; they are held (C, H, W) and transposed as they
  are uploaded and returned. A sequence's MatMul by a constant whose result is rearranged to
  channels last becomes a 1×1 conv (SVTR's attention output projections).
- `fuse_norm.fuse_layernorm`: the decomposed LayerNorm chain (ReduceMean, Sub, Pow, ...)
  becomes one LayerNormalization.
- `fuse_gate.fuse_residual_gates`: x + x·gate becomes x·(gate + 1);
  `fuse_gate.fuse_input_gates`: a squeeze-excitation Mul(x, gate (C, 1, 1)) read only by convs
  is applied by those convs as they fetch x, `fuse_gate.fuse_gated_adds` by an Add that alone
  reads it; `fuse_gate.fuse_pooled_convs`: a small global average pool read only by 1×1 convs
  is summed by those convs themselves.
`optimize` runs them all, the layout folds and the LayerNorm fusion first, then reductions and
reshapes, BatchNorm, swish and affine folds into weights, residual adds, activations, affine
epilogues, pools and gates into convs, input activations (so conv → BN → add → relu is one
pass, conv → ·a + b → hardswish → ·c + d too, and InstanceNormalization → Relu ends in one
normalise pass with the Relu fused).
"""

from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from ..ops import build_ops
from ..ops.base import ACTIVATION_DEFAULTS, EPILOGUE_HOSTS
from ..ops.batchnorm import batchnorm_affine
from ..ops.conv import INPUT_ACTIVATIONS
from ..ops.reduce import spatial_axes
from .fuse_affine import (
    dense,
    drop_identity_affine,
    fold_affine,
    fuse_swish,
    scale_conv,
    scale_dense,
)
from .fold_layout import fold_layout
from .fuse_resize import fuse_upsampled_adds, fuse_upsampled_convs
from .fuse_gate import fuse_gated_adds, fuse_input_gates, fuse_pooled_convs, fuse_residual_gates
from .fuse_norm import fuse_layernorm
from .graph import RESIDUAL_AFTER, Graph, Node

_CONVS = ("Conv", "ConvTranspose")
# Ops with a fixed number of inputs whose epilogue can add a residual input (common.glsl
# RESIDUAL): convs, and InstanceNorm as fast style's residual blocks end (IN -> Add).
_RESIDUAL_HOSTS = _CONVS + ("InstanceNormalization", "InstanceNormApply")


def fold_batchnorm(graph: Graph) -> Graph:
    """Fold each BatchNormalization that directly follows a Conv/ConvTranspose into it.

    The scaled weights are computed on two threads (numpy multiplies without the GIL; a
    U-Net's 167 MB of weights is most of its load)."""
    pairs = []
    for conv in [n for n in graph.nodes if n.op in _CONVS and not n.attrs.get("activation")
                 and not n.attrs.get("residual")]:
        bn = graph.sole_consumer(conv.name)
        if bn is not None and bn.op == "BatchNormalization" and bn.inputs[0] == conv.name:
            pairs.append((conv, bn))
    with ThreadPoolExecutor(2) as pool:
        folded = list(pool.map(lambda pair: _folded_weights(*pair), pairs))
    for (conv, bn), weights in zip(pairs, folded):
        conv.weights = weights
        graph.absorb(conv, bn)
    return graph


def _folded_weights(conv: Node, bn: Node) -> dict[str, np.ndarray]:
    """`conv`'s weights with `bn` (its sole reader) folded in."""
    return scale_conv(conv, *batchnorm_affine(bn))


def fuse_residual_add(graph: Graph) -> Graph:
    """Move Add(conv, skip) into the conv's epilogue when the Add is the conv's only user
    (likewise an InstanceNorm: `_RESIDUAL_HOSTS`): before the conv's activation if it has
    none yet (`residual` True: a later activation applies to the sum), else after it
    (`residual` RESIDUAL_AFTER, common.glsl RESIDUAL_AFTER).

    A broadcasting Add (skip of shape (C, 1, 1)) stays a pass of its own: the epilogue
    reads the residual texel by texel. So does an Add after a fused affine epilogue.
    """
    shapes = None  # built at the first candidate: optimize runs this twice
    for add in [n for n in graph.nodes if n.op == "Add" and len(n.inputs) == 2
                and not n.attrs.get("activation") and not n.attrs.get("upsample")]:
        for i, source in enumerate(add.inputs):
            conv = next((n for n in graph.nodes if n.name == source), None)
            skip = add.inputs[1 - i]
            if (conv is None or conv.op not in _RESIDUAL_HOSTS or conv.attrs.get("residual")
                    or conv.attrs.get("affine") or conv.attrs.get("output_grad")
                    or graph.sole_consumer(conv.name) is not add or skip == conv.name):
                continue
            shapes = shapes or build_ops(graph)[1]
            if shapes[skip] != shapes[conv.name]:
                continue
            # The skip tensor must exist before the conv runs.
            if graph.nodes.index(conv) < max((graph.nodes.index(n) for n in graph.nodes
                                              if n.name == skip), default=-1):
                continue
            conv.inputs = conv.inputs + [skip]
            conv.attrs = {**conv.attrs,
                          "residual": RESIDUAL_AFTER if conv.attrs.get("activation") else True}
            graph.absorb(conv, add)
            break
    return graph


def fuse_activations(graph: Graph) -> Graph:
    """Fold an activation into the op before it when that op is its only producer/user."""
    for act in [n for n in graph.nodes if n.op in ACTIVATION_DEFAULTS]:
        host = next((n for n in graph.nodes if n.name == act.inputs[0]), None)
        if (host is None or host.op not in EPILOGUE_HOSTS or host.attrs.get("activation")
                or host.attrs.get("affine")
                or graph.sole_consumer(host.name) is not act):
            continue
        params = {k: act.attrs[k] for k in ACTIVATION_DEFAULTS[act.op] if k in act.attrs}
        host.attrs = {**host.attrs, "activation": {"op": act.op, **params}}
        if act.op == "PRelu":
            host.weights = {**host.weights, "slope": act.weights["slope"]}
        graph.absorb(host, act)
    return graph


def fuse_input_activations(graph: Graph) -> Graph:
    """Fold a Relu/LeakyRelu into the convs that read it when nothing else does.

    The convs (DENSE or DEPTHWISE, reading it as their data input only) get
    attrs["input_activation"] and read the activation's input instead; the node goes. For
    an activation whose producer has other readers (so `fuse_activations` left it alone).
    """
    ops = {op.node.name: op for op in build_ops(graph)[0]}
    for act in [n for n in graph.nodes if n.op in INPUT_ACTIVATIONS]:
        users = graph.consumers(act.name)
        if (not users or act.name in graph.outputs or act.attrs.get("activation")
                or act.attrs.get("residual")):
            continue
        if not all(u.op in _CONVS and u.inputs.count(act.name) == 1 and u.inputs[0] == act.name
                   and not u.attrs.get("input_activation")
                   and ops[u.name].variant() in ("DENSE", "DEPTHWISE") for u in users):
            continue
        params = {k: act.attrs[k] for k in ACTIVATION_DEFAULTS[act.op] if k in act.attrs}
        for user in users:
            user.inputs = [act.inputs[0], *user.inputs[1:]]
            user.attrs = {**user.attrs, "input_activation": {"op": act.op, **params}}
        graph.nodes.remove(act)
    return graph


# --- multi-pass ops ---------------------------------------------------------------------------
# Both-axes reductions of at least this many positions run as a W pass then an H pass, and
# InstanceNormalization above INSTANCENORM_ONE_PASS_POSITIONS is expanded (its one-pass cost
# grows as (H·W)²). Measured on llvmpipe: see `expand_reductions`.
SPLIT_REDUCTION_POSITIONS = 1024
INSTANCENORM_ONE_PASS_POSITIONS = 16
# One-pass Softmax over channels makes 2S² fetches per pixel (S = ceil(C/4)), two passes 3S
# (over H or W: 2n² per line of n texels, two passes 6n); a pass costs about as much as this
# many fetches.
SOFTMAX_PASS_IN_FETCHES = 2000

# Op reducing both spatial axes -> (op of its W pass, op of its H pass).
_SPLITS = {"GlobalAveragePool": ("ReduceMean", "ReduceMean"),
           "ReduceMean": ("ReduceMean", "ReduceMean"),
           "GlobalMaxPool": ("ReduceMax", "ReduceMax"),
           "ReduceMax": ("ReduceMax", "ReduceMax"),
           "InstanceNormMean": ("InstanceNormMean", "ReduceMean"),
           "InstanceNormVariance": ("InstanceNormVariance", "ReduceMean")}


def _replace(graph: Graph, node: Node, new_nodes: list[Node]) -> None:
    i = graph.nodes.index(node)
    graph.nodes[i:i + 1] = new_nodes


def expand_instancenorm(graph: Graph) -> Graph:
    """Turn each InstanceNormalization over more than INSTANCENORM_ONE_PASS_POSITIONS positions
    into InstanceNormMean → InstanceNormVariance → InstanceNormApply (glcnn/ops/instancenorm.py);
    the last keeps the node's name, attributes and weights."""
    shapes = build_ops(graph)[1]
    for node in [n for n in graph.nodes if n.op == "InstanceNormalization"]:
        _, h, w = shapes[node.inputs[0]]
        if h * w <= INSTANCENORM_ONE_PASS_POSITIONS:
            continue
        x = node.inputs[0]
        mean = Node("InstanceNormMean", graph.fresh(node.name + "/mean"), [x], {"axes": [2, 3]})
        var = Node("InstanceNormVariance", graph.fresh(node.name + "/var"), [x, mean.name],
                   {"axes": [2, 3]})
        apply = Node("InstanceNormApply", node.name, [x, mean.name, var.name, *node.inputs[1:]],
                     dict(node.attrs), dict(node.weights))
        _replace(graph, node, [mean, var, apply])
    return graph


def split_reductions(graph: Graph) -> Graph:
    """Run each reduction over H and W (both > 1) of at least SPLIT_REDUCTION_POSITIONS
    positions as a W pass, (C, H, W) → (C, H, 1) by H·ceil(C/4) fragments in parallel, then
    an H pass → (C, 1, 1). The H pass keeps the node's name and other attributes."""
    shapes = build_ops(graph)[1]
    for node in [n for n in graph.nodes if n.op in _SPLITS]:
        _, h, w = shapes[node.inputs[0]]
        both = node.op.startswith("Global") or spatial_axes(node.attrs["axes"]) == (2, 3)
        if not both or h == 1 or w == 1 or h * w < SPLIT_REDUCTION_POSITIONS:
            continue
        w_op, h_op = _SPLITS[node.op]
        rows = Node(w_op, graph.fresh(node.name + "/w"), list(node.inputs), {"axes": [3]})
        attrs = {k: v for k, v in node.attrs.items() if k not in ("axes", "keepdims")}
        _replace(graph, node, [rows, Node(h_op, node.name, [rows.name], attrs | {"axes": [2]},
                                          dict(node.weights))])
    return graph


def expand_softmax(graph: Graph) -> Graph:
    """Turn each Softmax whose one pass would cost more than a second pass into
    SoftmaxStats → SoftmaxApply (glcnn/ops/softmax.py): linear in the line instead of
    quadratic. Over channels a pixel's S slices cost S(2S + 1) fetches in one pass, 4S in
    two; over H or W a line of n texels n(2n + 1), 6n (its two stats texels read it twice)."""
    ops, shapes = build_ops(graph)
    for op in [op for op in ops if op.node.op == "Softmax"]:
        node, (c, h, w) = op.node, shapes[op.node.inputs[0]]
        n, texels = op.line(), (c + 3) // 4 * h * w
        extra = h * w * n * (2 * n - 3) if op.axis == 1 else texels * (2 * n - 5)
        if extra <= SOFTMAX_PASS_IN_FETCHES:
            continue
        stats = Node("SoftmaxStats", graph.fresh(node.name + "/stats"), node.inputs[:1],
                     {"axis": op.axis})
        attrs = {k: v for k, v in node.attrs.items() if k != "axis"} | {"axis": op.axis}
        _replace(graph, node, [stats, Node("SoftmaxApply", node.name,
                                           [node.inputs[0], stats.name, *node.inputs[1:]], attrs)])
    return graph


def expand_reductions(graph: Graph) -> Graph:
    """`expand_softmax`, `expand_instancenorm`, then `split_reductions` (which also splits
    InstanceNormalization's statistics).

    Measured on llvmpipe (2 shared cores, median ms, one pass vs expanded):
    GlobalAveragePool 3×224×224 1.0 vs 0.66, 64×112×112 2.0 vs 2.0, 64×24×24 0.13 vs 0.20
    (llvmpipe is bound by total fetches once a pass has ≥ 16 fragments; a GPU is not, and
    there one fragment per slice walking a whole plane leaves it idle);
    InstanceNormalization 16×4×4 0.06 vs 0.12, 16×8×8 0.15 vs 0.10, 64×16×16 9.6 vs 0.38;
    Softmax 64×1×1 0.040 vs 0.065, 128×1×1 0.066 vs 0.063, 1000×1×1 1.04 vs 0.14,
    21843×1×1 617 vs 0.76, 21×64×64 2.9 vs 0.93.
    """
    return split_reductions(expand_instancenorm(expand_softmax(graph)))


def drop_identity_reshapes(graph: Graph) -> Graph:
    """Remove Flatten/Reshape nodes whose output has their input's shape (H = W = 1, or a
    Reshape to the input's own shape): the producer takes over the node's name when the
    reshape is its only reader; otherwise the readers are rewired to the input. A graph
    output whose source cannot take its name stays (a copy pass), as does a node carrying a
    fused epilogue."""
    shapes = build_ops(graph)[1]
    for node in [n for n in graph.nodes if n.op in ("Flatten", "Reshape")]:
        source = node.inputs[0]
        fused = node.attrs.get("activation") or node.attrs.get("residual")
        if shapes[node.name] != shapes[source] or fused:
            continue
        host = next((n for n in graph.nodes if n.name == source), None)
        if host is not None and graph.sole_consumer(source) is node:
            graph.absorb(host, node)
        elif node.name not in graph.outputs:
            graph.bypass(node)
    return graph


def fold_flatten_order(graph: Graph) -> Graph:
    """Rewrite each Transpose → Flatten → dense layer (every link its reader's only input, no
    output between) into Flatten → dense layer, the Transpose's order folded into the dense
    layer's weights (a Gemm with B (K, N): row k of the new B is the row that met x's
    element k through the Transpose)."""
    candidates = []  # (dense layer, Flatten, Transpose), each link its reader's sole input
    for node in [n for n in graph.nodes if n.op in ("Gemm", "MatMul")]:
        flat = graph.producer(node.inputs[0])
        move = graph.producer(flat.inputs[0]) if flat and flat.op in ("Flatten", "Reshape") \
            else None
        if move is not None and move.op == "Transpose" and not flat.attrs.get("activation") \
                and graph.sole_consumer(flat.name) is node and \
                graph.sole_consumer(move.name) is flat:
            candidates.append((node, flat, move))
    shapes = build_ops(graph)[1] if candidates else {}  # shapes only where a fold may happen
    for node, flat, move in candidates:
        if not dense(node, shapes):
            continue
        source = shapes[move.inputs[0]]
        perm = [int(p) - 1 for p in move.attrs["perm"][1:]]  # (C, H, W) axes
        order = np.arange(int(np.prod(source))).reshape(source).transpose(perm).reshape(-1)
        gemm = scale_dense(node, np.ones(shapes[node.name][0]), np.zeros(shapes[node.name][0]))
        b = np.empty_like(gemm.weights["B"])
        b[order] = gemm.weights["B"]  # flatten(transpose(x))[k'] = flatten(x)[order[k']]
        node.op, node.attrs, node.weights = "Gemm", {}, {**gemm.weights, "B": b}
        flat.inputs = [move.inputs[0]]
        graph.nodes.remove(move)
    return graph


# The largest dense layer (K·N weights) flatten_dense_to_conv turns into a conv: MTCNN's
# 576 × 128 and 1152 × 256; a VGG head's 25088 × 4096 stays a Gemm, whose texture layout holds
# any K.
FLATTEN_CONV_MAX_WEIGHTS = 1 << 20


def flatten_dense_to_conv(graph: Graph) -> Graph:
    """Rewrite each Flatten → dense layer (the Flatten's only reader, nothing fused) over a
    (C, H, W) tensor into a Conv with a valid H×W kernel: output n = Σ_{c,y,x} x[c, y, x] ·
    B[c·H·W + y·W + x, n] + bias, the Gemm's dot product (summed in another order). The
    Flatten's pass (a relayout of every texel) goes: MTCNN R-Net 11 → 10 passes."""
    candidates = [(n, graph.producer(n.inputs[0])) for n in graph.nodes
                  if n.op in ("Gemm", "MatMul")]
    candidates = [(n, flat) for n, flat in candidates if flat is not None
                  and flat.op in ("Flatten", "Reshape") and not flat.attrs.get("activation")
                  and graph.sole_consumer(flat.name) is n and flat.name not in graph.outputs]
    shapes = build_ops(graph)[1] if candidates else {}
    for node, flat in candidates:
        source = shapes[flat.inputs[0]]
        if not dense(node, shapes) or source[1:] == (1, 1) or \
                shapes[flat.name][0] != int(np.prod(source)):
            continue
        gemm = scale_dense(node, np.ones(shapes[node.name][0]), np.zeros(shapes[node.name][0]))
        b = gemm.weights["B"]  # (K, N)
        if b.size > FLATTEN_CONV_MAX_WEIGHTS:
            continue
        w = np.ascontiguousarray(b.T.reshape(b.shape[1], *source))
        node.op, node.inputs = "Conv", [flat.inputs[0]]
        node.attrs = {"kernel_shape": list(source[1:]), "strides": [1, 1], "pads": [0] * 4,
                      "dilations": [1, 1], "group": 1}
        node.weights = {"W": w, "B": gemm.weights["C"]}
        graph.nodes.remove(flat)
    return graph


class _View(NamedTuple):
    """A chain of Slices of `source`: its nodes, and per axis (C, H, W) the range of source
    indices it keeps."""

    source: str
    slices: list[Node]
    windows: list[range]


def _strided_view(graph: Graph, ops: dict, tensor: str) -> _View | None:
    """The view `tensor` is when it is a chain of Slices, each read only by the next."""
    chain, windows = [], None
    node = graph.producer(tensor)
    while node is not None and node.op == "Slice" and graph.sole_consumer(node.name) and \
            not node.attrs.get("activation"):
        inner = [ops[node.name].window[axis] for axis in (1, 2, 3)]
        windows = inner if windows is None else [  # the earlier slice's indices of those
            r[slice(w.start, w.stop, w.step)] for r, w in zip(inner, windows)]
        chain.append(node)
        node = graph.producer(node.inputs[0])
    return _View(chain[-1].inputs[0], chain, windows) if chain else None


def fuse_space_to_depth(graph: Graph) -> Graph:
    """Rewrite each Concat along C of k·k parts x[:, a::k, b::k] of one (C, H, W) tensor x,
    H and W multiples of k, (a, b) in row-major or column-major order, each a chain of Slices
    read by the Concat alone, into one Rearrange (the view (k, k, C, H/k, W/k) of x), in place.
    YOLOX's Focus at 416²: nine passes, one."""
    concats = [n for n in graph.nodes if n.op == "Concat" and all(
        getattr(graph.producer(t), "op", None) == "Slice" for t in n.inputs)]
    if not concats:
        return graph  # the op checks below cost a build_ops (~15 ms on a 120-layer model)
    built, shapes = build_ops(graph)
    ops = {node.name: op for node, op in zip(graph.nodes, built)}
    for concat in concats:
        views = [_strided_view(graph, ops, t) for t in concat.inputs]
        if int(concat.attrs.get("axis", 1)) % 4 != 1 or concat.attrs.get("activation") or \
                None in views or len({v.source for v in views}) != 1:
            continue
        source = views[0].source
        c, h, w = shapes[source]
        k = views[0].windows[1].step
        offsets = [(v.windows[1].start, v.windows[2].start) for v in views]
        whole = all(v.windows == [range(c), range(a, h, k), range(b, w, k)]
                    for v, (a, b) in zip(views, offsets))
        grid = [(i // k, i % k) for i in range(k * k)]
        if k < 2 or h % k or w % k or not whole or offsets not in (grid, [g[::-1] for g in grid]):
            continue
        strides = [w, 1] if offsets == grid else [1, w]  # the first dim walks a, or b
        concat.op, concat.inputs = "Rearrange", [source]
        concat.attrs = {"shape": [k * k * c, h // k, w // k], "dims": [k, k, c, h // k, w // k],
                        "strides": [*strides, h * w, k * w, k], "offset": 0}
        for view in views:
            for node in view.slices:
                graph.nodes.remove(node)
    return graph


def optimize(graph: Graph) -> Graph:
    """Run every pass in place and return `graph` (first
    `fold_layout.fold_layout`)."""
    graph = fuse_space_to_depth(fold_layout(graph))
    graph = drop_identity_reshapes(expand_reductions(fuse_layernorm(graph)))
    graph = fuse_swish(drop_identity_affine(fold_batchnorm(graph)))
    graph = fold_flatten_order(fold_affine(graph, into="weights"))
    graph = flatten_dense_to_conv(graph)
    graph = fuse_residual_add(fuse_activations(fuse_upsampled_adds(fuse_residual_add(graph))))
    graph = fuse_upsampled_convs(graph)
    graph = fold_affine(fuse_residual_gates(graph), into="epilogue")
    graph = fuse_gated_adds(fuse_input_gates(fuse_pooled_convs(graph)))
    return fuse_input_activations(graph)
