"""Graph rewrites that remove passes without changing results (GL-free).

- `fold_batchnorm`: Conv/ConvTranspose → BatchNormalization becomes one conv with scaled
  weights and a new bias.
- `fuse_residual_add`: Add(conv, other) becomes the conv with `residual` (the add happens in
  the conv's epilogue) when the conv's result is used only by that Add.
- `fuse_activations`: an activation right after an op becomes that op's epilogue.
`optimize` runs all three in that order (so conv → BN → add → relu is one pass).
"""

import numpy as np

from .graph import Graph, Node
from .ops.base import ACTIVATION_DEFAULTS
from .ops.batchnorm import batchnorm_affine

_CONVS = ("Conv", "ConvTranspose")
_EPILOGUE_HOSTS = _CONVS + ("BatchNormalization", "Add", "Mul")


def _sole_consumer(graph: Graph, name: str) -> Node | None:
    """The one node reading tensor `name`, if exactly one does and it is not an output."""
    users = graph.consumers(name)
    if len(users) != 1 or name in graph.outputs or users[0].inputs.count(name) != 1:
        return None
    return users[0]


def _absorb(graph: Graph, host: Node, absorbed: Node) -> None:
    """Remove `absorbed` (whose only input from `host` is host's sole use); `host` takes its
    name, so every reader of the absorbed tensor, and the graph outputs, stay valid."""
    graph.nodes.remove(absorbed)
    host.name = absorbed.name


def fold_batchnorm(graph: Graph) -> Graph:
    """Fold each BatchNormalization that directly follows a Conv/ConvTranspose into it."""
    for conv in [n for n in graph.nodes if n.op in _CONVS and not n.attrs.get("activation")
                 and not n.attrs.get("residual")]:
        bn = _sole_consumer(graph, conv.name)
        if bn is None or bn.op != "BatchNormalization" or bn.inputs[0] != conv.name:
            continue
        a, b = batchnorm_affine(bn)
        W = np.asarray(conv.weights["W"], np.float64)
        bias = np.asarray(conv.weights.get("B", np.zeros(len(a))), np.float64)
        if conv.op == "Conv":
            W = W * a[:, None, None, None]
        else:  # (Ci, Co/group, kh, kw): output channel g·Cog + j is axis 1 within group g
            group = int(conv.attrs.get("group", 1))
            W = (W.reshape(group, -1, *W.shape[1:]) *
                 a.reshape(group, 1, -1, 1, 1)).reshape(W.shape)
        conv.weights = {**conv.weights, "W": W.astype(np.float32),
                        "B": (bias * a + b).astype(np.float32)}
        _absorb(graph, conv, bn)
    return graph


def fuse_residual_add(graph: Graph) -> Graph:
    """Move Add(conv, skip) into the conv's epilogue when the Add is the conv's only user."""
    for add in [n for n in graph.nodes if n.op == "Add" and len(n.inputs) == 2
                and not n.attrs.get("activation")]:
        for i, source in enumerate(add.inputs):
            conv = next((n for n in graph.nodes if n.name == source), None)
            skip = add.inputs[1 - i]
            if (conv is None or conv.op not in _CONVS or conv.attrs.get("residual")
                    or conv.attrs.get("activation") or _sole_consumer(graph, conv.name) is not add
                    or skip == conv.name):
                continue
            # The skip tensor must exist before the conv runs.
            if graph.nodes.index(conv) < max((graph.nodes.index(n) for n in graph.nodes
                                              if n.name == skip), default=-1):
                continue
            conv.inputs = conv.inputs + [skip]
            conv.attrs = {**conv.attrs, "residual": True}
            _absorb(graph, conv, add)
            break
    return graph


def fuse_activations(graph: Graph) -> Graph:
    """Fold an activation into the op before it when that op is its only producer/user."""
    for act in [n for n in graph.nodes if n.op in ACTIVATION_DEFAULTS]:
        host = next((n for n in graph.nodes if n.name == act.inputs[0]), None)
        if (host is None or host.op not in _EPILOGUE_HOSTS or host.attrs.get("activation")
                or _sole_consumer(graph, host.name) is not act):
            continue
        params = {k: act.attrs[k] for k in ACTIVATION_DEFAULTS[act.op] if k in act.attrs}
        host.attrs = {**host.attrs, "activation": {"op": act.op, **params}}
        if act.op == "PRelu":
            host.weights = {**host.weights, "slope": act.weights["slope"]}
        _absorb(graph, host, act)
    return graph


def optimize(graph: Graph) -> Graph:
    """Run every pass in place and return `graph`."""
    return fuse_activations(fuse_residual_add(fold_batchnorm(graph)))
