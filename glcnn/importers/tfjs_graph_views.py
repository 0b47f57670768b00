"""Converters of the TF.js graph importer for the ops that only move elements: Reshape,
Squeeze, ExpandDims, Transpose and StridedSlice of tensors computed at run time. Registered in
tfjs_graph_ops' tables.

A TF tensor (batch 1) sits in glcnn's (C, H, W) with its last axis as the channels:

| TF shape      | glcnn (C, H, W) |
|---------------|-----------------|
| (1, F)        | (F, 1, 1)       |
| (1, L, C)     | (C, 1, L)       |
| (1, H, W, C)  | (C, H, W)       |

Each op is a *view*: output element i (a TF multi-index) reads input element
offset + Σ i_k · s_k of the input's TF flat (row-major) order. numpy computes that map on the
input's indices (the op applied to np.arange), the strides are read off it and checked
against it, and the view becomes no pass at all when every element stays where it is stored
(e.g. (1, H, W, C) → (1, H·W, C)), else one glcnn Rearrange: stage 1 walks the output in
storage order to the input's TF flat index, stage 2 unravels that into input storage.
"""

import math

import numpy as np

from ..ops.rearrange import MAX_DIMS, merge_dims
from .tfjs_graph_ops import Act, converts

VIEW_LIMIT = 1 << 24  # elements of a moved tensor; its index map is computed in numpy


def glcnn_of(shape: tuple) -> tuple[int, int, int]:
    """The glcnn (C, H, W) of a TF shape of rank 2 to 4 with batch 1 (module table)."""
    if len(shape) == 2:
        return (shape[1], 1, 1)
    if len(shape) == 3:
        return (shape[2], 1, shape[1])
    return (shape[3], shape[1], shape[2])


def _storage_axes(rank: int) -> tuple[int, ...]:
    """The TF axes of a rank-`rank` tensor in glcnn storage order (axes of size 1 dropped)."""
    return {2: (1,), 3: (2, 1), 4: (3, 1, 2)}[rank]


def _to_storage(tf: np.ndarray) -> np.ndarray:
    """A TF-shaped array in glcnn storage order, flattened."""
    return tf[0].transpose(*(a - 1 for a in _storage_axes(tf.ndim))).reshape(-1)


def _check_shape(imp, node, shape, what: str) -> tuple:
    shape = tuple(int(d) for d in shape)
    if len(shape) not in (2, 3, 4) or shape[0] != 1 or min(shape) < 1:
        imp.fail(node, f"{what} {list(shape)}: glcnn's tensors are (1, F), (1, L, C) and "
                       "(1, H, W, C)")
    return shape


def view(imp, node, x: Act, move) -> Act:
    """`move` (a numpy function of a TF-shaped array: a reshape, a transpose, a slice) applied
    to `x`: an alias when nothing moves, else one Rearrange.

    Raises:
        UnsupportedOpError: an output of another rank than 2 to 4 or batch > 1, or a tensor
            too large to compute the map of, naming the node.
    """
    n = math.prod(x.shape)
    if n > VIEW_LIMIT:
        imp.fail(node, f"moving the elements of {list(x.shape)}: glcnn computes such moves "
                       f"for tensors of up to {VIEW_LIMIT} elements")
    try:
        index = np.asarray(move(np.arange(n, dtype=np.int64).reshape(x.shape)))
    except (IndexError, ValueError) as exc:
        imp.fail(node, f"cannot be applied to {list(x.shape)} ({exc})")
    shape = _check_shape(imp, node, index.shape, "output shape")
    out = glcnn_of(shape)
    stored = np.arange(n, dtype=np.int64).reshape(glcnn_of(x.shape))
    source = _to_storage(np.asarray(move(_from_storage(stored, x.shape))))
    if out == imp.glcnn_shape(x) and np.array_equal(source, np.arange(n)):
        return Act(x.name, shape)
    offset = int(index.flat[0])
    strides = [int(index[tuple(int(j == k) for j in range(len(shape)))]) - offset
               if d > 1 else 0 for k, d in enumerate(shape)]
    grid = offset + sum(np.arange(d).reshape([-1 if j == k else 1 for j in range(len(shape))])
                        * s for k, (d, s) in enumerate(zip(shape, strides)))
    if not np.array_equal(grid, index) or min(strides) < 0:
        imp.fail(node, f"moves {list(x.shape)} to {list(shape)} in a way glcnn's Rearrange "
                       "cannot express (negative or irregular steps)")
    axes = _storage_axes(len(shape))
    dims, steps = merge_dims([shape[a] for a in axes], [strides[a] for a in axes])
    attrs = {"shape": list(out), "dims": dims, "strides": steps, "offset": offset}
    if x.rank > 2:  # TF flat index -> input storage: unravel by the TF dims
        store = np.zeros(x.rank, np.int64)
        plane = 1
        for a in reversed(_storage_axes(x.rank)):
            store[a], plane = plane, plane * x.shape[a]
        order = range(1, x.rank)  # TF flat order
        dims2, steps2 = merge_dims([x.shape[a] for a in order], [int(store[a]) for a in order])
        if len(dims2) > 1:
            attrs |= {"dims2": dims2, "strides2": steps2}
    if max(len(dims), len(attrs.get("dims2", ()))) > MAX_DIMS:
        imp.fail(node, f"moving {list(x.shape)} to {list(shape)} needs more than {MAX_DIMS} "
                       "index dims")
    return imp.emit(node, "Rearrange", [x.name], attrs, {}, rank=len(shape))


