"""Converters of the TF.js graph importer for elementwise, pooling, resizing, padding,
concatenation and reductions (the element moves: tfjs_graph_views), and the numpy folds
of ops on constants (shape arithmetic: Shape, StridedSlice, Pack, ...). Registered in
tfjs_graph_ops' tables.

Axes: a TF axis a of an NHWC tensor (1, H, W, C) is glcnn's NCHW axis (0, 2, 3, 1)[a]; of a
sequence (1, L, C) (glcnn (C, 1, L)), L is glcnn's W and C its channels; of a vector (1, F), F
is glcnn's channel axis.
"""

import numpy as np

from ..errors import UnsupportedOpError, quote
from .tfjs_graph_ops import Act, converts, folds

NCHW_AXIS = (0, 2, 3, 1)  # TF NHWC axis -> glcnn NCHW axis
BINARY = {"Add": "Add", "AddV2": "Add", "BiasAdd": "Add", "Sub": "Sub", "Mul": "Mul",
          "RealDiv": "Div", "Div": "Div"}
NUMPY = {"Neg": np.negative, "Sqrt": np.sqrt, "Rsqrt": lambda x: 1 / np.sqrt(x),
         "Square": np.square, "Add": np.add, "AddV2": np.add, "BiasAdd": np.add, "Sub": np.subtract,
         "Mul": np.multiply, "RealDiv": np.divide, "Div": np.divide, "Maximum": np.maximum,
         "Minimum": np.minimum}


# --- elementwise ----------------------------------------------------------------------------
@converts(*BINARY, emits=("Add", "Sub", "Mul", "Div"),
          note="two tensors (TF broadcasting of (1,H,W,C), (1,1,1,C), (1,C)), or a tensor and "
               "a constant of any shape that broadcasts to it")
def _binary(imp, node, args):
    op = BINARY[node.op]
    a, b = args
    if isinstance(a, Act) and isinstance(b, Act):
        shape = imp.broadcast(node, a.shape, b.shape)
        return imp.emit(node, op, [a.name, b.name], {}, {}, rank=len(shape))
    x, c = (a, b) if isinstance(a, Act) else (b, a)
    swap = {"swap": 1} if x is b and op in ("Sub", "Div") else {}
    return imp.emit(node, op, [x.name], swap, {"B": imp.operand(node, c, x)}, rank=x.rank)


UNARY = {"Neg": ("Mul", {}, -1.0), "Sqrt": ("Sqrt", {}, None),
         "Rsqrt": ("Pow", {"exponent": -0.5}, None), "Square": ("Pow", {"exponent": 2.0}, None)}


@converts(*UNARY, emits=("Mul", "Sqrt", "Pow"),
          note="Neg: x·(−1); Rsqrt, Square: Pow (−0.5, 2); of tensors of any rank")
def _unary(imp, node, args):
    x = imp.act(node, args[0])
    op, attrs, factor = UNARY[node.op]
    weights = {"B": np.full(1, factor, np.float32)} if factor is not None else {}
    return imp.emit(node, op, [x.name], attrs, weights, rank=x.rank)


@converts("AddN", emits=("Add",), note="tensors: a chain of two-input Adds")
def _add_n(imp, node, args):
    xs = [imp.act(node, a) for a in args]
    if len(xs) == 1:
        return xs[0]
    y = xs[0]
    for i, x in enumerate(xs[1:], start=1):
        shape = imp.broadcast(node, y.shape, x.shape)
        y = imp.emit(node, "Add", [y.name, x.name], {}, {}, rank=len(shape),
                     suffix="" if i == len(xs) - 1 else f"add{i}")
    return y


@converts("Maximum", "Minimum", "ClipByValue", emits=("Clip", "Max", "Min"),
          note="two tensors (broadcast as Add): Max / Min; with a constant scalar (either "
               "side): Clip")
def _clip(imp, node, args):
    if node.op in ("Maximum", "Minimum") and all(isinstance(a, Act) for a in args):
        a, b = args
        shape = imp.broadcast(node, a.shape, b.shape)
        return imp.emit(node, node.op[:3], [a.name, b.name], {}, {}, rank=len(shape))
    if node.op in ("Maximum", "Minimum"):  # max(c, x) = max(x, c)
        x, c = args if isinstance(args[0], Act) or not isinstance(args[1], Act) else args[::-1]
        x, bounds = imp.act(node, x), [imp.scalar(node, c, "bound")]
    else:
        x, bounds = imp.act(node, args[0]), [imp.scalar(node, v, "bound") for v in args[1:]]
    attrs = {"Maximum": {"min": bounds[0]}, "Minimum": {"max": bounds[0]}}.get(
        node.op, {"min": bounds[0], "max": bounds[-1]})
    return imp.emit(node, "Clip", [x.name], attrs, {}, rank=x.rank)


