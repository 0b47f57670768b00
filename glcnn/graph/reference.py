"""The float64 numpy reference every op is tested against, and `glcnn diff`'s: `run(graph,
inputs)` evaluates a `Graph` node by node.

`EVALUATORS` maps each ONNX op type to a function of (node, values) that reads the node's
attributes and weights and calls the op's numpy function (glcnn/graph/reference_ops.py, all
importable from here too); `evaluate` then applies the epilogue the graph passes may have
fused into the node (input activation, mean and gate, residual add, activation).
"""

import dataclasses

import numpy as np

from ..errors import UnsupportedOpError, quote
from ..ops.base import GRAD_ACTIVATIONS
from ..ops.binary import other_index
from ..ops.resize import unfused_resize
from ..registry import enter
from .reference_ops import (
    ACTIVATIONS,
    F,
    activation,
    activation_grad,
    batchnorm,
    concat,
    conv,
    conv_transpose,
    depth_to_space,
    divide,
    erf,
    gemm,
    instance_norm,
    pad,
    pool,
    pool_pads,
    power,
    rearrange,
    reduce_hw,
    reshape,
    resize,
    slice_hw,
    softmax_channels,
    sqrt,
    transpose,
)
from .reference_seq import layer_norm, matmul

__all__ = [
    "ACTIVATIONS", "EVALUATORS", "F", "activation", "batchnorm", "concat", "conv",
    "conv_transpose", "depth_to_space", "divide", "erf", "evaluate", "evaluates", "gemm",
    "instance_norm", "layer_norm", "matmul", "pad", "pool", "pool_pads", "power", "rearrange",
    "reduce_hw", "reshape",
    "resize", "run", "slice_hw", "softmax_channels", "sqrt", "transpose",
]

# ONNX op type -> f(node, values) giving the op's own result (before any fused epilogue).
# Adding an op to the reference means adding one decorated function below.
EVALUATORS = {}


def evaluates(*op_types):
    """Function decorator: make `fn` the evaluator of each ONNX op type in `op_types`.

    Raises:
        GlcnnError: an op type is given an evaluator twice.
    """
    def wrap(fn):
        enter(EVALUATORS, dict.fromkeys(op_types, fn), "the reference EVALUATORS")
        return fn
    return wrap


def _operand(node, values):
    """Second operand of Add/Sub/Mul/Div/Max/Min: a tensor input, or a constant weight: per channel,
    or a glcnn-shaped (C, H, W) array (numpy broadcasting either way)."""
    k = other_index(node)  # after a fused input gate (applied by `evaluate`), 2
    if len(node.inputs) >= 2 and node.attrs.get("upsample"):  # glcnn.graph.fuse_resize
        resize = unfused_resize(node.attrs["upsample"], "upsample", node.inputs[k])
        return EVALUATORS[resize.op](resize, values)
    if len(node.inputs) >= 2 and not node.attrs.get("residual"):
        return values[node.inputs[k]]
    b = np.asarray(node.weights["B"], F)
    if b.ndim == 3:
        return b
    return b.reshape(-1, 1, 1) if b.size > 1 else b.reshape(())


def _operands(node, values):
    """(a, b) of a binary op in the order it computes them: `swap` exchanges them."""
    a, b = values[node.inputs[0]], _operand(node, values)
    return (b, a) if int(node.attrs.get("swap", 0)) else (a, b)


def _conv_args(attrs):
    return {k: tuple(attrs[k]) for k in ("strides", "pads", "dilations") if k in attrs} | (
        {"group": attrs["group"]} if "group" in attrs else {})


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
    a, b = _operands(node, values)
    return a + b


@evaluates("Mul")
def _mul_node(node, values):
    a, b = _operands(node, values)
    return a * b


@evaluates("Sub")
def _sub_node(node, values):
    a, b = _operands(node, values)
    return a - b


@evaluates("Div")
def _div_node(node, values):
    return divide(*_operands(node, values))


@evaluates("Max")
def _max_node(node, values):
    return np.maximum(*_operands(node, values))


@evaluates("Min")
def _min_node(node, values):
    return np.minimum(*_operands(node, values))


@evaluates("Sqrt")
def _sqrt_node(node, values):
    return sqrt(values[node.inputs[0]])


@evaluates("Erf")
def _erf_node(node, values):
    return erf(values[node.inputs[0]])


@evaluates("Pow")
def _pow_node(node, values):
    return power(values[node.inputs[0]], node.attrs["exponent"])


@evaluates("Slice")
def _slice_node(node, values):
    a = node.attrs
    return slice_hw(values[node.inputs[0]], a["starts"], a["ends"], a.get("axes", (2, 3)),
                    a.get("steps"))


