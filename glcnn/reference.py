"""A numpy float64 implementation of every op, for tests and `glcnn diff`.

Written to be obviously right, not fast: convolutions are explicit loops over kernel taps
with float64 accumulation. Every function takes (C, H, W) arrays (batch 1) and the
node's attributes and weights exactly as they appear in a `Graph`.
"""

import numpy as np

from .errors import UnsupportedOpError

F = np.float64


def conv(x, W, B=None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1):
    """ONNX Conv: y[o] = B[o] + sum_{c in group(o), ky, kx} x_pad[c, oy*s + ky*d, ...] W[o, c, ky, kx].

    pads = (top, left, bottom, right); W is (Co, Ci/group, kh, kw).
    """
    x, W = np.asarray(x, F), np.asarray(W, F)
    ci, h, w = x.shape
    co, cg, kh, kw = W.shape
    (sy, sx), (dy, dx), (pt, pl, pb, pr) = strides, dilations, pads
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dy * (kh - 1) - 1) // sy + 1
    ow = (w + pl + pr - dx * (kw - 1) - 1) // sx + 1
    cog = co // group
    y = np.zeros((co, oh, ow), F)
    for g in range(group):
        xg = xp[g * cg:(g + 1) * cg]
        Wg = W[g * cog:(g + 1) * cog]
        for ky in range(kh):
            for kx in range(kw):
                window = xg[:, ky * dy: ky * dy + sy * (oh - 1) + 1: sy,
                            kx * dx: kx * dx + sx * (ow - 1) + 1: sx]
                y[g * cog:(g + 1) * cog] += np.einsum("oc,chw->ohw", Wg[:, :, ky, kx], window)
    if B is not None:
        y += np.asarray(B, F)[:, None, None]
    return y


def conv_transpose(x, W, B=None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1),
                   group=1, output_padding=(0, 0)):
    """ONNX/PyTorch ConvTranspose: scatter x[c, iy, ix] W[c, o, ky, kx] to (iy*s + ky*d - pad).

    W is (Ci, Co/group, kh, kw). Output size per axis:
    (in - 1)*s - pad_begin - pad_end + d*(k - 1) + output_padding + 1.
    """
    x, W = np.asarray(x, F), np.asarray(W, F)
    ci, h, w = x.shape
    _, cog, kh, kw = W.shape
    (sy, sx), (dy, dx), (pt, pl, pb, pr) = strides, dilations, pads
    oy_pad, ox_pad = output_padding
    full_h = (h - 1) * sy + dy * (kh - 1) + 1 + oy_pad
    full_w = (w - 1) * sx + dx * (kw - 1) + 1 + ox_pad
    full = np.zeros((cog * group, full_h + max(0, -pt) + pb, full_w + max(0, -pl) + pr), F)
    cg = ci // group
    for g in range(group):
        xg, Wg = x[g * cg:(g + 1) * cg], W[g * cg:(g + 1) * cg]
        for ky in range(kh):
            for kx in range(kw):
                contrib = np.einsum("co,chw->ohw", Wg[:, :, ky, kx], xg)
                full[g * cog:(g + 1) * cog,
                     ky * dy: ky * dy + sy * (h - 1) + 1: sy,
                     kx * dx: kx * dx + sx * (w - 1) + 1: sx] += contrib
    oh = full_h - pt - pb
    ow = full_w - pl - pr
    y = full[:, pt:pt + oh, pl:pl + ow]
    if B is not None:
        y = y + np.asarray(B, F)[:, None, None]
    return y


def batchnorm(x, scale, B, mean, var, epsilon=1e-5):
    """ONNX BatchNormalization (inference): (x - mean) / sqrt(var + eps) * scale + B."""
    c = lambda v: np.asarray(v, F)[:, None, None]  # noqa: E731
    return (np.asarray(x, F) - c(mean)) / np.sqrt(c(var) + epsilon) * c(scale) + c(B)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def activation(op, x, attrs, weights):
    """The pointwise activations, by ONNX op type (plus "Silu": x * sigmoid(x))."""
    x = np.asarray(x, F)
    if op == "Relu":
        return np.maximum(x, 0)
    if op == "LeakyRelu":
        return np.where(x >= 0, x, attrs.get("alpha", 0.01) * x)
    if op == "PRelu":
        slope = np.asarray(weights["slope"], F).reshape(-1)
        slope = np.broadcast_to(slope, (x.shape[0],))[:, None, None]
        return np.where(x >= 0, x, slope * x)
    if op == "Clip":
        return np.clip(x, attrs.get("min", -np.inf), attrs.get("max", np.inf))
    if op == "Sigmoid":
        return _sigmoid(x)
    if op == "Tanh":
        return np.tanh(x)
    if op == "Elu":
        return np.where(x > 0, x, attrs.get("alpha", 1.0) * np.expm1(x))
    if op == "HardSigmoid":
        return np.clip(attrs.get("alpha", 0.2) * x + attrs.get("beta", 0.5), 0, 1)
    if op == "HardSwish":
        return x * np.clip(x / 6 + 0.5, 0, 1)
    if op == "Silu":
        return x * _sigmoid(x)
    raise UnsupportedOpError(f"reference has no activation {op!r}")


