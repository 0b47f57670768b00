"""Converters of the ONNX ops that only move elements: Reshape, Flatten, Squeeze, Unsqueeze,
Transpose, Slice, Gather, Split, Expand, Tile, SpaceToDepth. Each describes its output as a
view of its input (`onnx_layout`: dims, strides into the input's ONNX flat index, offset),
which is no pass at all when nothing moves, else one glcnn Rearrange.
"""

import math

import numpy as np

from ..errors import quote
from .onnx_layout import dims_text, emit_view, glcnn_shape, rearrange, strides_of
from .onnx_ops import converts, fail, weight


@converts("Flatten", "Reshape", "Squeeze", "Unsqueeze", needs=None)
def _reshape(imp, node, attrs):
    """Same elements in ONNX order: an alias when the storage agrees, else a Rearrange (or the
    glcnn Flatten of an image to a vector)."""
    name, out = node.input[0], node.output[0]
    dims = imp.shape(out)
    if not imp.is_static(out):
        fail(imp, node, f"output shape {dims_text(imp.shapes.get(out))} is not known")
    source = glcnn_shape(imp, name, f"input {quote(name)}")
    target = glcnn_shape(imp, out, imp.output_of(node))
    if target == (math.prod(source), 1, 1) and len(imp.shape(name)) == 4 and source[0] != \
            target[0] and node.op_type in ("Flatten", "Reshape"):
        imp.emit(node, "Flatten", [imp.act(node, 0)], {"axis": 1})
        return
    emit_view(imp, node, dims, strides_of(dims))


@converts("Transpose", needs=None)
def _transpose(imp, node, attrs):
    """Rank 3: (0, 2, 1) flips the layout (no op); rank 4 keeping the batch axis first: the
    glcnn Transpose; otherwise a Rearrange."""
    name = node.input[0]
    dims = imp.shape(name)
    perm = [int(p) for p in attrs.get("perm", range(len(dims) - 1, -1, -1))]
    if sorted(perm) != list(range(len(dims))):
        fail(imp, node, f"perm={perm} is not a permutation of the {len(dims)} axes")
    out = [dims[p] for p in perm]
    if len(dims) == 3 and perm[0] == 0:
        emit_view(imp, node, out, [strides_of(dims)[p] for p in perm],
                  channels_last=(name in imp.channels_last) != (perm == [0, 2, 1]))
        return
    if len(dims) == 4 and perm[0] == 0 and perm != [0, 1, 2, 3]:
        imp.emit(node, "Transpose", [imp.act(node, 0)], {"perm": perm})
        return
    emit_view(imp, node, out, [strides_of(dims)[p] for p in perm])


@converts("Slice", needs=None)
def _slice(imp, node, attrs):
    """Positive steps on any axis: the glcnn Slice for a 4-D tensor it can take, else a
    Rearrange."""
    for key in ("starts", "ends", "axes", "steps"):
        if key in attrs:  # opset < 10
            attrs[key] = list(attrs[key])
    for index, key in enumerate(("starts", "ends", "axes", "steps")):
        value = weight(imp, node, index + 1, key)
        if value is not None:
            attrs[key] = [int(v) for v in value.reshape(-1)]
    if "starts" not in attrs or "ends" not in attrs:
        fail(imp, node, "needs starts and ends")
    name = node.input[0]
    dims = list(imp.shape(name))
    axes = [int(a) for a in attrs.get("axes", range(len(attrs["starts"])))]
    steps = [int(s) for s in attrs.get("steps", [1] * len(axes))]
    if any(s < 1 for s in steps):
        fail(imp, node, f"steps {steps}: only positive steps are supported")
    if not all(-len(dims) <= a < len(dims) for a in axes) or len({a % len(dims) for a in axes}) \
            != len(axes) or not len(axes) == len(steps) == len(attrs["starts"]) \
            == len(attrs["ends"]):
        fail(imp, node, f"axes {axes} (starts, ends, steps of the same length) must name "
                        f"different axes of rank {len(dims)}")
    axes = [a % len(dims) for a in axes]
    if len(dims) == 4 and 0 not in axes and not any(s != 1 for s, a in zip(steps, axes) if a == 1):
        imp.emit(node, "Slice", [imp.act(node, 0)],
                 {"starts": attrs["starts"], "ends": attrs["ends"], "axes": axes, "steps": steps})
        return
    base, out, strides, offset = strides_of(dims), list(dims), list(strides_of(dims)), 0
    for start, end, axis, step in zip(attrs["starts"], attrs["ends"], axes, steps):
        r = range(*slice(int(start), int(end), step).indices(dims[axis]))
        if len(r) == 0:
            fail(imp, node, f"the slice of axis {axis} is empty")
        out[axis], strides[axis], offset = len(r), base[axis] * step, offset + r.start * base[axis]
    emit_view(imp, node, out, strides, offset, channels_last=_keeps_lc(imp, name, axes))


def _keeps_lc(imp, name, axes) -> bool:
    return name in imp.channels_last and 0 not in axes


