"""Op converters of the TF.js graph-model importer (glcnn/importers/tfjs_graph.py).

A value is either a constant (a numpy array in TF's layout) or an `Act`: a tensor computed at
run time, held by a glcnn tensor, with its TF shape (batch 1): (1, H, W, C) is glcnn's
(C, H, W) and (1, F) glcnn's vector (F, 1, 1), so (1, 1, 1, C) and (1, C) share one glcnn
shape and reshaping between them costs nothing. `CONVERTERS` maps TF op types to
converters taking the import, the node and its input values; `FOLDS` maps op types to numpy
functions evaluated when every input is a constant (shape arithmetic, and any op on
constants); `EMITS` names the glcnn ops each converter may emit and `NOTES` what it takes.

Weights from TF's layout to glcnn's:

| TF op                      | TF weight                 | glcnn                                  |
|----------------------------|---------------------------|----------------------------------------|
| Conv2D, _FusedConv2D       | filter (kh, kw, Ci, Co)   | Conv W (Co, Ci, kh, kw)                |
| DepthwiseConv2dNative,     | filter (kh, kw, C, M)     | Conv W (C·M, 1, kh, kw), group C;      |
| FusedDepthwiseConv2dNative |                           | output channel c·M + m as in TF        |
| MatMul, _FusedMatMul       | b (K, N) (or (N, K) with  | Gemm B (K, N) (transB), C bias (N,)    |
|                            | transpose_b)              |                                        |
| FusedBatchNorm(V3)         | scale, offset, mean, var  | BatchNormalization scale, B, mean, var |
"""

from dataclasses import dataclass

import numpy as np

from ..registry import enter

CONVERTERS: dict = {}
EMITS: dict[str, tuple[str, ...]] = {}
NOTES: dict[str, str] = {}
FOLDS: dict = {}


@dataclass(frozen=True)
class Act:
    """A tensor computed at run time: glcnn tensor `name`, TF shape `shape` (batch 1)."""

    name: str
    shape: tuple

    @property
    def rank(self) -> int:
        return len(self.shape)


def converts(*ops, emits: tuple[str, ...], note: str = ""):
    """Register a converter for TF op types `ops`, emitting glcnn ops `emits`."""
    def wrap(fn):
        enter(CONVERTERS, dict.fromkeys(ops, fn), "the TF.js graph importer's CONVERTERS")
        EMITS.update(dict.fromkeys(ops, tuple(emits)))
        NOTES.update(dict.fromkeys(ops, note))
        return fn
    return wrap


def folds(*ops):
    """Register a numpy evaluation of TF op types `ops` on constant inputs."""
    def wrap(fn):
        enter(FOLDS, dict.fromkeys(ops, fn), "the TF.js graph importer's FOLDS")
        return fn
    return wrap


# --- activations ---------------------------------------------------------------------------
# TF activation (op type, or fused_ops name lower-cased) -> glcnn (op, attrs); Prelu and
# LeakyRelu take their slope from the node.
ACTIVATIONS = {
    "relu": ("Relu", {}), "relu6": ("Clip", {"min": 0.0, "max": 6.0}),
    "elu": ("Elu", {"alpha": 1.0}), "sigmoid": ("Sigmoid", {}), "tanh": ("Tanh", {}),
    "leakyrelu": ("LeakyRelu", {}), "prelu": ("PRelu", {}),
}
ACTIVATION_OPS = ("Relu", "Clip", "Elu", "Sigmoid", "LeakyRelu", "PRelu")  # fused ones
# What TF.js runs fused (tfjs-core fused_util: no tanh), lower-cased as TF.js reads them.
FUSED = ("relu", "relu6", "elu", "leakyrelu", "prelu", "sigmoid")


def activate(imp, node, x: Act, kind: str, alpha=None) -> Act:
    """Activation `kind` (a key of ACTIVATIONS) of `x`, named after `node`."""
    op, attrs = ACTIVATIONS[kind]
    weights = {}
    if op == "LeakyRelu":
        attrs = {"alpha": float(imp.attr(node, "alpha", imp.attr(node, "leakyrelu_alpha", 0.2)))}
    if op == "PRelu":
        weights = {"slope": imp.channel_vector(node, alpha, x, "alpha")}
    return imp.emit(node, op, [x.name], attrs, weights, rank=x.rank)


