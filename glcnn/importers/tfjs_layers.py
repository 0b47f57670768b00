"""Per-layer converters of the TF.js importer: one Keras layer to glcnn nodes (or an alias).

Each converter takes the `TfjsImport` (glcnn/importers/tfjs.py) and a `Call`, reads its
inputs with `imp.act`, its weights with `imp.weight` (shapes checked), appends nodes with
`imp.emit` and returns the `Tensor` the layer produces. `CONVERTERS` maps Keras class names
to converters (this module: activations, convolutions, BatchNorm, inputs and identities;
tfjs_shapes: pooling, resizing, padding, merges, Dense, Flatten, Reshape) and `EMITS` to the
glcnn op types each may emit, both filled by `@converts(..., emits=...)`; `ACTIVATIONS`
maps the activation names of layer configs to glcnn nodes.

Weights, from Keras's layout to glcnn's (glcnn/ops/*.py):

| layer           | Keras weight                          | glcnn                                 |
|-----------------|---------------------------------------|---------------------------------------|
| Conv2D          | kernel (kh, kw, Ci/g, Co)             | Conv W (Co, Ci/g, kh, kw)             |
| Conv2DTranspose | kernel (kh, kw, Co, Ci)               | ConvTranspose W (Ci, Co, kh, kw)      |
| DepthwiseConv2D | depthwise_kernel (kh, kw, C, M)       | Conv W (C·M, 1, kh, kw), group C;     |
|                 |                                       | output channel c·M + m as in TF       |
| SeparableConv2D | depthwise_kernel, pointwise_kernel    | depthwise Conv "<layer>/depthwise",   |
|                 | (1, 1, C·M, Co), bias                 | then a 1×1 Conv                       |
| Dense           | kernel (K, N), bias (N,)              | Gemm B (K, N), C (rows permuted after |
|                 |                                       | a channels_last Flatten); 1×1 Conv on |
|                 |                                       | a channels_last map                   |
| BatchNorm       | gamma, beta, moving_mean, moving_var. | scale, B, mean, var                   |
| PReLU           | alpha (shared over H and W)           | PRelu slope (C,)                      |

Padding "same" is TF's: out = ceil(in / s), total = max((out − 1)·s + d·(k − 1) + 1 − in, 0),
total // 2 before and the rest after. Conv2DTranspose follows TF.js: out = in·s ("same") or
in·s + max(k − s, 0) ("valid"), so "same" crops (k − s) // 2 at the start and the rest at
the end, and k < s adds output_padding s − k. UpSampling2D follows TF.js (resizeNearest/
Bilinear without half-pixel centres, "asymmetric"); Python Keras's bilinear differs.
"""

import numpy as np

from ..errors import quote
from ..registry import enter
from .tfjs_tensor import Tensor
from .tfjs_topology import Call, ConfigError, integers

CONVERTERS: dict = {}
EMITS: dict[str, tuple[str, ...]] = {}  # Keras class -> the glcnn op types its converter emits

SELU_ALPHA, SELU_SCALE = 1.6732632423543772, 1.0507009873554805

# Activation name -> glcnn nodes [(op, attrs, weights)]; softmax is handled on its own.
ACTIVATIONS = {
    None: [], "linear": [], "relu": [("Relu", {}, {})],
    "relu6": [("Clip", {"min": 0.0, "max": 6.0}, {})],
    "elu": [("Elu", {"alpha": 1.0}, {})],
    "selu": [("Elu", {"alpha": SELU_ALPHA}, {}), ("Mul", {}, {"B": [SELU_SCALE]})],
    "sigmoid": [("Sigmoid", {}, {})],
    "hard_sigmoid": [("HardSigmoid", {"alpha": 0.2, "beta": 0.5}, {})],  # Keras 2, TF.js
    "tanh": [("Tanh", {}, {})], "swish": [("Silu", {}, {})], "softmax": None,
}
# Every glcnn op `activate` may emit: those of ACTIVATIONS, and Softmax.
ACTIVATION_OPS = tuple(sorted({op for steps in ACTIVATIONS.values() for op, _, _ in steps or ()}
                              | {"Softmax"}))


def converts(*classes, emits: tuple[str, ...]):
    """Register a converter for Keras layer `classes`; `emits` names every glcnn op type it
    may emit (ACTIVATION_OPS too when it applies the layer's activation with `finish`).

    Raises:
        GlcnnError: a class is given a converter twice.
    """
    def wrap(fn):
        enter(CONVERTERS, dict.fromkeys(classes, fn), "the TF.js importer's CONVERTERS")
        EMITS.update(dict.fromkeys(classes, tuple(emits)))
        return fn
    return wrap