@evaluates("Transpose")
def _transpose_node(node, values):
    return transpose(values[node.inputs[0]], node.attrs["perm"])


@evaluates("Rearrange")
def _rearrange_node(node, values):
    a = node.attrs
    return rearrange(values[node.inputs[0]], a["shape"], a["dims"], a["strides"],
                     a.get("offset", 0), a.get("dims2"), a.get("strides2"))


@evaluates("GlobalAveragePool", "GlobalMaxPool", "ReduceMean", "ReduceMax", "ReduceSum")
def _reduce_node(node, values):
    op = {"GlobalMaxPool": "max", "ReduceMax": "max", "ReduceSum": "sum"}.get(node.op, "mean")
    return reduce_hw(values[node.inputs[0]], op, node.attrs.get("axes", (2, 3)))


@evaluates("InstanceNormalization")
def _instance_norm_node(node, values):
    w = node.weights
    return instance_norm(values[node.inputs[0]], w["scale"], w["B"],
                         node.attrs.get("epsilon", 1e-5))


# The passes InstanceNormalization expands into (glcnn.graph.passes.expand_reductions), whose
# statistics are of d = x − x[c, 0, 0].
@evaluates("InstanceNormMean")
def _instance_norm_mean_node(node, values):
    x = values[node.inputs[0]]
    return reduce_hw(x - x[:, :1, :1], "mean", node.attrs["axes"])


@evaluates("InstanceNormVariance")
def _instance_norm_variance_node(node, values):
    x, mean = values[node.inputs[0]], values[node.inputs[1]]
    return reduce_hw((x - x[:, :1, :1] - mean) ** 2, "mean", node.attrs["axes"])


@evaluates("InstanceNormApply")
def _instance_norm_apply_node(node, values):
    x, mean, var = (values[t] for t in node.inputs[:3])
    w = {k: np.asarray(node.weights[k], F)[:, None, None] for k in ("scale", "B")}
    eps = node.attrs.get("epsilon", 1e-5)
    return (x - x[:, :1, :1] - mean) / np.sqrt(var + eps) * w["scale"] + w["B"]


def _softmax_axis(node, x) -> int:
    """The NCHW axis (1, 2 or 3) of a Softmax node (glcnn/ops/softmax.py): -1 on a vector
    (C, 1, 1) is its channels."""
    axis = int(node.attrs.get("axis", -1 if node.op == "Softmax" else 1))
    return 1 if axis == -1 and x.shape[1:] == (1, 1) else axis % 4


@evaluates("Softmax")
def _softmax_node(node, values):
    x = values[node.inputs[0]]
    return softmax_channels(x, _softmax_axis(node, x))


# The passes of an expanded Softmax: (M, S) of each line along the axis, at index 0 and 1
# of that axis (over channels: channels 0 and 1 of a (2, H, W) tensor), then the
# normalisation.
@evaluates("SoftmaxStats")
def _softmax_stats_node(node, values):
    x = values[node.inputs[0]]
    a = _softmax_axis(node, x) - 1
    m = x.max(axis=a, keepdims=True)
    return np.concatenate([m, np.exp(x - m).sum(axis=a, keepdims=True)], axis=a)


@evaluates("SoftmaxApply")
def _softmax_apply_node(node, values):
    x, stats = values[node.inputs[0]], values[node.inputs[1]]
    a = _softmax_axis(node, x) - 1
    m, s = np.take(stats, [0], axis=a), np.take(stats, [1], axis=a)
    return np.exp(x - m) / s


@evaluates("Flatten")
def _flatten_node(node, values):
    return reshape(values[node.inputs[0]], (1, -1))


@evaluates("Reshape")
def _reshape_node(node, values):
    return reshape(values[node.inputs[0]], node.attrs["shape"])


@evaluates("Gemm")
def _gemm_node(node, values):
    w, a = node.weights, node.attrs
    return gemm(values[node.inputs[0]], w["B"], w.get("C"), a.get("alpha", 1.0),
                a.get("beta", 1.0), a.get("transB", 0))


@evaluates("MatMul")
def _matmul_node(node, values):
    a, x = node.attrs, values[node.inputs[0]]
    tensors = len(node.inputs) - bool(a.get("residual"))
    axes = {k: a[k] for k in ("a_axes", "b_axes", "out_axes") if k in a}
    if tensors == 1 and not axes and x.shape[1:] == (1, 1):  # glcnn's dense layer on a vector
        return gemm(x, node.weights["B"])
    b = values[node.inputs[1]] if tensors == 2 else node.weights["B"]
    return matmul(x, b, **axes)


@evaluates("LayerNormalization")
def _layer_norm_node(node, values):
    w, a = node.weights, node.attrs
    return layer_norm(values[node.inputs[0]], a.get("axis", -1), w["scale"], w.get("bias"),
                      a.get("epsilon", 1e-5))


