"""Where an ONNX tensor sits in a glcnn (C, H, W) tensor, and how elements move between
layouts (the converters that only move elements, Reshape, Flatten, Squeeze, Unsqueeze,
Transpose, Slice, Gather, Split, Expand, Tile, are in `onnx_moves`).

| ONNX shape                 | glcnn (C, H, W)                 | storage order            |
|----------------------------|---------------------------------|--------------------------|
| (1, F)                     | (F, 1, 1)                       | ONNX's ("flat")          |
| (1, A, B)                  | (A, 1, B)                       | flat                     |
| (1, A, B), channels last   | (B, 1, A)                       | the last axis: channels  |
| (1, C, H, W)               | (C, H, W)                       | flat                     |
| (d0, ..., dk), rank 5, 6   | (d0·…·d(k−2), d(k−1), dk)       | flat                     |

A rank-3 tensor is channels last ("LC": a (1, L, C) sequence whose features are glcnn channels,
so a MatMul by a constant is a 1×1 Conv and LayerNorm a channel reduction) when the op making
it says so: Transpose (0, 2, 1) of a rank-3 tensor flips the layout without moving data;
elementwise ops, reductions and Softmax keep their input's layout; Reshape makes flat tensors.
`imp.act_as(node, i, channels_last)` converts where an op needs one layout.

Every other move is one glcnn Rearrange (glcnn/ops/rearrange.py) described as a *view*: output
ONNX dims, a stride per output axis into the input's ONNX flat index, and an offset (Transpose
permutes strides, Slice multiplies them by steps, Gather adds an offset and drops the axis,
Expand uses stride 0, Tile splits each axis into (repeat, size) with strides (0, s), Reshape
is the identity on the flat index). `emit_view` turns the view
into the Rearrange's storage-to-storage index map, and into no op at all when that map is the
identity (e.g. Squeeze (1, C, 1, L) → (1, C, L)). A 4-D permutation that keeps the batch axis
first stays the glcnn Transpose op (whole texels when the channels stay together).
"""

import math

import numpy as np

from ..errors import UnsupportedOpError, quote
from ..graph.graph import float32
from ..ops.rearrange import MAX_DIMS, merge_dims


def fail(imp, node, message: str):
    raise UnsupportedOpError(imp.where(node, message))


ALIAS_CHECK = 1 << 22  # elements up to which an identity map is recognised by computing it


# --- layouts --------------------------------------------------------------------------------
def glcnn_shape(imp, name, what) -> tuple[int, int, int]:
    """(C, H, W) of ONNX tensor `name` (table above).

    Raises:
        UnsupportedOpError: another rank, a batch > 1 where the axis is a batch, naming `what`.
    """
    dims = imp.shapes.get(name) if name not in imp.consts else imp.shape(name)
    static = dims is not None and None not in dims
    if static and dims[0] == 1 and len(dims) in (2, 3, 4):
        if len(dims) == 2:
            return (dims[1], 1, 1)
        if len(dims) == 3:
            return (dims[2], 1, dims[1]) if name in imp.channels_last else (dims[1], 1, dims[2])
        return tuple(dims[1:])
    if static and len(dims) in (5, 6):
        return (math.prod(dims[:-2]), dims[-2], dims[-1])
    reason = "not inferred" if not static else \
        f"batch size {dims[0]}" if len(dims) in (2, 3, 4) else f"rank {len(dims)}"
    raise UnsupportedOpError(f"{imp.filename}: {what} has shape {dims_text(dims)} ({reason}); "
                             "glcnn runs tensors of rank 2 to 4 with batch 1, and rank 5 and 6")


def glcnn_axis(imp, node, name, axis: int) -> int:
    """The glcnn axis (NCHW terms: 1 = C, 2 = H, 3 = W) holding ONNX `axis` of tensor `name`.

    Raises:
        UnsupportedOpError: the batch axis, or an axis that several glcnn axes share or
            that shares one (the leading axes of a rank-5 tensor), naming the node.
    """
    rank = len(imp.shape(name))
    if not -rank <= axis < rank:
        fail(imp, node, f"axis={axis} is out of range for rank {rank}")
    axis %= rank
    if rank <= 4 and axis == 0:
        fail(imp, node, "the batch axis 0 is not supported (glcnn runs batch 1)")
    if rank == 3:
        return (3 if axis == 1 else 1) if name in imp.channels_last else (1 if axis == 1 else 3)
    if rank <= 4:
        return axis
    if axis >= rank - 2:
        return axis - rank + 4
    fail(imp, node, f"axis {axis} of the rank-{rank} tensor {quote(name)} shares glcnn's "
                    "channel axis with others; only its last two axes are supported here")


