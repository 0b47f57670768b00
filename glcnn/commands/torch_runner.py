"""Run a glcnn Graph on the CPU with torch.nn.functional: the `glcnn bench --against torch`
baseline.

This module imports torch. Nothing in glcnn imports it at import time: `glcnn.commands.bench_refs`
imports it inside the function that makes a torch runner, so `import glcnn` and
`glcnn bench` without `--against torch` never load torch.

Each node becomes one closure over its weights (converted to tensors once), computing the
op with glcnn's (ONNX's) semantics and then the epilogue `glcnn.graph.passes` may have fused into
it: `residual` adds the node's last input (before the activation, or after it for
Node.residual_after_activation), `activation` applies an activation, `affine`
scales and shifts each channel after it, `input_activation` one to the node's first input.
Tensors are NCHW float32 with batch 1; glcnn's vectors (F, 1, 1) are (1, F, 1, 1) here. Every op of
the glcnn registry runs, the multi-pass forms `glcnn.graph.passes.expand_reductions` makes
included, with these limits (raised as UnsupportedOpError naming the layer):

| op                    | torch                                 | not mapped                    |
|-----------------------|---------------------------------------|-------------------------------|
| Conv, ConvTranspose   | conv2d, conv_transpose2d (+ F.pad or  |                               |
|                       | a crop for asymmetric pads)           |                               |
| MaxPool, AveragePool  | max_pool2d, avg_pool2d                | asymmetric pads, dilated      |
|                       |                                       | AveragePool                   |
| Resize, Upsample      | interpolate: nearest (asymmetric +    | other coordinate / rounding   |
|                       | floor; half_pixel + round_prefer_ceil |                               |
|                       | as nearest-exact), bilinear           | modes                         |
|                       | (half_pixel, align_corners)           |                               |
| Pad                   | F.pad (constant, reflect, replicate,  | symmetric: an index gather    |
|                       | circular), negative pads as a crop    |                               |
"""

import os

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import GlcnnError, UnsupportedOpError, quote
from ..graph.reference_ops import pool_pads, rearrange_indices
from ..ops import build_ops
from ..ops.base import ACTIVATION_DEFAULTS
from ..registry import enter
from . import torch_seq

# ONNX op type -> f(node, shapes) returning the op's closure values -> tensor (before the
# fused epilogue). Adding an op means adding one decorated function below (the elementwise,
# reduction, softmax, MatMul and LayerNorm builders are in torch_seq.py).
BUILDERS = dict(torch_seq.BUILDERS)


def builds(*op_types):
    """Function decorator: make `fn` the builder of each ONNX op type in `op_types`.

    Raises:
        GlcnnError: an op type is given a builder twice.
    """
    def wrap(fn):
        enter(BUILDERS, dict.fromkeys(op_types, fn), "the torch runner's BUILDERS")
        return fn
    return wrap


class TorchRunner:
    """A glcnn Graph as a list of torch closures, run in inference mode.

    Args:
        graph: the glcnn Graph (optimised or not).
        threads: torch intra-op threads (default: the cores this process may use).
    Raises:
        UnsupportedOpError: the first layer whose op or attributes have no torch mapping.
        GlcnnError subclasses of `glcnn.ops.build_ops` for a malformed graph.
    """

    def __init__(self, graph, threads: int | None = None):
        torch.set_num_threads(threads or len(os.sched_getaffinity(0)))
        self.graph = graph
        shapes = build_ops(graph)[1]
        self.steps = [(node, _build(node, shapes)) for node in graph.nodes]
        self.dead = _last_uses(graph)

    def __call__(self, inputs: dict) -> dict[str, np.ndarray]:
        """Run on (C, H, W) arrays by input name; each graph output as float32 (C, H, W)."""
        return {name: y[0].numpy() for name, y in self.forward(self.feeds(inputs)).items()}

    def feeds(self, inputs: dict) -> dict[str, torch.Tensor]:
        """(C, H, W) arrays by input name as the (1, C, H, W) tensors `forward` takes."""
        return {name: torch.from_numpy(np.asarray(inputs[name], np.float32)
                                       .reshape(1, *shape).copy())
                for name, shape in self.graph.inputs.items()}

    def forward(self, feeds: dict) -> dict[str, torch.Tensor]:
        """Every graph output as a (1, C, H, W) tensor; tensors are freed after their last use.

        Raises:
            GlcnnError: torch failed on a layer (named).
        """
        values, node = dict(feeds), None
        with torch.inference_mode():
            try:
                for i, (node, step) in enumerate(self.steps):
                    values[node.name] = step(values)
                    for name in self.dead[i]:
                        del values[name]
            except RuntimeError as exc:
                raise GlcnnError(f"torch failed on layer {quote(node.name)} ({node.op}): "
                                 f"{str(exc).splitlines()[0]}") from None
        return {name: values[name] for name in self.graph.outputs}