ACTIVATIONS = ("Relu", "LeakyRelu", "PRelu", "Clip", "Sigmoid", "Tanh", "Elu",
               "HardSigmoid", "HardSwish", "Silu")


def slice_hw(x, starts, ends, axes):
    """ONNX Slice with step 1; axes count NCHW dims (2 = H, 3 = W, negatives allowed)."""
    index = [slice(None)] * 4
    for start, end, axis in zip(starts, ends, axes):
        index[axis] = slice(start, end)
    return x[None][tuple(index)][0]


def _operand(node, values):
    """Second operand of Add/Mul: a tensor input, or a constant weight broadcast per channel."""
    if len(node.inputs) >= 2 and not node.attrs.get("residual"):
        return values[node.inputs[1]]
    b = np.asarray(node.weights["B"], F)
    return b.reshape(-1, 1, 1) if b.size > 1 else b.reshape(())


def _conv_args(attrs):
    return {k: tuple(attrs[k]) for k in ("strides", "pads", "dilations") if k in attrs} | (
        {"group": attrs["group"]} if "group" in attrs else {})


# ONNX op type -> f(node, values) giving the op's own result (before any fused epilogue).
# Adding an op to the reference means adding one decorated function below.
EVALUATORS = {}


def evaluates(*op_types):
    def wrap(fn):
        for op_type in op_types:
            EVALUATORS[op_type] = fn
        return fn
    return wrap


@evaluates("Conv")
def _conv_node(node, values):
    w = node.weights
    return conv(values[node.inputs[0]], w["W"], w.get("B"), **_conv_args(node.attrs))


@evaluates("ConvTranspose")
def _conv_transpose_node(node, values):
    w, a = node.weights, node.attrs
    return conv_transpose(values[node.inputs[0]], w["W"], w.get("B"), **_conv_args(a),
                          output_padding=tuple(a.get("output_padding", (0, 0))))


@evaluates("BatchNormalization")
def _batchnorm_node(node, values):
    w = node.weights
    return batchnorm(values[node.inputs[0]], w["scale"], w["B"], w["mean"], w["var"],
                     node.attrs.get("epsilon", 1e-5))


@evaluates(*ACTIVATIONS)
def _activation_node(node, values):
    return activation(node.op, values[node.inputs[0]], node.attrs, node.weights)


@evaluates("Add")
def _add_node(node, values):
    return values[node.inputs[0]] + _operand(node, values)


@evaluates("Mul")
def _mul_node(node, values):
    return values[node.inputs[0]] * _operand(node, values)


@evaluates("Slice")
def _slice_node(node, values):
    a = node.attrs
    return slice_hw(values[node.inputs[0]], a["starts"], a["ends"], a.get("axes", (2, 3)))


def evaluate(node, values):
    """Compute one node from the already computed `values` (name -> float64 array)."""
    fn = EVALUATORS.get(node.op)
    if fn is None:
        raise UnsupportedOpError(f"reference has no op {node.op!r} (layer {node.name!r})")
    return _epilogue(node, fn(node, values), values)


def _epilogue(node, y, values):
    """Fused parts of a node (see glcnn.passes): residual add, then activation."""
    if node.attrs.get("residual"):
        y = y + values[node.inputs[-1]]
    act = node.attrs.get("activation")
    if act:
        y = activation(act["op"], y, act, {"slope": node.weights.get("slope")})
    return y


def run(graph, inputs: dict) -> dict:
    """Evaluate every node of `graph`; returns name -> float64 array for all tensors."""
    values = {name: np.asarray(inputs[name], F) for name in graph.inputs}
    for node in graph.nodes:
        values[node.name] = evaluate(node, values)
    return values
