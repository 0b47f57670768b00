"""Converters of the ONNX importer for the image ops: convolutions, normalisation, pooling,
resampling, padding, slicing, joining. See onnx_ops.py for the conventions."""

import numpy as np

from ..errors import quote
from .onnx_layout import act_as, glcnn_axis
from .onnx_ops import converts, fail, no_extra_outputs, only, weight


# --- convolutions and normalisation ----------------------------------------------------------
def same_pads(imp, node, attrs, kernel) -> list[int]:
    """Explicit (top, left, bottom, right) pads for `auto_pad` (removed from `attrs`)."""
    mode = attrs.pop("auto_pad", "NOTSET")
    if mode == "NOTSET":
        return [int(p) for p in attrs.get("pads", (0, 0, 0, 0))]
    if mode == "VALID":
        return [0, 0, 0, 0]
    if mode not in ("SAME_UPPER", "SAME_LOWER"):
        fail(imp, node, f"auto_pad={quote(mode)} is not supported")
    if any(d != 1 for d in attrs.get("dilations", (1, 1))):  # onnxruntime refuses it too
        fail(imp, node, f"auto_pad={mode} with dilations {attrs['dilations']}: ONNX "
                        "implementations disagree on the pads; give explicit pads")
    begin, end = [], []
    sizes = imp.shape(node.input[0])[2:]
    for size, k, s, d in zip(sizes, kernel, attrs.get("strides", (1, 1)),
                             attrs.get("dilations", (1, 1))):
        total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
        begin.append(total - total // 2 if mode == "SAME_LOWER" else total // 2)
        end.append(total - begin[-1])
    return begin + end


_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _kernel(imp, node, attrs) -> np.ndarray:
    """The weight W, checked 2-D and consistent with kernel_shape (removed from `attrs`)."""
    w = weight(imp, node, 1, "W")
    if w is None:
        fail(imp, node, "needs the weight W")
    kernel = list(attrs.pop("kernel_shape", w.shape[2:]))
    if w.ndim != 4 or kernel != list(w.shape[2:]):
        fail(imp, node, f"weight W {w.shape} with kernel_shape {kernel}: only 2-D "
                        "convolutions are supported")
    return w


@converts("Conv")
def _conv(imp, node, attrs):
    """Any kernel, strides, dilations, group, pads or auto_pad; constant W and B."""
    attrs = only(imp, node, attrs, _CONV_ATTRS)
    w = _kernel(imp, node, attrs)
    attrs["pads"] = same_pads(imp, node, attrs, w.shape[2:])
    imp.emit(node, "Conv", [imp.act(node, 0)], attrs, {"W": w, "B": weight(imp, node, 2, "B")})


def transpose_pads(imp, node, attrs, w) -> None:
    """Resolve ConvTranspose's `output_shape` / `auto_pad` into pads and output_padding."""
    mode, target = attrs.pop("auto_pad", "NOTSET"), attrs.pop("output_shape", None)
    if mode == "VALID":
        attrs["pads"] = [0, 0, 0, 0]
    if target is None and mode not in ("SAME_UPPER", "SAME_LOWER"):
        return
    sizes = imp.shape(node.input[0])[2:]
    strides, dilations = attrs.get("strides", (1, 1)), attrs.get("dilations", (1, 1))
    extra = list(attrs.get("output_padding", (0, 0)))
    target = list(target)[-2:] if target is not None else [n * s for n, s in zip(sizes, strides)]
    begin, end = [], []
    for i, (n, k, s, d) in enumerate(zip(sizes, w.shape[2:], strides, dilations)):
        total = s * (n - 1) + extra[i] + (k - 1) * d + 1 - target[i]
        begin.append(total // 2 if mode == "SAME_UPPER" else total - total // 2)
        end.append(total - begin[-1])
        if end[i] < 0:  # a larger output than the kernel covers: extra rows at the end
            extra[i], end[i] = extra[i] - end[i], 0
    if min(begin) < 0:
        fail(imp, node, f"output_shape {target} needs negative leading pads {begin}")
    attrs["pads"], attrs["output_padding"] = begin + end, extra


@converts("ConvTranspose")
def _conv_transpose(imp, node, attrs):
    """As Conv, plus output_padding; output_shape and auto_pad become pads."""
    attrs = only(imp, node, attrs, _CONV_ATTRS + ("output_padding", "output_shape"))
    w = _kernel(imp, node, attrs)
    transpose_pads(imp, node, attrs, w)
    imp.emit(node, "ConvTranspose", [imp.act(node, 0)], attrs,
             {"W": w, "B": weight(imp, node, 2, "B")})


@converts("BatchNormalization")
def _batchnorm(imp, node, attrs):
    """Inference form; folded into the Conv or ConvTranspose before it."""
    if attrs.get("training_mode", 0) or attrs.get("spatial", 1) != 1:
        fail(imp, node, "only inference mode (training_mode=0, spatial=1) is supported")
    no_extra_outputs(imp, node, "training statistics")
    attrs = only(imp, node, attrs, ("epsilon", "momentum", "training_mode", "spatial",
                                    "is_test", "consumed_inputs"))
    weights = {key: weight(imp, node, i + 1, key)
               for i, key in enumerate(("scale", "B", "mean", "var"))}
    imp.emit(node, "BatchNormalization", [imp.act(node, 0)],
             {"epsilon": attrs.get("epsilon", 1e-5)}, weights)


@converts("InstanceNormalization")
def _instancenorm(imp, node, attrs):
    """Per-channel statistics over H and W, then scale and bias."""
    attrs = only(imp, node, attrs, ("epsilon",))
    weights = {"scale": weight(imp, node, 1, "scale"), "B": weight(imp, node, 2, "B")}
    imp.emit(node, "InstanceNormalization", [imp.act(node, 0)], attrs, weights)


# --- pooling and reductions --------------------------------------------------------------------
_POOL_ATTRS = ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides")


@converts("MaxPool", "AveragePool")
def _pool(imp, node, attrs):
    """Attributes pass on as they are: the glcnn pools resolve auto_pad themselves."""
    no_extra_outputs(imp, node, "argmax indices")
    extra = ("count_include_pad",) if node.op_type == "AveragePool" else ("storage_order",)
    attrs = only(imp, node, attrs, _POOL_ATTRS + extra)
    attrs.pop("storage_order", None)  # only orders the indices output
    if len(attrs.get("kernel_shape", ())) != 2:
        fail(imp, node, f"kernel_shape {attrs.get('kernel_shape')}: only 2-D pooling")
    imp.emit(node, node.op_type, [imp.act(node, 0)], attrs)


@converts("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(imp, node, attrs):
    """The mean or max of each channel: (1, C, 1, 1)."""
    imp.emit(node, node.op_type, [imp.act(node, 0)], only(imp, node, attrs, ()))


@converts("ReduceMean", "ReduceMax", "ReduceSum")
def _reduce(imp, node, attrs):
    """Axes as glcnn's NCHW axes (onnx_layout.glcnn_axis: any rank); axes of size 1 (the
    batch) reduce nothing and are dropped. keepdims=0 must leave the glcnn shape keepdims=1
    would (e.g. (1, L, C) → (1, L) over the channels of a (L, 1, C) sequence)."""
    attrs = only(imp, node, attrs, ("axes", "keepdims", "noop_with_empty_axes"))
    axes = weight(imp, node, 1, "axes")  # opset 18 (ReduceSum: 13): an input
    axes = axes.tolist() if axes is not None else attrs.get("axes", [])
    if not axes and attrs.pop("noop_with_empty_axes", 0):
        imp.alias(node, imp.act(node, 0))
        return
    x, dims = node.input[0], imp.shape(node.input[0])
    rank, keepdims = len(dims), int(attrs.get("keepdims", 1))
    if not all(-rank <= int(a) < rank for a in axes):  # onnxruntime refuses them too
        fail(imp, node, f"axis out of range in axes {quote(axes)} for rank {rank}")
    axes = sorted({int(a) % rank for a in axes or range(rank)})
    glcnn_axes = sorted({glcnn_axis(imp, node, x, a) for a in axes if dims[a] != 1})
    if not glcnn_axes and keepdims:
        imp.alias(node, imp.act(node, 0))  # the mean, max or sum of one value each
        return
    shape = list(imp.glcnn_shape(x, repr(x)))
    for axis in glcnn_axes:
        shape[axis - 1] = 1
    imp.emit(node, node.op_type, [imp.act(node, 0)], {"axes": glcnn_axes or [1]})
    out = imp.glcnn_shape(node.output[0], imp.output_of(node))
    if tuple(shape) != out:
        fail(imp, node, f"keepdims=0 over axes {axes} of {list(dims)} leaves glcnn shape "
                        f"{out}, not the reduced {tuple(shape)}; not supported")


# --- resampling, padding, slicing, joining -------------------------------------------------
_RESIZE_ATTRS = ("antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a",
                 "exclude_outside", "extrapolation_value", "keep_aspect_ratio_policy", "mode",
                 "nearest_mode")


def _spatial(imp, node, values, axes, fill, what: str) -> list:
    """Per-axis `values` (for `axes`, default all four) as the (H, W) pair; N and C must
    keep `fill` (1 for scales, the input's N and C for sizes)."""
    values = np.asarray(values).reshape(-1).tolist()
    axes = list(range(4)) if axes is None else [int(a) % 4 for a in axes]
    full = list(fill)
    for axis, value in zip(axes, values):
        full[axis] = value
    if len(values) != len(axes) or full[:2] != list(fill[:2]):
        fail(imp, node, f"{what} {quote(values)} must leave the batch and channel axes unchanged")
    return full[2:]


def _check_align_corners(imp, node, attrs, sizes):
    """align_corners divides by the output length minus 1; from a scale giving a fractional
    length, the ONNX reference uses in·s and onnxruntime floor(in·s): refuse the ambiguity."""
    if attrs["coordinate_transformation_mode"] != "align_corners":
        return
    lengths = [n * s for n, s in zip(sizes, attrs["scales"])]
    if any(abs(n - round(n)) > 1e-6 for n in lengths):
        fail(imp, node, f"align_corners with scales {attrs['scales']} gives fractional output "
                        f"lengths {lengths}, where ONNX implementations disagree; give sizes")


@converts("Resize")
def _resize(imp, node, attrs):
    """Constant scales / sizes become attributes [h, w]; the defaults of the model's opset
    are written out (Resize-10 knew only asymmetric coordinates, floor for nearest)."""
    attrs = only(imp, node, attrs, _RESIZE_ATTRS)
    axes, dims = attrs.pop("axes", None), imp.shape(node.input[0])
    old = imp.opset < 11
    defaults = {"mode": "nearest",
                "coordinate_transformation_mode": "asymmetric" if old else "half_pixel",
                "nearest_mode": "floor" if old else "round_prefer_floor"}
    attrs = defaults | attrs
    scales = weight(imp, node, 1 if old else 2, "scales")
    sizes = None if old else weight(imp, node, 3, "sizes")
    if sizes is not None and sizes.size:
        attrs["sizes"] = [int(v) for v in _spatial(imp, node, sizes, axes, dims, "sizes")]
    elif scales is not None and scales.size:
        scales = _spatial(imp, node, scales, axes, (1,) * 4, "scales")
        attrs["scales"] = [float(v) for v in scales]
        _check_align_corners(imp, node, attrs, dims[2:])
    else:
        fail(imp, node, "needs constant scales or sizes")
    imp.emit(node, "Resize", [imp.act(node, 0)], attrs)


@converts("Upsample")
def _upsample(imp, node, attrs):
    """Upsample (deprecated): scales is an attribute up to opset 8, an input from 9."""
    attrs = only(imp, node, attrs, ("mode", "scales"))
    scales = attrs["scales"] if "scales" in attrs else weight(imp, node, 1, "scales")
    mode = attrs.get("mode", "nearest")
    attrs = {"mode": "linear" if mode == "bilinear" else mode,
             "scales": [float(v) for v in _spatial(imp, node, scales, None, (1,) * 4, "scales")]}
    imp.emit(node, "Upsample", [imp.act(node, 0)], attrs)


@converts("Pad")
def _pad(imp, node, attrs):
    """pads (8 values, NCHW begins then ends) and value become attributes."""
    attrs = only(imp, node, attrs, ("mode", "pads", "value"))  # pads, value: opset < 11
    pads = weight(imp, node, 1, "pads")
    pads = pads.tolist() if pads is not None else attrs.get("pads", [0] * 8)
    value, axes = weight(imp, node, 2, "constant_value"), weight(imp, node, 3, "axes")
    rank = len(imp.shape(node.input[0]))
    axes = list(range(rank)) if axes is None else [int(a) % rank for a in axes.tolist()]
    full = [0] * (2 * rank)
    for i, axis in enumerate(axes):
        full[axis], full[axis + rank] = int(pads[i]), int(pads[i + len(axes)])
    if rank != 4:
        fail(imp, node, f"padding a rank-{rank} tensor is not supported")
    attrs.update(pads=full, mode=attrs.get("mode", "constant"))
    attrs["value"] = float(value) if value is not None and value.size else \
        float(attrs.get("value", 0.0))
    imp.emit(node, "Pad", [imp.act(node, 0)], attrs)


@converts("Concat")
def _concat(imp, node, attrs):
    """Along the glcnn axis holding ONNX `axis`; rank-3 inputs all in the first's layout."""
    attrs = only(imp, node, attrs, ("axis",))
    lc = node.input[0] in imp.channels_last
    inputs = [act_as(imp, node, i, lc) for i in range(len(node.input))]
    axis = glcnn_axis(imp, node, node.input[0], int(attrs["axis"]))
    imp.emit(node, "Concat", inputs, {"axis": axis}, channels_last=lc)


@converts("DepthToSpace")
def _depth_to_space(imp, node, attrs):
    """Pixel shuffle in DCR (ONNX's default) or CRD mode."""
    attrs = only(imp, node, attrs, ("blocksize", "mode"))
    imp.emit(node, "DepthToSpace", [imp.act(node, 0)], {"mode": "DCR"} | attrs)