def convert(imp, call: Call) -> Tensor:
    return CONVERTERS[call.cls](imp, call)


def activation_name(value) -> str | None:
    """A config's activation: a name, or {"class_name": ...} for a serialized function."""
    if isinstance(value, dict):
        value = value.get("class_name")
    return None if value is None else str(value)


def pair(value, key: str, minimum: int = 1) -> tuple[int, int]:
    """(a, b) from an integer n (n, n) or a list [a, b] of integers ≥ `minimum`."""
    values = integers(value, key, minimum)
    if len(values) not in (1, 2) or (len(values) == 1 and isinstance(value, list | tuple)):
        raise ConfigError(f"{key} {quote(value)} must be one integer or two")
    return values[0], values[-1]


def _padding(imp, call: Call) -> str:
    padding = call.config.get("padding", "valid")
    if padding not in ("same", "valid"):
        imp.fail(call, f"padding={quote(padding)} is not supported (same, valid)")
    return padding


def same_pads(size: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """TF's "same" padding of one axis: (before, after), the odd one after."""
    out = -(-size // stride)
    total = max((out - 1) * stride + dilation * (kernel - 1) + 1 - size, 0)
    return total // 2, total - total // 2


def spatial_pads(imp, call: Call, x: Tensor, kernel, strides, dilations) -> list[int]:
    """[top, left, bottom, right] for `call`'s padding on input `x`."""
    if _padding(imp, call) == "valid":
        return [0, 0, 0, 0]
    _, h, w = imp.shape(x)
    (t, b), (left, r) = (same_pads(n, k, s, d) for n, k, s, d in
                         zip((h, w), kernel, strides, dilations))
    return [t, left, b, r]


# --- activations -------------------------------------------------------------------------
def activate(imp, call: Call, x: Tensor, activation) -> Tensor:
    """`activation` applied to `x`; the last node is named after the layer."""
    activation = activation_name(activation)
    if activation == "softmax":
        imp.channel_axis(call, x, -1, "softmax over axis")
        return Tensor(imp.emit(call, "Softmax", [x.name], {"axis": 1}), x.rank, x.order)
    steps = ACTIVATIONS[activation]
    name = x.name
    for i, (op, attrs, weights) in enumerate(steps):
        last = i == len(steps) - 1
        name = imp.emit(call, op, [name], attrs, weights, suffix="" if last else op.lower())
    return Tensor(name, x.rank, x.order)


def finish(imp, call: Call, op: str, x: Tensor, attrs: dict, weights: dict) -> Tensor:
    """Emit the layer's main op on `x`, then its config's activation."""
    activation = activation_name(call.config.get("activation"))
    linear = ACTIVATIONS.get(activation) == []
    name = imp.emit(call, op, [x.name], attrs, weights, suffix="" if linear else "linear")
    return activate(imp, call, Tensor(name, x.rank), activation)


@converts("Activation", emits=ACTIVATION_OPS)
def _activation(imp, call):
    """Any activation glcnn has, by name (relu, relu6, elu, selu, sigmoid, tanh, swish,
    hard_sigmoid, softmax, linear, ...)."""
    return activate(imp, call, imp.act(call, 0, keep_order=True), call.config["activation"])


@converts("ReLU", emits=("LeakyRelu", "Clip", "Relu"))
def _relu(imp, call):
    """Relu, Clip for max_value (ReLU6), LeakyRelu for negative_slope; threshold refused."""
    cfg, x = call.config, imp.act(call, 0, keep_order=True)
    if float(cfg.get("threshold") or 0) != 0:
        imp.fail(call, f"threshold={cfg['threshold']} is not supported")
    slope, top = float(cfg.get("negative_slope") or 0), cfg.get("max_value")
    if slope and top is not None:
        imp.fail(call, "negative_slope together with max_value is not supported")
    if slope:
        return Tensor(imp.emit(call, "LeakyRelu", [x.name], {"alpha": slope}), x.rank, x.order)
    if top is not None:
        attrs = {"min": 0.0, "max": float(top)}
        return Tensor(imp.emit(call, "Clip", [x.name], attrs), x.rank, x.order)
    return Tensor(imp.emit(call, "Relu", [x.name]), x.rank, x.order)


@converts("LeakyReLU", emits=("LeakyRelu",))
def _leaky_relu(imp, call):
    """LeakyRelu with alpha (default 0.3)."""
    x = imp.act(call, 0, keep_order=True)
    alpha = call.config.get("alpha", call.config.get("negative_slope", 0.3))
    return Tensor(imp.emit(call, "LeakyRelu", [x.name], {"alpha": float(alpha)}), x.rank, x.order)


@converts("ELU", emits=("Elu",))
def _elu(imp, call):
    """Elu with alpha."""
    x = imp.act(call, 0, keep_order=True)
    alpha = float(call.config.get("alpha", 1.0))
    return Tensor(imp.emit(call, "Elu", [x.name], {"alpha": alpha}), x.rank, x.order)


@converts("Softmax", emits=("Softmax",))
def _softmax(imp, call):
    """Softmax over the channel axis only."""
    x = imp.act(call, 0, keep_order=True)
    imp.channel_axis(call, x, call.config.get("axis", -1))
    return Tensor(imp.emit(call, "Softmax", [x.name], {"axis": 1}), x.rank, x.order)


@converts("PReLU", emits=("PRelu",))
def _prelu(imp, call):
    """alpha has the input's shape, 1 along `shared_axes`: glcnn needs it to vary along
    the channels only."""
    x = imp.act(call)
    own = imp.tf_shape(x)
    shared = {int(a) % len(own) for a in call.config.get("shared_axes") or []}
    alpha = imp.weight(call, "alpha", tuple(1 if axis in shared else n
                                            for axis, n in enumerate(own) if axis))
    channel = 2 if x.rank == 4 and imp.layout == "NHWC" else 0
    if any(n != 1 for i, n in enumerate(alpha.shape) if i != channel):
        imp.fail(call, f"alpha of shape {list(alpha.shape)} varies over H or W; glcnn's "
                       "PRelu takes one slope per channel (shared_axes must hold H and W)")
    return Tensor(imp.emit(call, "PRelu", [x.name], {}, {"slope": alpha.reshape(-1)}), x.rank)


# --- identities and inputs -----------------------------------------------------------------
@converts("Dropout", "SpatialDropout2D", "GaussianNoise", "GaussianDropout", "AlphaDropout",
          emits=())
def _identity(imp, call):
    """Inference-time identities."""
    return imp.act(call, 0, keep_order=True)


@converts("InputLayer", emits=())
def _input(imp, call):
    """Images (batch, H, W, C) or (batch, C, H, W), and vectors (batch, F); None H and W are
    open sizes."""
    cfg = call.config
    shape = cfg.get("batch_input_shape", cfg.get("batch_shape"))
    if not isinstance(shape, list) or len(shape) not in (2, 4):
        imp.fail(call, f"input shape {quote(shape)}: glcnn takes images (batch, H, W, C or "
                       "C, H, W) and vectors (batch, F)")
    dims = list(shape[1:])
    if len(dims) == 3:
        spatial = [0, 1] if imp.layout == "NHWC" else [1, 2]
        if imp.input_size is not None and any(dims[i] is None for i in spatial):
            for i, size in zip(spatial, imp.input_size):
                dims[i] = int(size)
    if any(d is None for d in dims):
        imp.fail(call, f"input shape {quote(shape)} leaves sizes open; pass input_size=(H, W) to "
                       "glcnn.importers.tfjs.load for height and width")
    dims = integers(dims, "input shape", 1)
    if len(dims) == 1:
        return imp.add_input(call, (dims[0], 1, 1), 2)
    chw = (dims[2], dims[0], dims[1]) if imp.layout == "NHWC" else tuple(dims)
    return imp.add_input(call, chw, 4)


# --- convolutions ---------------------------------------------------------------------------
def bias(imp, call, size: int):
    """The layer's bias of `size` values, or None when it has none (use_bias false)."""
    return imp.weight(call, "bias", (size,)) if call.config.get("use_bias", True) else None


def _conv_geometry(imp, call, x):
    cfg = call.config
    kernel = pair(cfg["kernel_size"], "kernel_size")
    strides = pair(cfg.get("strides", 1), "strides")
    dilations = pair(cfg.get("dilation_rate", 1), "dilation_rate")
    attrs = {"strides": list(strides), "dilations": list(dilations),
             "pads": spatial_pads(imp, call, x, kernel, strides, dilations)}
    return kernel, attrs


@converts("Conv2D", emits=("Conv", *ACTIVATION_OPS))
def _conv2d(imp, call):
    """Any kernel, strides, dilation_rate, groups; padding same (TF's rule) or valid; use_bias;
    the activation fused."""
    x = imp.act(call)
    c = imp.shape(x)[0]
    groups = integers(call.config.get("groups", 1), "groups", 1)[0]
    filters = integers(call.config["filters"], "filters", 1)[0]
    (kh, kw), attrs = _conv_geometry(imp, call, x)
    kernel = imp.weight(call, "kernel", (kh, kw, c // groups, filters))
    weights = {"W": kernel.transpose(3, 2, 0, 1), "B": bias(imp, call, filters)}
    return finish(imp, call, "Conv", x, {**attrs, "group": groups}, weights)


def _depthwise_weights(imp, call, channels: int):
    (kh, kw), m = pair(call.config["kernel_size"], "kernel_size"), \
        integers(call.config.get("depth_multiplier", 1), "depth_multiplier", 1)[0]
    kernel = imp.weight(call, "depthwise_kernel", (kh, kw, channels, m))
    return kernel.transpose(2, 3, 0, 1).reshape(channels * m, 1, kh, kw)


@converts("DepthwiseConv2D", emits=("Conv", *ACTIVATION_OPS))
def _depthwise(imp, call):
    """depth_multiplier, strides, same or valid padding; dilation_rate 1 (TF.js ignores it,
    Keras applies it)."""
    x = imp.act(call)
    c = imp.shape(x)[0]
    _, attrs = _conv_geometry(imp, call, x)
    if attrs["dilations"] != [1, 1]:
        imp.fail(call, f"dilation_rate={attrs['dilations']}: TF.js's DepthwiseConv2D ignores "
                       "it while Keras applies it; glcnn refuses rather than pick one")
    w = _depthwise_weights(imp, call, c)
    weights = {"W": w, "B": bias(imp, call, w.shape[0])}
    return finish(imp, call, "Conv", x, {**attrs, "group": c}, weights)


@converts("SeparableConv2D", emits=("Conv", *ACTIVATION_OPS))
def _separable(imp, call):
    """A depthwise Conv and a 1×1 Conv, the activation fused into the second."""
    x = imp.act(call)
    c, filters = imp.shape(x)[0], integers(call.config["filters"], "filters", 1)[0]
    _, attrs = _conv_geometry(imp, call, x)
    w = _depthwise_weights(imp, call, c)
    depthwise = imp.emit(call, "Conv", [x.name], {**attrs, "group": c}, {"W": w},
                         suffix="depthwise")
    pointwise = imp.weight(call, "pointwise_kernel", (1, 1, w.shape[0], filters))
    weights = {"W": pointwise.transpose(3, 2, 0, 1), "B": bias(imp, call, filters)}
    return finish(imp, call, "Conv", Tensor(depthwise, 4), {}, weights)


@converts("Conv2DTranspose", emits=("ConvTranspose", *ACTIVATION_OPS))
def _conv_transpose(imp, call):
    """Strides, same or valid padding (PyTorch output_padding made explicit); no dilation_rate
    or output_padding."""
    cfg, x = call.config, imp.act(call)
    c, filters = imp.shape(x)[0], integers(cfg["filters"], "filters", 1)[0]
    kernel_size = pair(cfg["kernel_size"], "kernel_size")
    strides = pair(cfg.get("strides", 1), "strides")
    if pair(cfg.get("dilation_rate", 1), "dilation_rate") != (1, 1) or \
            cfg.get("output_padding") is not None:
        imp.fail(call, "dilation_rate and output_padding are not supported (TF.js ignores "
                       "the first and lacks the second)")
    same = _padding(imp, call) == "same"
    pads = [max(k - s, 0) if same else 0 for k, s in zip(kernel_size, strides)]
    begin = [p // 2 for p in pads]
    attrs = {"strides": list(strides), "pads": begin + [p - b for p, b in zip(pads, begin)],
             "output_padding": [max(s - k, 0) for k, s in zip(kernel_size, strides)]}
    kernel = imp.weight(call, "kernel", (*kernel_size, filters, c))
    weights = {"W": kernel.transpose(3, 2, 0, 1), "B": bias(imp, call, filters)}
    return finish(imp, call, "ConvTranspose", x, attrs, weights)


@converts("BatchNormalization", emits=("BatchNormalization",))
def _batchnorm(imp, call):
    """Inference form (moving mean and variance), folded into a conv before it."""
    cfg, x = call.config, imp.act(call)
    imp.channel_axis(call, x, cfg.get("axis", -1))
    c = imp.shape(x)[0]
    weights = {"mean": imp.weight(call, "moving_mean", (c,)),
               "var": imp.weight(call, "moving_variance", (c,)),
               "scale": imp.weight(call, "gamma", (c,)) if cfg.get("scale", True) else
               np.ones(c, np.float32),
               "B": imp.weight(call, "beta", (c,)) if cfg.get("center", True) else
               np.zeros(c, np.float32)}
    attrs = {"epsilon": float(cfg.get("epsilon", 1e-3))}
    return Tensor(imp.emit(call, "BatchNormalization", [x.name], attrs, weights), x.rank)