def _last2(values):
    return None if values is None else tuple(values)[-2:]  # [1, 1, h, w] or [h, w]


@evaluates("MaxPool", "AveragePool")
def _pool_node(node, values):
    a = node.attrs
    return pool(values[node.inputs[0]], "max" if node.op == "MaxPool" else "average",
                tuple(a["kernel_shape"]), tuple(a.get("strides", (1, 1))),
                tuple(a.get("pads", (0, 0, 0, 0))), tuple(a.get("dilations", (1, 1))),
                int(a.get("ceil_mode", 0)), int(a.get("count_include_pad", 0)),
                a.get("auto_pad", "NOTSET"))


@evaluates("Resize", "Upsample")
def _resize_node(node, values):
    a = node.attrs
    coordinates, rounding = (("asymmetric", "floor") if node.op == "Upsample"
                             else ("half_pixel", "round_prefer_floor"))
    return resize(values[node.inputs[0]], a.get("mode", "nearest"), _last2(a.get("scales")),
                  _last2(a.get("sizes")), a.get("coordinate_transformation_mode", coordinates),
                  a.get("nearest_mode", rounding))


@evaluates("Pad")
def _pad_node(node, values):
    a = node.attrs
    return pad(values[node.inputs[0]], list(a["pads"]), a.get("mode", "constant"),
               a.get("value", 0.0))


@evaluates("Concat")
def _concat_node(node, values):
    inputs = node.inputs[:-1] if node.attrs.get("residual") else node.inputs
    return concat([values[t] for t in inputs], node.attrs.get("axis", 1))


@evaluates("DepthToSpace")
def _depth_to_space_node(node, values):
    a = node.attrs
    return depth_to_space(values[node.inputs[0]], int(a["blocksize"]), a.get("mode", "DCR"))


def evaluate(node, values):
    """Compute one node from the already computed `values` (name -> float64 array)."""
    fn = EVALUATORS.get(node.op)
    if fn is None:
        raise UnsupportedOpError(f"reference has no op {quote(node.op)} (layer {quote(node.name)})")
    upsample = node.attrs.get("input_upsample")  # glcnn.graph.fuse_resize: Resize, then Conv
    if upsample:
        resize = unfused_resize(upsample, "input_upsample", node.inputs[0])
        values = {**values, node.inputs[0]: EVALUATORS[resize.op](resize, values)}
    pre = node.attrs.get("input_activation")  # glcnn.graph.passes.fuse_input_activations
    if pre:
        x = values[node.inputs[0]]
        values = {**values, node.inputs[0]: activation(pre["op"], x, pre, {})}
    if node.attrs.get("input_mean"):  # glcnn.graph.fuse_gate: the conv reads x's H, W mean
        values = {**values, node.inputs[0]: reduce_hw(values[node.inputs[0]], "mean", (2, 3))}
    if node.attrs.get("input_gate"):  # glcnn.graph.fuse_gate: x · gate (C, 1, 1)
        x = values[node.inputs[0]] * values[node.inputs[1]]
        values = {**values, node.inputs[0]: x}
    forward = node.attrs.get("output_grad")  # the epilogue then reads y, the last input
    if forward:
        y, node = values[node.inputs[-1]], dataclasses.replace(node, inputs=node.inputs[:-1])
        alpha = forward.get("alpha", GRAD_ACTIVATIONS[forward["op"]])
        return activation_grad(forward["op"], _epilogue(node, fn(node, values), values), y, alpha)
    return _epilogue(node, fn(node, values), values)


def _epilogue(node, y, values):
    """Fused parts of a node (see glcnn.graph.passes): residual add, activation (or the
    activation, then the residual add: Node.residual_after_activation), then the per-channel
    affine (glcnn.graph.fuse_affine)."""
    after = node.residual_after_activation
    if node.attrs.get("residual") and not after:
        y = y + values[node.inputs[-1]]
    act = node.attrs.get("activation")
    if act:
        y = activation(act["op"], y, act, {"slope": node.weights.get("slope")})
    if after:
        y = y + values[node.inputs[-1]]
    if node.attrs.get("affine"):
        scale, shift = (np.asarray(node.weights[k], F).reshape(-1, 1, 1)
                        for k in ("affine_scale", "affine_shift"))
        y = y * scale + shift
    return y


def run(graph, inputs: dict) -> dict:
    """Evaluate every node of `graph`; returns name -> float64 array for all tensors."""
    values = {name: np.asarray(inputs[name], F) for name in graph.inputs}
    for node in graph.nodes:
        values[node.name] = evaluate(node, values)
    return values