def _from_storage(stored: np.ndarray, shape: tuple) -> np.ndarray:
    """A (C, H, W) array (a tensor as glcnn stores it) in TF shape `shape`."""
    axes = _storage_axes(len(shape))
    kept = stored.reshape([shape[a] for a in axes])
    return kept.transpose(*np.argsort(axes)).reshape(shape)


# --- converters -----------------------------------------------------------------------------
def _target(imp, node, x: Act, asked) -> tuple:
    asked = [int(d) for d in asked]
    shape, n = list(asked), math.prod(x.shape)
    if shape.count(-1) == 1:
        known = math.prod(d for d in shape if d != -1)
        shape[shape.index(-1)] = n // max(known, 1)
    if math.prod(shape) != n or min(shape, default=0) < 1:
        imp.fail(node, f"cannot reshape {list(x.shape)} ({n} elements) to {asked}")
    return tuple(shape)


@converts("Reshape", emits=("Rearrange",),
          note="between (1,F), (1,L,C) and (1,H,W,C): no pass when the stored order agrees")
def _reshape(imp, node, args):
    x = imp.tensor(node, args[0])
    shape = _target(imp, node, x, np.ravel(imp.const(node, args[1], "shape")))
    return view(imp, node, x, lambda a: a.reshape(shape))


@converts("Squeeze", emits=("Rearrange",), note="axes of size 1 but the batch")
def _squeeze(imp, node, args):
    x = imp.tensor(node, args[0])
    dims = {int(d) % x.rank for d in imp.attr(node, "squeeze_dims", [])} or \
        {i for i, d in enumerate(x.shape) if d == 1 and i}
    if 0 in dims or any(x.shape[d] != 1 for d in dims):
        imp.fail(node, f"squeeze_dims {sorted(dims)} of {list(x.shape)}: axes of size 1 "
                       "other than the batch")
    shape = tuple(d for i, d in enumerate(x.shape) if i not in dims)
    return view(imp, node, x, lambda a: a.reshape(shape))


@converts("ExpandDims", emits=("Rearrange",), note="a new axis of size 1 after the batch")
def _expand_dims(imp, node, args):
    x = imp.tensor(node, args[0])
    axis = int(imp.scalar(node, args[1], "axis")) % (x.rank + 1)
    if axis == 0:
        imp.fail(node, "a new batch axis: glcnn's tensors have batch 1 first")
    shape = x.shape[:axis] + (1,) + x.shape[axis:]
    return view(imp, node, x, lambda a: a.reshape(shape))


@converts("Transpose", emits=("Transpose", "Rearrange"),
          note="any perm keeping the batch first; (1,H,W,C) is the glcnn Transpose")
def _transpose(imp, node, args):
    x = imp.tensor(node, args[0])
    perm = [int(p) for p in np.ravel(imp.const(node, args[1], "perm"))]
    if sorted(perm) != list(range(x.rank)) or perm[0] != 0:
        imp.fail(node, f"perm {perm} of {list(x.shape)}: a permutation keeping the batch first")
    if x.rank == 4 and perm != [0, 1, 2, 3]:
        tf_axis = (0, 3, 1, 2)  # glcnn NCHW axis -> TF NHWC axis
        nchw = (0, 2, 3, 1)  # TF NHWC axis -> glcnn NCHW axis
        glcnn_perm = [nchw[perm[tf_axis[j]]] for j in range(4)]
        return imp.emit(node, "Transpose", [x.name], {"perm": glcnn_perm}, {}, rank=4)
    return view(imp, node, x, lambda a: a.transpose(perm))


@converts("StridedSlice", emits=("Rearrange",),
          note="positive strides; begin/end/shrink_axis masks (constants: any)")
def _strided_slice(imp, node, args):
    x = imp.tensor(node, args[0])
    begin, end, strides = (np.ravel(imp.const(node, a, what)).astype(np.int64)
                           for a, what in zip(args[1:4], ("begin", "end", "strides")))
    if imp.attr(node, "ellipsis_mask", 0) or imp.attr(node, "new_axis_mask", 0) or \
            min(strides, default=1) < 1 or not len(begin) == len(end) == len(strides):
        imp.fail(node, "ellipsis_mask, new_axis_mask and steps below 1 are not supported")
    index = []
    for i in range(len(begin)):
        b = None if imp.attr(node, "begin_mask", 0) >> i & 1 else int(begin[i])
        e = None if imp.attr(node, "end_mask", 0) >> i & 1 else int(end[i])
        shrink = imp.attr(node, "shrink_axis_mask", 0) >> i & 1
        index.append(b if shrink else slice(b, e, int(strides[i])))
    return view(imp, node, x, lambda a: a[tuple(index)])
