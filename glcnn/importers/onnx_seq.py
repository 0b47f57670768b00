"""Converters of the ONNX importer for sequence heads and attention: Softmax, MatMul and
LayerNormalization on tensors of any rank the importer places (onnx_layout.py). See
onnx_ops.py for the conventions.

| ONNX                          | glcnn                                                      |
|-------------------------------|------------------------------------------------------------|
| Softmax (one axis)            | Softmax over the glcnn axis holding it                     |
| MatMul a (1, K) · const B     | MatMul on the vector (glcnn's dense layer)                  |
| MatMul a · const B, K on C    | 1×1 Conv, W = Bᵀ as (N, K, 1, 1) (a channels-last sequence)  |
| MatMul a · const B, otherwise | MatMul with weight B and a_axes / out_axes of the layouts   |
| MatMul a · b (activations)    | MatMul with a_axes / b_axes / out_axes of the layouts       |
| LayerNormalization (axis −1)  | LayerNormalization over the glcnn axis of the last axis     |

A MatMul operand's row and column are its last two ONNX axes; its batch, the product of the
others, sits on the remaining glcnn axis. Batches must agree or one be all ones.
"""

import math

import numpy as np

from .onnx_layout import glcnn_axis
from .onnx_ops import converts, fail, no_extra_outputs, only, weight


@converts("Softmax")
def _softmax(imp, node, attrs):
    """Softmax over one axis; before opset 13 over all axes from `axis` on, which is one
    axis when the ones after it have size 1."""
    attrs = only(imp, node, attrs, ("axis",))
    x, dims = node.input[0], imp.shape(node.input[0])
    axis = int(attrs.get("axis", -1 if imp.opset >= 13 else 1))
    if imp.opset < 13 and -len(dims) <= axis < len(dims) and \
            math.prod(dims[axis % len(dims) + 1:]) != 1:
        fail(imp, node, f"Softmax-{imp.opset} normalises over all axes from {axis} of "
                        f"{list(dims)} together; only a single axis is supported")
    imp.emit(node, "Softmax", [imp.act(node, 0)], {"axis": glcnn_axis(imp, node, x, axis)})


# --- MatMul -------------------------------------------------------------------------------
def _placement(imp, node, name) -> list[int]:
    """[batch, row, column] glcnn axes (0 = C, 1 = H, 2 = W) of ONNX tensor `name`, whose
    row and column are its last two axes and batch the product of the others."""
    row, col = (glcnn_axis(imp, node, name, a) - 1 for a in (-2, -1))
    batch = ({0, 1, 2} - {row, col}).pop()
    shape = imp.glcnn_shape(name, repr(name))
    if shape[batch] != math.prod(imp.shape(name)[:-2]):
        fail(imp, node, f"tensor {name!r} of shape {list(imp.shape(name))} keeps its leading "
                        "axes apart in glcnn; only their product as one batch is supported")
    return [batch, row, col]


def _out_axes(imp, node, channels_last: bool) -> list[int]:
    """The placement of output 0 when stored with `channels_last` (rank 3)."""
    out = node.output[0]
    if channels_last and len(imp.shape(out)) == 3:
        imp.channels_last.add(out)
    return _placement(imp, node, out)


@converts("MatMul")
def _matmul(imp, node, attrs):
    only(imp, node, attrs, ())
    a, dims = node.input[0], imp.shape(node.input[0])
    b = weight(imp, node, 1, "B") if imp.const(node.input[1]) is not None else None
    if len(dims) < 2 or (b is None and len(imp.shape(node.input[1])) != len(dims)):
        fail(imp, node, f"inputs of shapes {list(dims)} and {list(imp.shape(node.input[1]))}: "
                        "only operands of the same rank, or a constant matrix B, are supported")
    if b is None:
        _matmul_tensors(imp, node, a)
        return
    if b.ndim > 2 and math.prod(b.shape[:-2]) == 1:
        b = b.reshape(b.shape[-2:])
    if b.ndim != 2:
        fail(imp, node, f"constant B of shape {list(b.shape)}: only a (K, N) matrix is supported")
    if len(dims) == 2:  # (1, K) · (K, N): the dense layer on a vector
        imp.emit(node, "MatMul", [imp.act(node, 0)], {}, {"B": b})
        return
    lc = a in imp.channels_last
    if glcnn_axis(imp, node, a, -1) == 1:  # K on the channels: a 1×1 conv keeps the layout
        conv = {"pads": [0, 0, 0, 0], "strides": [1, 1], "dilations": [1, 1], "group": 1}
        imp.emit(node, "Conv", [imp.act(node, 0)], conv,
                 {"W": np.ascontiguousarray(b.T)[:, :, None, None]}, channels_last=lc)
        return
    axes = {"a_axes": _placement(imp, node, a), "out_axes": _out_axes(imp, node, lc)}
    imp.emit(node, "MatMul", [imp.act(node, 0)], axes, {"B": b}, channels_last=lc)


def _matmul_tensors(imp, node, a):
    lead = [imp.shape(n)[:-2] for n in node.input[:2]]
    if lead[0] != lead[1] and min(math.prod(d) for d in lead) != 1:
        fail(imp, node, f"batch axes {list(lead[0])} and {list(lead[1])}: only equal batches "
                        "or one of all ones are supported")
    lc = a in imp.channels_last
    axes = {"a_axes": _placement(imp, node, a), "b_axes": _placement(imp, node, node.input[1]),
            "out_axes": _out_axes(imp, node, lc)}
    imp.emit(node, "MatMul", [imp.act(node, 0), imp.act(node, 1)], axes, channels_last=lc)


# --- LayerNormalization ---------------------------------------------------------------------
@converts("LayerNormalization")
def _layer_norm(imp, node, attrs):
    """Opset 17 LayerNormalization over the last axis only (one glcnn axis)."""
    attrs = only(imp, node, attrs, ("axis", "epsilon", "stash_type"))
    no_extra_outputs(imp, node, "mean and inverse standard deviation")
    x, dims = node.input[0], imp.shape(node.input[0])
    axis = int(attrs.get("axis", -1))
    if axis % max(len(dims), 1) != len(dims) - 1:
        fail(imp, node, f"axis={axis} normalises {list(dims)[axis:]} together; only the last "
                        "axis (axis=-1) is supported")
    n = dims[-1]
    weights = {"scale": weight(imp, node, 1, "Scale"), "bias": weight(imp, node, 2, "B")}
    for key, value in weights.items():
        if value is not None and np.size(value) != n:
            fail(imp, node, f"{key} of shape {list(np.shape(value))} does not hold the {n} "
                            "values of the normalised axis")
    weights = {k: np.reshape(v, -1) for k, v in weights.items() if v is not None}
    imp.emit(node, "LayerNormalization", [imp.act(node, 0)],
             {"axis": glcnn_axis(imp, node, x, -1), "epsilon": float(attrs.get("epsilon", 1e-5))},
             weights)