def glcnn_const(imp, node, value, like: str, what: str) -> np.ndarray:
    """Constant `value`, ONNX-broadcast against activation `like`, as a glcnn-shaped array
    (C', H', W') with 1 on the axes it does not vary along.

    Raises:
        UnsupportedOpError: more axes than the activation, or varying along the batch axis or
            along some but not all of the axes merged into glcnn's channel axis.
    """
    value = float32(value)
    dims = imp.shape(like)
    if value.ndim > len(dims):
        fail(imp, node, f"{what} of shape {list(value.shape)} has more axes than the input")
    full = value.reshape((1,) * (len(dims) - value.ndim) + value.shape)
    if len(dims) in (2, 3, 4) and full.shape[0] != 1:
        fail(imp, node, f"{what} of shape {list(value.shape)} varies along the batch axis")
    if len(dims) == 2:
        return full.reshape(-1, 1, 1)
    if len(dims) == 3:
        full = full[0]
        return full.T[:, None, :] if like in imp.channels_last else full[:, None, :]
    if len(dims) == 4:
        return full[0]
    lead = full.shape[:-2]
    if math.prod(lead) not in (1, math.prod(dims[:-2])):
        fail(imp, node, f"{what} of shape {list(value.shape)} broadcasts along part of the "
                        f"leading axes of {list(dims)}")
    return full.reshape(math.prod(lead), *full.shape[-2:])


def act_as(imp, node, index: int, channels_last: bool) -> str:
    """Input `index` of `node` as a glcnn tensor in the given rank-3 layout (a Rearrange when
    it is stored the other way; made once per tensor and layout)."""
    name = node.input[index]
    source = imp.act(node, index)
    if len(imp.shape(name)) != 3 or (name in imp.channels_last) == channels_last:
        return source
    key = (name, channels_last)
    if key not in imp.converted:
        dims = imp.shape(name)
        imp.converted[key] = rearrange(imp, node, source, name, dims, strides_of(dims), 0,
                                        channels_last, suffix=f"/{'lc' if channels_last else 'cl'}")
    return imp.converted[key]


def emit_view(imp, node, dims, strides, offset: int = 0, channels_last: bool = False,
              index: int = 0) -> None:
    """Output `index` of `node` is the view (`dims`, `strides` into input 0's ONNX flat index,
    `offset`) of input 0: an alias when no element moves, else one Rearrange."""
    name, out = node.input[0], node.output[index]
    if tuple(imp.shape(out) or dims) != tuple(dims):
        fail(imp, node, f"output {quote(out)} has shape {list(imp.shape(out))}, but the op "
                        f"gives {list(dims)}")
    if len(dims) == 3 and channels_last:
        imp.channels_last.add(out)
    source = imp.act(node, 0)
    target = glcnn_shape(imp, out, imp.output_of(node, index))
    if target == glcnn_shape(imp, name, repr(name)) and \
            _is_identity(imp, name, dims, strides, offset, channels_last):
        imp.names[out] = source
        return
    rearrange(imp, node, source, name, dims, strides, offset, channels_last, index=index)


def rearrange(imp, node, source, name, dims, strides, offset, channels_last, suffix="",
               index=0, out_dims=None) -> str:
    """One Rearrange: the view (`dims`, `strides`, `offset`) as stored; `out_dims`, the ONNX
    output shape when the view splits its axes (Tile), else `dims`."""
    stage = _storage_order(dims, strides, channels_last)
    merged = merge_dims(*stage)
    if len(merged[0]) > MAX_DIMS:
        fail(imp, node, f"moving {list(imp.shape(name))} to {list(dims)} needs "
                        f"{len(merged[0])} index dims; glcnn's Rearrange takes {MAX_DIMS}")
    attrs = {"shape": list(_shape_of(out_dims or dims, channels_last)), "dims": merged[0],
             "strides": merged[1], "offset": int(offset)}
    if name in imp.channels_last:  # ONNX flat (a, b) -> storage b·A + a
        _, a, b = imp.shape(name)
        attrs |= {"dims2": [a, b], "strides2": [1, a]}
    return imp.emit(node, "Rearrange", [source], attrs, suffix=suffix, index=index,
                    channels_last=channels_last)


def _shape_of(dims, channels_last) -> tuple[int, int, int]:
    if len(dims) == 2:
        return (dims[1], 1, 1)
    if len(dims) == 3:
        return (dims[2], 1, dims[1]) if channels_last else (dims[1], 1, dims[2])
    if len(dims) == 4:
        return tuple(dims[1:])
    return (math.prod(dims[:-2]), dims[-2], dims[-1])


def _storage_order(dims, strides, channels_last):
    """(dims, strides) in the order the output is stored (an LC tensor: (1, B, A))."""
    dims, strides = list(dims), list(strides)
    if len(dims) == 3 and channels_last:
        return [dims[0], dims[2], dims[1]], [strides[0], strides[2], strides[1]]
    return dims, strides


def strides_of(dims) -> list[int]:
    """Row-major strides of `dims`."""
    out, step = [], 1
    for d in reversed(dims):
        out.append(step)
        step *= int(d)
    return out[::-1]


def _is_identity(imp, name, dims, strides, offset, channels_last) -> bool:
    """Whether the view reads input storage element i into output storage element i."""
    n = math.prod(dims)
    if n != math.prod(imp.shape(name)) or n > ALIAS_CHECK or offset:
        return False
    d, s = _storage_order(dims, strides, channels_last)
    index = np.zeros(1, np.int64)
    for size, step in zip(d, s):
        index = (index[:, None] + np.arange(size, dtype=np.int64) * step).reshape(-1)
    if name in imp.channels_last:
        _, a, b = imp.shape(name)
        index = (index % b) * a + index // b
    return bool(np.array_equal(index, np.arange(n)))


def dims_text(dims) -> str:
    """[1, 3, ?, ?]: ONNX dims, None shown as ?."""
    return "unknown" if dims is None else "[" + ", ".join("?" if d is None else str(d)
                                                          for d in dims) + "]"