@converts("Gather", needs="Rearrange")
def _gather(imp, node, attrs):
    """Constant indices forming a range with a non-negative step (a scalar drops the axis)."""
    name = node.input[0]
    dims = list(imp.shape(name))
    axis = int(attrs.get("axis", 0))
    if not -len(dims) <= axis < len(dims):
        fail(imp, node, f"axis={axis} is out of range for rank {len(dims)}")
    axis %= len(dims)
    indices = weight(imp, node, 1, "indices")
    if indices is None:
        fail(imp, node, "indices must be a constant")
    flat = np.array(indices, np.int64).reshape(-1)
    if flat.size == 0 or flat.min() < -dims[axis] or flat.max() >= dims[axis]:
        fail(imp, node, f"indices {flat.tolist()[:8]} out of range for axis {axis} of size "
                        f"{dims[axis]}")
    flat %= dims[axis]
    step = int(flat[1] - flat[0]) if flat.size > 1 else 1
    if np.asarray(indices).ndim > 1 or step < 0 or \
            not np.array_equal(flat, flat[0] + step * np.arange(flat.size)):
        fail(imp, node, f"indices {flat.tolist()[:8]}: only a scalar or a 1-D range with a "
                        "non-negative step is supported")
    base = strides_of(dims)
    offset = int(flat[0]) * base[axis]
    out, strides = list(dims), list(base)
    if np.asarray(indices).ndim == 0:
        del out[axis], strides[axis]
    else:
        out[axis], strides[axis] = flat.size, base[axis] * step
    emit_view(imp, node, out, strides, offset)


@converts("Split", needs=None)
def _split(imp, node, attrs):
    """Constant split sizes (input 1 from opset 13, attribute before), or equal parts."""
    name = node.input[0]
    dims = list(imp.shape(name))
    axis = int(attrs.get("axis", 0)) % len(dims)
    sizes = weight(imp, node, 1, "split") if len(node.input) > 1 else None
    sizes = [int(v) for v in (sizes.reshape(-1) if sizes is not None else attrs.get("split", []))]
    parts = len(node.output)
    if not sizes:
        count = int(attrs.get("num_outputs", parts))
        chunk = -(-dims[axis] // count)
        sizes = [min(chunk, dims[axis] - i * chunk) for i in range(count)]
    if len(sizes) != parts or sum(sizes) != dims[axis] or min(sizes) < 0:
        fail(imp, node, f"split sizes {sizes} do not cut axis {axis} of size {dims[axis]} into "
                        f"{parts} parts")
    base, start = strides_of(dims), 0
    for index, size in enumerate(sizes):
        out = list(dims)
        out[axis] = size
        if node.output[index]:
            emit_view(imp, node, out, base, start * base[axis],
                      channels_last=_keeps_lc(imp, name, [axis]), index=index)
        start += size


@converts("Expand", needs=None)
def _expand(imp, node, attrs):
    """To a constant shape (ONNX broadcasting): stride 0 along the broadcast axes."""
    name = node.input[0]
    shape = weight(imp, node, 1, "shape")
    if shape is None:
        fail(imp, node, "the shape (input 1) must be a constant")
    dims = list(imp.shape(name))
    try:
        out = list(np.broadcast_shapes(tuple(dims), tuple(int(v) for v in shape.reshape(-1))))
    except ValueError:
        fail(imp, node, f"cannot broadcast {dims} to {shape.reshape(-1).tolist()}")
    full = [1] * (len(out) - len(dims)) + dims
    base = [0] * (len(out) - len(dims)) + strides_of(dims)
    strides = [0 if d == 1 and o != 1 else s for d, o, s in zip(full, out, base)]
    emit_view(imp, node, out, strides)


@converts("Tile", needs=None)
def _tile(imp, node, attrs):
    """Constant repeats: each axis of size d repeated r times reads (r, d) with strides (0, s)."""
    name = node.input[0]
    repeats = weight(imp, node, 1, "repeats")
    dims = list(imp.shape(name))
    if repeats is None or repeats.size != len(dims) or (repeats < 1).any():
        fail(imp, node, f"repeats must be a constant of {len(dims)} positive integers")
    out = [d * int(r) for d, r in zip(dims, repeats.reshape(-1))]
    if out == dims:
        emit_view(imp, node, dims, strides_of(dims))
        return
    view_dims, view_strides = [], []
    for d, r, s in zip(dims, repeats.reshape(-1), strides_of(dims)):
        view_dims += [int(r), d]
        view_strides += [0, s]
    rearrange(imp, node, imp.act(node, 0), name, view_dims, view_strides, 0, False,
               out_dims=out)


@converts("SpaceToDepth", needs="Rearrange")
def _space_to_depth(imp, node, attrs):
    """(1, C, H, W) -> (1, C·b·b, H/b, W/b), channel (by·b + bx)·C + c reading
    x[c, y·b + by, x·b + bx]: the view (b, b, C, H/b, W/b) with strides (W, 1, H·W, b·W, b)."""
    dims = list(imp.shape(node.input[0]))
    b = int(attrs.get("blocksize", 0))
    if len(dims) != 4 or b < 1:
        fail(imp, node, f"needs a rank-4 input and blocksize >= 1 (got {dims_text(dims)}, "
                        f"blocksize={b})")
    _, c, h, w = dims
    if h % b or w % b:
        fail(imp, node, f"input height {h} and width {w} must be multiples of blocksize {b}")
    out = [1, c * b * b, h // b, w // b]
    rearrange(imp, node, imp.act(node, 0), node.input[0], [1, b, b, c, h // b, w // b],
              [0, w, 1, h * w, b * w, b], 0, False, out_dims=out)