def _last_uses(graph) -> list[list[str]]:
    """Per node, the tensors nothing after it reads (graph outputs are kept)."""
    last = {t: i for i, node in enumerate(graph.nodes) for t in node.inputs}
    dead = [[] for _ in graph.nodes]
    for name, i in last.items():
        if name not in graph.outputs:
            dead[i].append(name)
    return dead


def _build(node, shapes):
    make = BUILDERS.get(node.op)
    if make is None:
        raise UnsupportedOpError(f"layer {quote(node.name)}: the torch runner has no op "
                                 f"{quote(node.op)}")
    body = make(node, shapes)
    act, pre = node.attrs.get("activation"), node.attrs.get("input_activation")
    post = activation(act["op"], act, node.weights) if act else None
    before = activation(pre["op"], pre, {}) if pre else None
    skip = node.inputs[-1] if node.attrs.get("residual") else None
    after = node.residual_after_activation  # y = act(body) + skip, not act(body + skip)
    affine = [_tensor(node.weights[k]).reshape(1, -1, 1, 1)
              for k in ("affine_scale", "affine_shift")] if node.attrs.get("affine") else None
    if post is None and skip is None and before is None and affine is None:
        return body

    def step(values):
        if before is not None:
            values = {**values, node.inputs[0]: before(values[node.inputs[0]])}
        y = body(values)
        y = y + values[skip] if skip is not None and not after else y
        y = post(y) if post is not None else y
        y = y + values[skip] if after else y
        return y * affine[0] + affine[1] if affine is not None else y
    return step


def _tensor(array) -> torch.Tensor:
    return torch.from_numpy(np.array(array, np.float32))


def _refuse(node, what: str):
    raise UnsupportedOpError(f"layer {quote(node.name)} ({node.op}): {what} has no torch mapping "
                             "in the torch runner")


# --- activations ------------------------------------------------------------------------------
def activation(op: str, attrs: dict, weights: dict):
    """The activation `op` (ONNX name, "Silu" too) with its attributes as a tensor function."""
    p = {k: float(attrs.get(k, v)) for k, v in ACTIVATION_DEFAULTS[op].items()}
    if op == "PRelu":
        slope = _tensor(weights["slope"]).reshape(-1)
        return lambda x: F.prelu(x, slope)
    functions = {
        "Relu": F.relu, "Sigmoid": torch.sigmoid, "Tanh": torch.tanh,
        "HardSwish": F.hardswish, "Silu": F.silu,
        "LeakyRelu": lambda x: F.leaky_relu(x, p.get("alpha")),
        "Elu": lambda x: F.elu(x, p.get("alpha")),
        "HardSigmoid": lambda x: torch.clamp(x * p.get("alpha") + p.get("beta"), 0, 1),
        "Clip": lambda x: torch.clamp(x, p.get("min"), p.get("max")),
    }
    return functions[op]


@builds(*ACTIVATION_DEFAULTS)
def _activation_node(node, shapes):
    x, fn = node.inputs[0], activation(node.op, node.attrs, node.weights)
    return lambda v: fn(v[x])


def _power(x, p: float):
    """glcnn's Pow (glcnn/ops/activation.py, Math): a non-integer p reads x < 0 as 0."""
    base = x if p == int(p) else x.clamp(min=0)
    base = torch.where(base.abs() < 2.0 ** -126, torch.zeros_like(base), base)
    return torch.ones_like(x) if p == 0 else torch.pow(base, p)


@builds("Sqrt", "Erf", "Pow")
def _math_node(node, shapes):
    x = node.inputs[0]
    if node.op == "Sqrt":
        return lambda v: torch.sqrt(v[x].clamp(min=0))
    if node.op == "Erf":
        return lambda v: torch.erf(v[x])
    p = float(node.attrs["exponent"])
    return lambda v: _power(v[x], p)


# --- convolutions -----------------------------------------------------------------------------
def _conv_params(node):
    a, w = node.attrs, node.weights
    bias = _tensor(w["B"]) if "B" in w else None
    return (_tensor(w["W"]), bias, tuple(a.get("strides", (1, 1))),
            tuple(a.get("dilations", (1, 1))), int(a.get("group", 1)),
            tuple(a.get("pads", (0, 0, 0, 0))))


@builds("Conv")
def _conv(node, shapes):
    x, (W, B, stride, dilation, group, (pt, pl, pb, pr)) = node.inputs[0], _conv_params(node)
    if (pt, pl) == (pb, pr):
        return lambda v: F.conv2d(v[x], W, B, stride, (pt, pl), dilation, group)
    return lambda v: F.conv2d(F.pad(v[x], (pl, pr, pt, pb)), W, B, stride, 0, dilation, group)


