"""TF.js importer converters for layers that move values around rather than mix channels:
pooling, resizing, padding and cropping, merges (Add, Multiply, Concatenate), Dense,
Flatten and Reshape (see glcnn/importers/tfjs_layers.py for the conventions).

Axes: a merge or concatenation must run along the channels (the last TF axis of a
channels_last map, axis 1 of a channels_first map or of a vector). Flatten and Reshape are
judged by where each value lands: `tf_indices` lays glcnn's flat indices out in TF's array
shape, so a Reshape is a no-op exactly when reshaping that array keeps glcnn's order, and a
Flatten's TF order is the flattened array itself (kept as `Tensor.order` for the Dense).
"""

import math

import numpy as np

from ..errors import quote
from ..limits import memory_budget
from ..ops.concat import MAX_INPUTS
from .tfjs_layers import ACTIVATION_OPS, bias, converts, finish, pair, spatial_pads
from .tfjs_tensor import PERMUTATION_GEMM_MAX, Tensor
from .tfjs_topology import integers

# Most values whose TF order is laid out as an index array (int64: 128 MiB, plus copies).
MAX_REORDERED = 1 << 24


def tf_indices(imp, call, x: Tensor, shape: tuple | None = None) -> np.ndarray:
    """glcnn's flat index of every value of `x`, in an array of x's TF shape (no batch).

    Args:
        shape: a (C, H, W) to use instead of x's own (`_flatten` asks a small stand-in
            whether the order is the identity).
    Raises:
        UnsupportedOpError: more than MAX_REORDERED values (or than the memory budget
            allows), checked before anything is allocated.
    """
    c, h, w = shape or imp.shape(x)
    if c * h * w > min(MAX_REORDERED, memory_budget() // 8):
        imp.fail(call, f"a tensor of {c * h * w:,} values is too large to reorder (at most "
                       f"{MAX_REORDERED:,})")
    index = np.arange(c * h * w).reshape(c, h, w)
    if x.rank == 2:
        return index.reshape(c)
    return index.transpose(1, 2, 0) if imp.layout == "NHWC" else index


# --- pooling and resizing -----------------------------------------------------------------
def _pool(imp, call, op: str) -> Tensor:
    x = imp.act(call)
    kernel = pair(call.config.get("pool_size", 2), "pool_size")
    strides = pair(call.config.get("strides") or kernel, "strides")
    attrs = {"kernel_shape": list(kernel), "strides": list(strides),
             "pads": spatial_pads(imp, call, x, kernel, strides, (1, 1))}
    if op == "AveragePool":
        attrs["count_include_pad"] = 0  # TF averages over the taps inside the image
    return Tensor(imp.emit(call, op, [x.name], attrs), 4)


@converts("MaxPooling2D", emits=("MaxPool",))
def _max_pool(imp, call):
    """pool_size, strides, same or valid padding."""
    return _pool(imp, call, "MaxPool")


@converts("AveragePooling2D", emits=("AveragePool",))
def _average_pool(imp, call):
    """As MaxPooling2D; same padding averages over the window's valid pixels (TF's rule)."""
    return _pool(imp, call, "AveragePool")


@converts("GlobalAveragePooling2D", "GlobalMaxPooling2D",
          emits=("GlobalAveragePool", "GlobalMaxPool"))
def _global_pool(imp, call):
    """(C, H, W) -> (C, 1, 1): a (1, C) vector, or (1, 1, 1, C) with keepdims."""
    op = "GlobalAveragePool" if "Average" in call.cls else "GlobalMaxPool"
    x = imp.act(call)
    return Tensor(imp.emit(call, op, [x.name]), 4 if call.config.get("keepdims") else 2)


@converts("UpSampling2D", emits=("Resize",))
def _upsampling(imp, call):
    """size (integer factors), interpolation nearest or bilinear."""
    interpolation = call.config.get("interpolation", "nearest")
    if interpolation not in ("nearest", "bilinear"):
        imp.fail(call, f"interpolation={quote(interpolation)} is not supported (nearest, bilinear)")
    sh, sw = pair(call.config.get("size", 2), "size")
    attrs = {"mode": "nearest" if interpolation == "nearest" else "linear",
             "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor",
             "scales": [float(sh), float(sw)]}
    return Tensor(imp.emit(call, "Resize", [imp.act(call).name], attrs), 4)


def _two_pairs(value, key: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """((top, bottom), (left, right)) from n, (h, w) or ((t, b), (l, r))."""
    if isinstance(value, int):
        return (value, value), (value, value)
    return pair(value[0], key, 0), pair(value[1], key, 0)


@converts("ZeroPadding2D", emits=("Pad",))
def _zero_padding(imp, call):
    """Symmetric or per-side zero padding of H and W."""
    (t, b), (left, r) = _two_pairs(call.config.get("padding", 1), "padding")
    attrs = {"pads": [0, 0, t, left, 0, 0, b, r], "mode": "constant", "value": 0.0}
    return Tensor(imp.emit(call, "Pad", [imp.act(call).name], attrs), 4)


@converts("Cropping2D", emits=("Slice",))
def _cropping(imp, call):
    """Per-side cropping of H and W."""
    x = imp.act(call)
    (t, b), (left, r) = _two_pairs(call.config.get("cropping", 0), "cropping")
    _, h, w = imp.shape(x)
    attrs = {"starts": [t, left], "ends": [h - b, w - r], "axes": [2, 3]}
    return Tensor(imp.emit(call, "Slice", [x.name], attrs), 4)


# --- merges ---------------------------------------------------------------------------------
def _merge(imp, call, op: str) -> Tensor:
    """A chain of binary `op`s; per-channel operands (C, 1, 1) last, as glcnn broadcasts its
    second operand only."""
    xs = [imp.act(call, i) for i in range(len(call.inputs))]
    if len({x.rank for x in xs}) > 1:
        imp.fail(call, f"inputs of ranks {[x.rank for x in xs]}; glcnn merges equal ranks")
    xs.sort(key=lambda x: imp.shape(x)[1:] == (1, 1))
    name = xs[0].name
    for i, x in enumerate(xs[1:], 1):
        name = imp.emit(call, op, [name, x.name], suffix="" if i == len(xs) - 1 else f"{i}")
    return Tensor(name, xs[0].rank)


@converts("Add", emits=("Add",))
def _add(imp, call):
    """Two or more tensors of one shape."""
    return _merge(imp, call, "Add")


@converts("Multiply", emits=("Mul",))
def _multiply(imp, call):
    """Two or more tensors of one shape."""
    return _merge(imp, call, "Mul")


@converts("Concatenate", emits=("Concat",))
def _concatenate(imp, call):
    """Along the channel axis."""
    xs = [imp.act(call, i) for i in range(len(call.inputs))]
    for x in xs:
        imp.channel_axis(call, x, call.config.get("axis", -1))
    names, part = [x.name for x in xs], 0
    while len(names) > MAX_INPUTS:  # glcnn's Concat reads up to 8 tensors: chain them
        head = imp.emit(call, "Concat", names[:MAX_INPUTS], {"axis": 1}, suffix=f"part{part}")
        names, part = [head, *names[MAX_INPUTS:]], part + 1
    return Tensor(imp.emit(call, "Concat", names, {"axis": 1}), xs[0].rank)


# --- vectors --------------------------------------------------------------------------------
@converts("Dense", emits=("Conv", "Gemm", *ACTIVATION_OPS))
def _dense(imp, call):
    """Gemm on a vector (kernel rows permuted to glcnn's order after a Flatten); a 1×1 Conv
    on a channels_last map (Dense acts on the last axis)."""
    x, units = imp.act(call, 0, keep_order=True), integers(call.config["units"], "units", 1)[0]
    k = imp.shape(x)[0]
    kernel = imp.weight(call, "kernel", (k, units))
    if x.rank == 4:
        if imp.layout != "NHWC":
            imp.fail(call, "Dense on a channels_first map acts on W; not supported")
        return finish(imp, call, "Conv", x, {}, {"W": kernel.T[:, :, None, None],
                                                 "B": bias(imp, call, units)})
    if x.order is not None:
        rows = np.empty_like(kernel)
        rows[x.order] = kernel  # TF row i multiplies glcnn value order[i]
        kernel = rows
    return finish(imp, call, "Gemm", Tensor(x.name, 2), {}, {"B": kernel,
                                                             "C": bias(imp, call, units)})


@converts("Flatten", emits=("Flatten",))
def _flatten(imp, call):
    """glcnn's Flatten (C, H, W order); the TF order travels with the vector."""
    x = imp.act(call, 0, keep_order=True)
    if x.rank == 2:
        return x
    name = imp.emit(call, "Flatten", [x.name], {"axis": 1})
    # A transposition keeps the flat order exactly when its axes longer than 1 keep theirs,
    # so a stand-in with every side cut to 2 tells, without an index array of x's size.
    stand_in = _flat_order(imp, call, x, tuple(min(d, 2) for d in imp.shape(x)))
    if np.array_equal(stand_in, np.arange(stand_in.size)):
        return Tensor(name, 2)
    count = math.prod(imp.shape(x))
    largest = max((w.size for w in imp.weights.values()), default=0)
    if count > max(PERMUTATION_GEMM_MAX, largest):
        imp.fail(call, f"flattening {count:,} values in TF's order needs a Dense kernel of "
                       f"{count:,} rows or a reordering of at most {PERMUTATION_GEMM_MAX:,} "
                       f"values, but the largest weight holds {largest:,}")
    return Tensor(name, 2, _flat_order(imp, call, x))


def _flat_order(imp, call, x: Tensor, shape: tuple | None = None) -> np.ndarray:
    """TF's flattening order of map `x`: tf[i] = glcnn[order[i]] (`tf_indices`' `shape`)."""
    index = tf_indices(imp, call, x, shape)
    if call.config.get("data_format") == "channels_first":  # Keras moves axis 1 last first
        index = np.moveaxis(index, 0, -1)
    return index.reshape(-1)


@converts("Reshape", emits=("Flatten",))
def _reshape(imp, call):
    """Only reshapes that leave every value where glcnn keeps it (e.g. (C,) <-> (1, 1, C))."""
    x = imp.act(call)
    target = list(integers(call.config["target_shape"], "target_shape", -1))
    try:
        moved = tf_indices(imp, call, x).reshape(target)
    except ValueError:
        imp.fail(call, f"cannot reshape {imp.tf_shape(x)} to {target}")
    if moved.ndim not in (1, 3):
        imp.fail(call, f"target_shape {target}: glcnn holds vectors and 3-D maps only")
    glcnn = moved if moved.ndim == 1 or imp.layout == "NCHW" else moved.transpose(2, 0, 1)
    shape = glcnn.shape if glcnn.ndim == 3 else (glcnn.size, 1, 1)
    if not np.array_equal(glcnn.reshape(-1), np.arange(glcnn.size)):
        imp.fail(call, f"reshaping {imp.tf_shape(x)} to {[1, *target]} reorders the values in "
                       f"glcnn's (C, H, W) layout; only layout no-ops are supported")
    if tuple(shape) == imp.shape(x):
        return Tensor(x.name, 1 + moved.ndim)
    if moved.ndim == 1:
        return Tensor(imp.emit(call, "Flatten", [x.name], {"axis": 1}), 2)
    imp.fail(call, f"reshaping {imp.tf_shape(x)} to {[1, *target]} changes glcnn's tensor "
                   f"shape {imp.shape(x)} -> {tuple(shape)}; not supported")