@converts("Relu", "Relu6", "Elu", "Sigmoid", "Tanh", "LeakyRelu",
          emits=("Relu", "Clip", "Elu", "Sigmoid", "Tanh", "LeakyRelu"),
          note="LeakyRelu: attr alpha; Relu6 → Clip(0, 6)")
def _activation(imp, node, args):
    return activate(imp, node, imp.act(node, args[0]), node.op.lower())


@converts("Prelu", emits=("PRelu",), note="alpha: one slope per channel")
def _prelu(imp, node, args):
    return activate(imp, node, imp.act(node, args[0]), "prelu", imp.const(node, args[1], "alpha"))


def fused_activation(imp, node, x: Act, fused: list, extra: list) -> Act:
    """The activation after a fused conv or matmul `x` (named "<node>/conv" or "/gemm" when an
    activation follows): `fused` is the node's fused_ops, `extra` its args after the bias."""
    kinds = [f.lower() for f in fused]
    if kinds and kinds[0] == "biasadd":
        kinds = kinds[1:]
    if len(kinds) > 1 or (kinds and kinds[0] not in FUSED):
        imp.fail(node, f"fused_ops {fused}: glcnn (as TF.js) fuses BiasAdd then one of "
                       f"{', '.join(FUSED)}")
    if not kinds:
        return x
    return activate(imp, node, x, kinds[0], extra[0] if extra else None)


# --- convolutions and matrix products -------------------------------------------------------
def _conv(imp, node, args, depthwise: bool, fused: bool) -> Act:
    x, w = imp.act(node, args[0]), imp.const(node, args[1], "filter", ndim=4)
    imp.nhwc(node)
    c, h, width = imp.glcnn_shape(x)
    kh, kw, ci, m = w.shape
    if ci != c:
        imp.fail(node, f"filter {list(w.shape)} does not match the {c} input channels of "
                       f"{list(x.shape)}")
    strides, dilations = imp.hw(node, "strides"), imp.hw(node, "dilations")
    attrs = {"strides": strides, "dilations": dilations, "group": c if depthwise else 1,
             "pads": imp.pads(node, (h, width), (kh, kw), strides, dilations)}
    if depthwise:
        weights = {"W": w.transpose(2, 3, 0, 1).reshape(c * m, 1, kh, kw)}
    else:
        weights = {"W": w.transpose(3, 2, 0, 1)}
    fused_ops = imp.attr(node, "fused_ops", []) if fused else []
    extra = list(args[2:])
    if fused_ops and fused_ops[0].lower() == "biasadd":
        weights["B"] = imp.channel_vector(node, extra.pop(0), None, "bias",
                                          weights["W"].shape[0])
    act = bool(fused_ops[1:] if weights.get("B") is not None else fused_ops)
    y = imp.emit(node, "Conv", [x.name], attrs, weights, rank=4, suffix="conv" if act else "")
    return fused_activation(imp, node, y, fused_ops, extra)


@converts("Conv2D", emits=("Conv",), note="strides, dilations, SAME/VALID/EXPLICIT padding")
def _conv2d(imp, node, args):
    return _conv(imp, node, args, depthwise=False, fused=False)


@converts("DepthwiseConv2dNative", "DepthwiseConv2d", emits=("Conv",),
          note="any channel multiplier; as Conv2D")
def _depthwise(imp, node, args):
    return _conv(imp, node, args, depthwise=True, fused=False)


@converts("_FusedConv2D", emits=("Conv", *ACTIVATION_OPS),
          note="fused_ops BiasAdd then Relu, Relu6, Elu, LeakyRelu, Sigmoid or Prelu "
               "(leakyrelu_alpha)")
def _fused_conv2d(imp, node, args):
    return _conv(imp, node, args, depthwise=False, fused=True)


@converts("FusedDepthwiseConv2dNative", emits=("Conv", *ACTIVATION_OPS),
          note="as _FusedConv2D")