@builds("ConvTranspose")
def _conv_transpose(node, shapes):
    x, (W, B, stride, dilation, group, (pt, pl, pb, pr)) = node.inputs[0], _conv_params(node)
    extra = tuple(node.attrs.get("output_padding", (0, 0)))
    if (pt, pl) == (pb, pr):
        return lambda v: F.conv_transpose2d(v[x], W, B, stride, (pt, pl), extra, group, dilation)

    def crop(v):  # asymmetric pads: the full output, then pads cropped on each side
        y = F.conv_transpose2d(v[x], W, B, stride, 0, extra, group, dilation)
        return y[:, :, pt:y.shape[2] - pb, pl:y.shape[3] - pr]
    return crop


# --- normalisation, elementwise ---------------------------------------------------------------
@builds("BatchNormalization")
def _batchnorm(node, shapes):
    x, w = node.inputs[0], {k: _tensor(v) for k, v in node.weights.items()}
    eps = float(node.attrs.get("epsilon", 1e-5))
    return lambda v: F.batch_norm(v[x], w["mean"], w["var"], w["scale"], w["B"], False, 0.0, eps)


@builds("InstanceNormalization")
def _instance_norm(node, shapes):
    x, w = node.inputs[0], {k: _tensor(v) for k, v in node.weights.items()}
    eps = float(node.attrs.get("epsilon", 1e-5))
    return lambda v: F.instance_norm(v[x], weight=w["scale"], bias=w["B"], eps=eps)


def _shifted(x):
    """x − x[c, 0, 0]: the shift of glcnn's InstanceNorm statistics passes."""
    return x - x[:, :, :1, :1]


@builds("InstanceNormMean")
def _instance_norm_mean(node, shapes):
    x, axes = node.inputs[0], _axes(node)
    return lambda v: _shifted(v[x]).mean(axes, keepdim=True)


@builds("InstanceNormVariance")
def _instance_norm_variance(node, shapes):
    (x, mean), axes = node.inputs[:2], _axes(node)
    return lambda v: ((_shifted(v[x]) - v[mean]) ** 2).mean(axes, keepdim=True)


@builds("InstanceNormApply")
def _instance_norm_apply(node, shapes):
    (x, mean, var), eps = node.inputs[:3], float(node.attrs.get("epsilon", 1e-5))
    scale, bias = (_tensor(node.weights[k]).reshape(1, -1, 1, 1) for k in ("scale", "B"))
    return lambda v: (_shifted(v[x]) - v[mean]) / torch.sqrt(v[var] + eps) * scale + bias


# --- pooling, reductions, softmax -------------------------------------------------------------
@builds("MaxPool", "AveragePool")
def _pool(node, shapes):
    a, x = node.attrs, node.inputs[0]
    kernel, strides = tuple(a["kernel_shape"]), tuple(a.get("strides", (1, 1)))
    dilations, ceil = tuple(a.get("dilations", (1, 1))), bool(int(a.get("ceil_mode", 0)))
    pt, pl, pb, pr = pool_pads(shapes[x][1:], kernel, strides, a.get("pads", (0, 0, 0, 0)),
                               a.get("auto_pad", "NOTSET"))
    if (pt, pl) != (pb, pr):
        _refuse(node, f"asymmetric pads {(pt, pl, pb, pr)}")
    if node.op == "MaxPool":
        return lambda v: F.max_pool2d(v[x], kernel, strides, (pt, pl), dilations, ceil)
    if dilations != (1, 1):
        _refuse(node, f"dilations {dilations}")
    include = bool(int(a.get("count_include_pad", 0)))
    return lambda v: F.avg_pool2d(v[x], kernel, strides, (pt, pl), ceil, include)


def _axes(node) -> tuple[int, ...]:
    if node.op.startswith("Global"):
        return (2, 3)
    return tuple(sorted({int(a) % 4 for a in node.attrs.get("axes", (0, 1, 2, 3))}))


# --- shapes and layout ------------------------------------------------------------------------
@builds("Flatten", "Reshape")
def _reshape(node, shapes):
    x, shape = node.inputs[0], shapes[node.name]
    return lambda v: v[x].reshape(1, *shape)


@builds("Gemm")
def _gemm(node, shapes):
    a = node.attrs
    b = np.asarray(node.weights["B"], np.float64)
    W = float(a.get("alpha", 1.0)) * (b if int(a.get("transB", 0)) else b.T)  # (N, K)
    C = node.weights.get("C", np.zeros(1))
    bias = float(a.get("beta", 1.0)) * np.broadcast_to(np.reshape(C, -1), (W.shape[0],))
    x, W, bias = node.inputs[0], _tensor(W), _tensor(bias)
    return lambda v: F.linear(v[x].reshape(1, -1), W, bias).reshape(1, -1, 1, 1)