@converts("Softmax", emits=("Softmax",), note="over the last (channel) axis")
def _softmax(imp, node, args):
    x = imp.act(node, args[0])
    return imp.emit(node, "Softmax", [x.name], {"axis": 1}, {}, rank=x.rank)


# --- reductions and pooling ---------------------------------------------------------------
REDUCE = {"Mean": "ReduceMean", "Max": "ReduceMax", "Sum": "ReduceSum"}


@converts(*REDUCE, emits=tuple(REDUCE.values()),
          note="over H and W (keep_dims or not: (1,1,1,C) / (1,C)), or one of H, W, C with "
               "keep_dims")
def _reduce(imp, node, args):
    x = imp.act(node, args[0])
    axes = sorted({int(a) % x.rank for a in np.ravel(imp.const(node, args[1], "axis"))})
    keep = bool(imp.attr(node, "keep_dims", False))
    spatial = x.rank == 4 and axes == [1, 2]
    if not axes or 0 in axes or (x.rank == 4 and len(axes) > 1 and not spatial) or \
            (not keep and not spatial):
        imp.fail(node, f"reduction over axes {axes} of {list(x.shape)} (keep_dims={keep}): "
                       "glcnn reduces over H and W, or over one axis keeping it")
    glcnn_axes = [NCHW_AXIS[a] for a in axes] if x.rank == 4 else [1]
    y = imp.emit(node, REDUCE[node.op], [x.name], {"axes": sorted(glcnn_axes), "keepdims": 1},
                 {}, rank=x.rank)
    return y if keep else Act(y.name, (1, y.shape[3]))


@converts("AvgPool", "MaxPool", emits=("AveragePool", "MaxPool"),
          note="SAME (TF's pads, the odd one at the end; padding not counted) / VALID")
def _pool(imp, node, args):
    x = imp.act(node, args[0])
    imp.nhwc(node)
    kernel, strides = imp.hw(node, "ksize"), imp.hw(node, "strides")
    _, h, w = imp.glcnn_shape(x)
    attrs = {"kernel_shape": kernel, "strides": strides,
             "pads": imp.pads(node, (h, w), kernel, strides, [1, 1])}
    op = "AveragePool" if node.op == "AvgPool" else "MaxPool"
    return imp.emit(node, op, [x.name], attrs, {}, rank=4)


# --- padding, resizing, channels --------------------------------------------------------------
@converts("Pad", "PadV2", "MirrorPad", emits=("Pad",),
          note="H and W, and C with a constant; constant (PadV2's value), MirrorPad REFLECT "
               "and SYMMETRIC")
def _pad(imp, node, args):
    x = imp.act(node, args[0])
    pads = imp.const(node, args[1], "paddings").astype(np.int64)
    if x.rank != 4 or pads.shape != (4, 2) or pads[0].any() or pads.min() < 0 or \
            pads[3].any() and node.op == "MirrorPad":
        imp.fail(node, f"paddings {pads.tolist()} of {list(x.shape)}: glcnn pads H and W, "
                       "and C with a constant")
    attrs = {"pads": [0, int(pads[3, 0]), int(pads[1, 0]), int(pads[2, 0]), 0,
                      int(pads[3, 1]), int(pads[1, 1]), int(pads[2, 1])]}
    if node.op == "MirrorPad":
        mode = imp.attr(node, "mode", "")
        if mode not in ("REFLECT", "SYMMETRIC"):
            imp.fail(node, f"mode {mode!r}: expected REFLECT or SYMMETRIC")
        attrs["mode"] = mode.lower()
    elif node.op == "PadV2":
        attrs["value"] = imp.scalar(node, args[2], "constant_values")
    return imp.emit(node, "Pad", [x.name], attrs, {}, rank=4)


RESIZE = {"ResizeBilinear": "linear", "ResizeNearestNeighbor": "nearest"}


@converts(*RESIZE, emits=("Resize",),
          note="align_corners, half_pixel_centers or neither, as TF.js computes them")
