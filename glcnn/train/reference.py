"""The float64 numpy reference of the backward ops (glcnn/train/grad_ops.py), registered with
`glcnn.graph.reference.evaluates` so `reference.run` evaluates a backward graph as any other.

Each weight gradient is computed in the PyTorch layout, then laid out as the op's output: the
forward op's filter layout (pack_filters) seen as a (4, H, W) tensor.
"""

import numpy as np

from ..graph.graph import Node
from ..graph.reference import F, evaluates
from ..graph.reference_ops import activation_grad
from ..layout import pack_channels, pack_filters, pack_matrix
from .grad_ops import forward_conv, forward_op


def conv_grad_weight(x, dz, w_shape, forward="Conv", strides=(1, 1), pads=(0, 0, 0, 0),
                     dilations=(1, 1), group=1) -> np.ndarray:
    """dL/dW of a Conv (W: (Co, Ci/group, kh, kw)) or ConvTranspose (W: (Ci, Co/group, kh,
    kw)) with input `x` and output gradient `dz`, float64 in W's shape."""
    x, dz = np.asarray(x, F), np.asarray(dz, F)
    a, b, kh, kw = w_shape
    (sy, sx), (dy, dx), (pt, pl, pb, pr) = strides, dilations, pads
    # Conv: windows of the padded input against dz; ConvTranspose: of the padded dz against x.
    outer, inner = (x, dz) if forward == "ConvTranspose" else (dz, x)
    padded = np.pad(inner, ((0, 0), (pt, pb), (pl, pr)))
    h, w = outer.shape[1:]
    dw = np.zeros(w_shape, F)
    per_in, per_out = (a // group, b) if forward == "ConvTranspose" else (b, a // group)
    for g in range(group):
        xs = slice(g * per_in, (g + 1) * per_in)
        os = slice(g * per_out, (g + 1) * per_out)
        for ky in range(kh):
            for kx in range(kw):
                win = padded[:, ky * dy: ky * dy + sy * (h - 1) + 1: sy,
                             kx * dx: kx * dx + sx * (w - 1) + 1: sx]
                win = win[:, :h, :w]
                if forward == "ConvTranspose":  # dW[ci, j] = Σ x[ci] dz_window[g·Cog + j]
                    dw[xs, :, ky, kx] = np.einsum("chw,jhw->cj", outer[xs], win[os])
                else:  # dW[o, c] = Σ dz[o] x_window[g·Cg + c]
                    dw[os, :, ky, kx] = np.einsum("ohw,chw->oc", outer[os], win[xs])
    return dw


def loss_terms(loss: str, y, t) -> np.ndarray:
    y, t = np.asarray(y, F), np.asarray(t, F)
    if loss == "mse":
        return (y - t) ** 2
    if loss == "l1":
        return np.abs(y - t)
    with np.errstate(divide="ignore"):
        return -(t * np.maximum(np.log(y), -100) + (1 - t) * np.maximum(np.log(1 - y), -100))


def loss_grad(loss: str, y, t) -> np.ndarray:
    y, t = np.asarray(y, F), np.asarray(t, F)
    if loss == "mse":
        return 2 * (y - t)
    if loss == "l1":
        return np.sign(y - t)
    return (y - t) / np.maximum((1 - y) * y, 1e-12)


def _as_tensor(layout: np.ndarray) -> np.ndarray:
    """A (H, W, 4) layout as the (4, H, W) tensor whose atlas it is."""
    return np.ascontiguousarray(np.asarray(layout, F).transpose(2, 0, 1))


@evaluates("ConvGradWeight")
def _conv_grad_weight_node(node, values):
    x, dz = (values[t] for t in node.inputs)
    fwd = forward_conv(node, x.shape)
    keys = {k: tuple(node.attrs[k]) if k != "group" else node.attrs[k]
            for k in ("strides", "pads", "dilations", "group") if k in node.attrs}
    dw = conv_grad_weight(x, dz, fwd.W.shape, node.attrs["forward"], **keys)
    view = Node(fwd.op_type, node.name, ["x"], dict(fwd.node.attrs), {"W": dw})
    fwd_op = type(fwd)(view, [x.shape])  # its conv_weights() view of dW, as the layout holds
    return _as_tensor(pack_filters(fwd_op.conv_weights(), fwd_op._columns()))


@evaluates("ConvGradBias")
def _conv_grad_bias_node(node, values):
    return _as_tensor(pack_channels(values[node.inputs[0]].sum(axis=(1, 2))))


@evaluates("ActivationGrad")
def _activation_grad_node(node, values):
    act = node.attrs["act"]
    alpha = act.get("alpha", {"LeakyRelu": 0.01, "Elu": 1.0}.get(act["op"]))
    return activation_grad(act["op"], values[node.inputs[0]], values[node.inputs[1]], alpha)


def _scale(node, y) -> float:
    return 1.0 / (int(node.attrs.get("samples", 1)) * y.size)


@evaluates("LossGrad")
def _loss_grad_node(node, values):
    y, t = (values[n] for n in node.inputs)
    return loss_grad(node.attrs["loss"], y, t) * _scale(node, y)


@evaluates("LossSum")
def _loss_sum_node(node, values):
    y, t = (values[n] for n in node.inputs)
    out = np.zeros((4, 1, 1), F)
    out[0] = loss_terms(node.attrs["loss"], y, t).sum() * _scale(node, y)
    return out



def pool_grad(dy, x, op) -> np.ndarray:
    """dL/dx of MaxPool / AveragePool `op` (glcnn/ops/pool.py) at input `x`, float64: each
    output's gradient to its window's first maximum (PyTorch's ties), or spread over its taps
    divided by the forward's divisor."""
    dy, x = np.asarray(dy, F), np.asarray(x, F)
    dx = np.zeros_like(x)
    (kh, kw), (sy, sx), (dly, dlx) = op.kernel, op.strides, op.dilations
    pt, pl, pb, pr = op.pads
    _, h, w = x.shape
    include = int(op.node.attrs.get("count_include_pad", 0))
    for oy in range(dy.shape[1]):
        for ox in range(dy.shape[2]):
            taps = [(oy * sy - pt + ky * dly, ox * sx - pl + kx * dlx)
                    for ky in range(kh) for kx in range(kw)]
            inside = [(y, x_) for y, x_ in taps if 0 <= y < h and 0 <= x_ < w]
            if op.reduction == "MAX":
                for c in range(x.shape[0]):
                    values = [x[c, y, x_] for y, x_ in inside]
                    y, x_ = inside[int(np.argmax(values))]  # argmax: the first maximum
                    dx[c, y, x_] += dy[c, oy, ox]
                continue
            box = (-pt, -pl, h + pb, w + pr) if include else (0, 0, h, w)
            count = sum(box[0] <= y < box[2] and box[1] <= x_ < box[3] for y, x_ in taps)
            for y, x_ in inside:
                dx[:, y, x_] += dy[:, oy, ox] / count
    return dx


def resize_matrix(op, axis: int) -> np.ndarray:
    """(out, in) interpolation matrix of Resize `op` along H (axis 0) or W (1), float64."""
    coords = op.textures()["u_coords"][1 - axis]
    n_out, n_in = op.size[axis], op.in_shapes[0][1 + axis]
    a = np.zeros((n_out, n_in), F)
    for o in range(n_out):
        i0, i1, t = int(coords[o, 0]), int(coords[o, 1]), float(coords[o, 2])
        if op.mode == "nearest":
            a[o, i0] += 1.0
        else:
            a[o, i0] += 1.0 - t
            a[o, i1] += t
    return a


def gemm_matrix(node) -> np.ndarray:
    """The (N, K) matrix W of a Gemm node (its B, transposed unless transB)."""
    b = np.asarray(node.weights["B"], F)
    return b if int(node.attrs.get("transB", 0)) else b.T


@evaluates("PoolGrad")
def _pool_grad_node(node, values):
    dy, x = (values[t] for t in node.inputs)
    return pool_grad(dy, x, forward_op(node, x.shape))


@evaluates("ResizeGrad")
def _resize_grad_node(node, values):
    dy, x = (values[t] for t in node.inputs)
    op = forward_op(node, x.shape)
    ay, ax = resize_matrix(op, 0), resize_matrix(op, 1)
    return np.einsum("oi,coq,qj->cij", ay, np.asarray(dy, F), ax)


@evaluates("GemmGradWeight")
def _gemm_grad_weight_node(node, values):
    x, dy = (np.asarray(values[t], F).reshape(-1) for t in node.inputs)
    return _as_tensor(pack_matrix(np.outer(dy, x)))


@evaluates("GemmGradInput")
def _gemm_grad_input_node(node, values):
    """dx = Wᵀ dY with W from the node's weights (the GPU reads the live layout instead)."""
    dy = np.asarray(values[node.inputs[0]], F).reshape(-1)
    return (gemm_matrix(node).T @ dy)[:, None, None]