@builds("Concat")
def _concat(node, shapes):
    parts = node.inputs[:-1] if node.attrs.get("residual") else list(node.inputs)
    axis = int(node.attrs.get("axis", 1)) % 4
    return lambda v: torch.cat([v[t] for t in parts], axis)


@builds("Slice")
def _slice(node, shapes):
    a, x, index = node.attrs, node.inputs[0], [slice(None)] * 4
    steps = a.get("steps", [1] * len(a["starts"]))
    for start, end, axis, step in zip(a["starts"], a["ends"], a.get("axes", (2, 3)), steps):
        index[int(axis)] = slice(int(start), int(end), int(step))
    return lambda v: v[x][tuple(index)]


@builds("Rearrange")
def _rearrange(node, shapes):
    a, x, shape = node.attrs, node.inputs[0], shapes[node.name]
    g = torch.from_numpy(rearrange_indices(int(np.prod(shape)), a["dims"], a["strides"],
                                           a.get("offset", 0), a.get("dims2"), a.get("strides2")))
    return lambda v: v[x].reshape(-1).index_select(0, g).reshape(1, *shape)


@builds("Transpose")
def _transpose(node, shapes):
    x, perm = node.inputs[0], [int(p) for p in node.attrs["perm"]]
    return lambda v: v[x].permute(*perm).contiguous()


@builds("DepthToSpace")
def _depth_to_space(node, shapes):
    x, b = node.inputs[0], int(node.attrs["blocksize"])
    if node.attrs.get("mode", "DCR") == "CRD":
        return lambda v: F.pixel_shuffle(v[x], b)
    c, h, w = shapes[node.name]
    return lambda v: (v[x].reshape(1, b, b, c, h // b, w // b).permute(0, 3, 4, 1, 5, 2)
                      .reshape(1, c, h, w))


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate",
              "wrap": "circular"}


@builds("Pad")
def _pad(node, shapes):
    a, x = node.attrs, node.inputs[0]
    top, left, bottom, right = (int(a["pads"][i]) for i in (2, 3, 6, 7))
    _, h, w = shapes[x]
    crop = (slice(None), slice(None), slice(max(-top, 0), h - max(-bottom, 0)),
            slice(max(-left, 0), w - max(-right, 0)))
    pads = tuple(max(p, 0) for p in (left, right, top, bottom)) + \
        ((int(a["pads"][1]), int(a["pads"][5])) if a["pads"][1] or a["pads"][5] else ())
    if a.get("mode") == "symmetric":  # no torch mode: gather rows and columns
        rows, cols = (torch.from_numpy(np.pad(np.arange(n), (max(b, 0), max(e, 0)), "symmetric"))
                      for n, b, e in ((h - max(-top, 0) - max(-bottom, 0), top, bottom),
                                      (w - max(-left, 0) - max(-right, 0), left, right)))
        return lambda v: v[x][crop][:, :, rows][:, :, :, cols]
    mode = _PAD_MODES[a.get("mode", "constant")]
    value = float(a.get("value", 0.0)) if mode == "constant" else None
    return lambda v: F.pad(v[x][crop], pads, mode, value)


def _interpolation(node, out_size) -> dict | None:
    """F.interpolate's mode and align_corners for the node's coordinate/rounding modes."""
    coordinates, rounding = (("asymmetric", "floor") if node.op == "Upsample"
                             else ("half_pixel", "round_prefer_floor"))
    a = node.attrs
    mode = a.get("mode", "nearest")
    coordinates = a.get("coordinate_transformation_mode", coordinates)
    rounding = a.get("nearest_mode", rounding)
    if mode == "nearest" and (coordinates, rounding) == ("asymmetric", "floor"):
        return {"mode": "nearest"}
    if mode == "nearest" and (coordinates, rounding) == ("half_pixel", "round_prefer_ceil"):
        return {"mode": "nearest-exact"}
    if mode == "linear" and coordinates == "align_corners":
        return {"mode": "bilinear", "align_corners": True}
    if mode == "linear" and (coordinates == "half_pixel" or (
            coordinates == "pytorch_half_pixel" and min(out_size) > 1)):
        return {"mode": "bilinear", "align_corners": False}
    return None


@builds("Resize", "Upsample")
def _resize(node, shapes):
    x, (_, oh, ow) = node.inputs[0], shapes[node.name]
    how = _interpolation(node, (oh, ow))
    if how is None:
        _refuse(node, f"mode {quote(node.attrs.get('mode', 'nearest'))} with attributes "
                      f"{node.attrs}")
    if "scales" in node.attrs:  # coordinates use the given scales, as ONNX does
        scales = tuple(float(s) for s in node.attrs["scales"][-2:])
        return lambda v: F.interpolate(v[x], scale_factor=scales, **how)
    return lambda v: F.interpolate(v[x], size=(oh, ow), **how)