def _resize(imp, node, args):
    x = imp.act(node, args[0])
    size = [int(v) for v in np.ravel(imp.const(node, args[1], "size"))]
    corners = bool(imp.attr(node, "align_corners", False))
    half = bool(imp.attr(node, "half_pixel_centers", False))
    if corners and half or len(size) != 2 or min(size) < 1 or x.rank != 4:
        imp.fail(node, f"size {size}, align_corners={corners}, half_pixel_centers={half} "
                       f"on {list(x.shape)}: unsupported")
    mode = RESIZE[node.op]
    attrs = {"mode": mode, "sizes": size}
    if mode == "linear":
        attrs["coordinate_transformation_mode"] = ("align_corners" if corners else
                                                   "half_pixel" if half else "asymmetric")
    else:  # TF.js: Math.round with align_corners, else floor
        attrs["coordinate_transformation_mode"] = ("align_corners" if corners else
                                                   "tf_half_pixel_for_nn" if half else
                                                   "asymmetric")
        attrs["nearest_mode"] = "round_prefer_ceil" if corners else "floor"
    return imp.emit(node, "Resize", [x.name], attrs, {}, rank=4)


@converts("DepthToSpace", emits=("DepthToSpace",), note="NHWC (glcnn's DCR mode)")
def _depth_to_space(imp, node, args):
    x = imp.act(node, args[0])
    imp.nhwc(node)
    return imp.emit(node, "DepthToSpace", [x.name],
                    {"blocksize": int(imp.attr(node, "block_size", 0)), "mode": "DCR"}, {},
                    rank=4)


@converts("ConcatV2", emits=("Concat",),
          note="tensors along any axis but the batch ((1,L,C): L or C; (1,H,W,C): H, W or C)")
def _concat(imp, node, args):
    xs, axis = [imp.act(node, v) for v in args[:-1]], imp.scalar(node, args[-1], "axis")
    rank = xs[0].rank
    axis = int(axis) % rank if -rank <= int(axis) < rank else 0
    if any(x.rank != rank for x in xs) or axis == 0:
        imp.fail(node, f"axis {int(axis)} of {[list(x.shape) for x in xs]}: glcnn "
                       "concatenates tensors of one rank along an axis but the batch")
    glcnn_axis = 1 if axis == rank - 1 else {3: (0, 3), 4: NCHW_AXIS}[rank][axis]
    return imp.emit(node, "Concat", [x.name for x in xs], {"axis": glcnn_axis}, {}, rank=rank)


@converts("Shape", emits=(), note="of a tensor: a constant (its TF shape, batch 1)")
def _shape(imp, node, args):
    return np.asarray(args[0].shape if isinstance(args[0], Act) else np.shape(args[0]),
                      np.float32)


@converts("Identity", "StopGradient", "Snapshot", "EnsureShape", emits=(), note="no-ops")
def _identity(imp, node, args):
    return args[0]


# --- numpy folds of constant inputs ---------------------------------------------------------
def _fold_binary(node, args, attr):
    return np.asarray(NUMPY[node.op](*args[:2]), np.float32)


for _op in NUMPY:
    folds(_op)(_fold_binary)


@folds("Identity", "StopGradient", "Snapshot", "Cast", "EnsureShape")
def _fold_identity(node, args, attr):
    return args[0]


@folds("Reshape")
def _fold_reshape(node, args, attr):
    return args[0].reshape([int(d) for d in np.ravel(args[1])])


@folds("Squeeze")
def _fold_squeeze(node, args, attr):
    dims = tuple(int(d) for d in attr("squeeze_dims", []))
    return np.squeeze(args[0], dims or None)


@folds("ExpandDims")
def _fold_expand(node, args, attr):
    return np.expand_dims(args[0], int(np.ravel(args[1])[0]))


@folds("ConcatV2")
def _fold_concat(node, args, attr):
    return np.concatenate(args[:-1], int(np.ravel(args[-1])[0]))


@folds("Pack")
def _fold_pack(node, args, attr):
    return np.stack(args, int(attr("axis", 0)))


@folds("Transpose")
def _fold_transpose(node, args, attr):
    return np.transpose(args[0], [int(p) for p in np.ravel(args[1])])


@folds("Prod")
def _fold_prod(node, args, attr):
    axes = tuple(int(a) for a in np.ravel(args[1]))
    return np.prod(args[0], axes, keepdims=bool(attr("keep_dims", False))).astype(np.float32)


@folds("StridedSlice")
def _fold_strided_slice(node, args, attr):
    x, (begin, end, strides) = args[0], (np.ravel(a).astype(np.int64) for a in args[1:4])
    if attr("ellipsis_mask", 0) or attr("new_axis_mask", 0):
        raise UnsupportedOpError(f"StridedSlice {quote(node.name)}: ellipsis_mask and "
                                 "new_axis_mask are not supported")
    index = []
    for i in range(len(begin)):
        b, e = (None if attr("begin_mask", 0) >> i & 1 else int(begin[i]),
                None if attr("end_mask", 0) >> i & 1 else int(end[i]))
        index.append(b if attr("shrink_axis_mask", 0) >> i & 1 else slice(b, e, int(strides[i])))
    return np.asarray(x[tuple(index)], np.float32)