def _fused_depthwise(imp, node, args):
    return _conv(imp, node, args, depthwise=True, fused=True)


@converts("Conv2DBackpropInput", emits=("ConvTranspose",),
          note="a transposed conv: output size from input_sizes, SAME/VALID/EXPLICIT as TF")
def _conv_backprop_input(imp, node, args):
    """The adjoint of the Conv2D whose input has `input_sizes`: an ONNX ConvTranspose with the
    forward conv's pads, and output_padding for the rows a strided VALID conv never reads."""
    sizes = [int(v) for v in np.ravel(imp.const(node, args[0], "input_sizes"))]
    w, x = imp.const(node, args[1], "filter", ndim=4), imp.act(node, args[2])
    imp.nhwc(node)
    kh, kw, co, ci = w.shape  # forward conv: co input channels, ci output channels
    c, h, width = imp.glcnn_shape(x)
    if ci != c or len(sizes) != 4 or sizes[3] != co or min(sizes[1:3]) < 1:
        imp.fail(node, f"filter {list(w.shape)} and input_sizes {sizes} do not fit "
                       f"{list(x.shape)}")
    strides, dilations = imp.hw(node, "strides"), imp.hw(node, "dilations")
    pads = imp.pads(node, sizes[1:3], (kh, kw), strides, dilations)
    extra = [n - ((i - 1) * s + (k - 1) * d + 1 - b - e) for n, i, k, s, d, b, e in zip(
        sizes[1:3], (h, width), (kh, kw), strides, dilations, pads[:2], pads[2:])]
    if any(not 0 <= p < max(s, d) for p, s, d in zip(extra, strides, dilations)):
        imp.fail(node, f"input_sizes {sizes} is not an output size of this transposed conv")
    attrs = {"strides": strides, "dilations": dilations, "group": 1, "pads": pads,
             "output_padding": extra}
    return imp.emit(node, "ConvTranspose", [x.name], attrs, {"W": w.transpose(3, 2, 0, 1)},
                    rank=4)


@converts("MatMul", "_FusedMatMul", emits=("Gemm", *ACTIVATION_OPS),
          note="vector (1, K) × constant (K, N); transpose_b; fused BiasAdd + activation")
def _matmul(imp, node, args):
    x, b = imp.act(node, args[0]), imp.const(node, args[1], "b", ndim=2)
    if imp.attr(node, "transpose_a", False) or not imp.is_vector(x):
        imp.fail(node, f"{list(x.shape)} × {list(b.shape)}: glcnn multiplies a (1, K) vector "
                       "by a constant matrix")
    trans = int(bool(imp.attr(node, "transpose_b", False)))
    k, n = b.shape[::-1] if trans else b.shape
    if k != imp.glcnn_shape(x)[0]:
        imp.fail(node, f"{list(x.shape)} × {list(b.shape)}: sizes do not match")
    fused_ops = imp.attr(node, "fused_ops", []) if node.op == "_FusedMatMul" else []
    extra, weights = list(args[2:]), {"B": b}
    if fused_ops and fused_ops[0].lower() == "biasadd":
        weights["C"] = imp.channel_vector(node, extra.pop(0), None, "bias", n)
    act = bool(fused_ops[1:] if "C" in weights else fused_ops)
    y = imp.emit(node, "Gemm", [x.name], {"transB": trans}, weights, rank=2,
                 suffix="gemm" if act else "")
    return fused_activation(imp, node, y, fused_ops, extra)


@converts("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", emits=("BatchNormalization",),
          note="inference: scale, offset, mean, variance, epsilon")
def _batchnorm(imp, node, args):
    x = imp.act(node, args[0])
    imp.nhwc(node)
    c = imp.glcnn_shape(x)[0]
    scale, offset, mean, var = (imp.channel_vector(node, v, None, what, c) for v, what in
                                zip(args[1:5], ("scale", "offset", "mean", "variance")))
    return imp.emit(node, "BatchNormalization", [x.name],
                    {"epsilon": float(imp.attr(node, "epsilon", 1e-4))},
                    {"scale": scale, "B": offset, "mean": mean, "var": var}, rank=x.rank)
