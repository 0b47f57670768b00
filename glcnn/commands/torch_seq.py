"""Torch builders of glcnn.commands.torch_runner for the elementwise, reduction, softmax,
MatMul and LayerNormalization ops (the ops of sequence heads and attention), in the runner's
form: f(node, shapes) -> closure(values) -> tensor, tensors (1, C, H, W). The runner merges
`BUILDERS` into its own table.
"""

import numpy as np
import torch
import torch.nn.functional as F

from ..registry import enter

BUILDERS = {}


def builds(*op_types):
    """Function decorator: make `fn` the builder of each op type in `op_types` (see
    torch_runner.builds)."""
    def wrap(fn):
        enter(BUILDERS, dict.fromkeys(op_types, fn), "the torch runner's sequence BUILDERS")
        return fn
    return wrap


def _tensor(array) -> torch.Tensor:
    return torch.from_numpy(np.array(array, np.float32))


# --- elementwise ------------------------------------------------------------------------------
def _divide(a, b):
    """glcnn's Div (glcnn/ops/binary.py): zero divisors give ±Inf by the sign of a, 0/0 = 0."""
    tiny = 2.0 ** -126
    zero_b, zero_a = b.abs() < tiny, a.abs() < tiny
    q = a / torch.where(zero_b, torch.ones_like(b), b)
    inf = torch.where(a < 0, -torch.inf, torch.inf).to(q.dtype)
    return torch.where(zero_b, torch.where(zero_a, torch.zeros_like(q), inf), q)


_BINARY = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": _divide,
           "Max": torch.maximum, "Min": torch.minimum}


@builds(*_BINARY)
def _binary(node, shapes):
    op, x = _BINARY[node.op], node.inputs[0]
    fn = (lambda a, b: op(b, a)) if int(node.attrs.get("swap", 0)) else op
    if len(node.inputs) - bool(node.attrs.get("residual")) == 2:
        other = node.inputs[1]
        return lambda v: fn(v[x], v[other])  # torch broadcasts (1, C, H, W) as glcnn does
    b = _tensor(node.weights["B"])  # glcnn-shaped (C, H, W), per channel, or a scalar
    b = b[None] if b.dim() == 3 else b.reshape(1, -1, 1, 1) if b.numel() > 1 else b.reshape(())
    return lambda v: fn(v[x], b)


# --- reductions, softmax ----------------------------------------------------------------------
_REDUCTIONS = {"GlobalAveragePool": "mean", "ReduceMean": "mean", "GlobalMaxPool": "amax",
               "ReduceMax": "amax", "ReduceSum": "sum"}


@builds(*_REDUCTIONS)
def _reduce(node, shapes):
    axes = (2, 3) if node.op.startswith("Global") else \
        tuple(sorted({int(a) % 4 for a in node.attrs.get("axes", (0, 1, 2, 3))}))
    x, method = node.inputs[0], _REDUCTIONS[node.op]  # keepdims=0 over H, W: glcnn's (C, 1, 1)
    return lambda v: getattr(v[x], method)(axes, keepdim=True)


def _softmax_dim(node, shape) -> int:
    """The torch dim (1, 2 or 3 of NCHW) of a Softmax node: -1 on a vector is its channels."""
    axis = int(node.attrs.get("axis", -1 if node.op == "Softmax" else 1))
    return 1 if axis == -1 and tuple(shape[1:]) == (1, 1) else axis % 4


@builds("Softmax")
def _softmax(node, shapes):
    x = node.inputs[0]
    dim = _softmax_dim(node, shapes[x])
    return lambda v: torch.softmax(v[x], dim)


@builds("SoftmaxStats")
def _softmax_stats(node, shapes):
    x = node.inputs[0]
    dim = _softmax_dim(node, shapes[x])

    def stats(v):
        m = v[x].amax(dim, keepdim=True)
        return torch.cat([m, torch.exp(v[x] - m).sum(dim, keepdim=True)], dim)
    return stats


@builds("SoftmaxApply")
def _softmax_apply(node, shapes):
    x, stats = node.inputs[:2]
    dim = _softmax_dim(node, shapes[x])
    return lambda v: (torch.exp(v[x] - v[stats].narrow(dim, 0, 1))
                      / v[stats].narrow(dim, 1, 1))


# --- MatMul, LayerNormalization ---------------------------------------------------------------
def _placed(t, axes):
    """(1, C, H, W) tensor as (batch, rows, columns) by glcnn `axes` [batch, row, column]."""
    return t[0].permute(*[int(a) for a in axes])


@builds("MatMul")
def _matmul(node, shapes):
    a, x = node.attrs, node.inputs[0]
    tensors = len(node.inputs) - bool(a.get("residual"))
    if tensors == 1 and not {"a_axes", "b_axes", "out_axes"} & set(a) and \
            tuple(shapes[x][1:]) == (1, 1):  # glcnn's dense layer on a vector
        W = _tensor(np.asarray(node.weights["B"]).T)
        return lambda v: F.linear(v[x].reshape(1, -1), W).reshape(1, -1, 1, 1)
    a_axes, b_axes, out_axes = (a.get(k, (0, 1, 2)) for k in ("a_axes", "b_axes", "out_axes"))
    back = [int(i) for i in np.argsort([int(i) for i in out_axes])]
    if tensors == 2:
        y = node.inputs[1]
        return lambda v: torch.matmul(_placed(v[x], a_axes), _placed(v[y], b_axes)) \
            .permute(*back)[None]
    B = _tensor(node.weights["B"])
    return lambda v: torch.matmul(_placed(v[x], a_axes), B).permute(*back)[None]


@builds("LayerNormalization")
def _layer_norm(node, shapes):
    a, w, x = node.attrs, node.weights, node.inputs[0]
    dim, eps = int(a.get("axis", -1)) % 4, float(a.get("epsilon", 1e-5))
    view = [1, 1, 1, 1]
    view[dim] = -1
    scale = _tensor(w["scale"]).reshape(view)
    bias = _tensor(w["bias"]).reshape(view) if "bias" in w else torch.zeros(())

    def norm(v):
        mean = v[x].mean(dim, keepdim=True)
        var = ((v[x] - mean) ** 2).mean(dim, keepdim=True)
        return (v[x] - mean) / torch.sqrt((var + eps).clamp(min=2.0 ** -126)) * scale + bias
    return norm
