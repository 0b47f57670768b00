"""The numpy float64 functions of the reference (`glcnn.graph.reference`) for the ops of
sequence heads and attention: MatMul on placed axes and LayerNormalization. Written to be
obviously right, as reference_ops.py."""

import numpy as np

F = np.float64


def to_batched(x, axes):
    """glcnn (C, H, W) array as (batch, rows, columns): `axes` = the glcnn axes (0 = C,
    1 = H, 2 = W) of [batch, row, column]."""
    return np.transpose(np.asarray(x, F), tuple(int(a) for a in axes))


def from_batched(y, axes):
    """Inverse of `to_batched`: (batch, rows, columns) placed on glcnn axes `axes`."""
    return np.transpose(y, tuple(np.argsort([int(a) for a in axes])))


def matmul(a, b, a_axes=(0, 1, 2), b_axes=(0, 1, 2), out_axes=(0, 1, 2)):
    """glcnn's MatMul (glcnn/ops/matmul.py): y[b, m, n] = Σ_k a[b, m, k] · b[b, k, n] with
    each operand's [batch, row, column] on the glcnn axes given; `b` may be a constant
    (K, N) matrix (batch 1). Batches of 1 broadcast."""
    left = to_batched(a, a_axes)
    b = np.asarray(b, F)
    right = b[None] if b.ndim == 2 else to_batched(b, b_axes)
    return from_batched(np.matmul(left, right), out_axes)


def layer_norm(x, axis, scale, bias=None, epsilon=1e-5):
    """LayerNormalization over NCHW `axis` (1 = C, 2 = H, 3 = W) of (C, H, W): (x − μ) /
    sqrt(σ² + ε) · scale + bias with the population variance; scale, bias along the axis.
    σ² + ε below 2^−126 counts as 2^−126 (glcnn/ops/layernorm.py: no division by zero)."""
    x, a = np.asarray(x, F), int(axis) % 4 - 1
    mean = x.mean(axis=a, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=a, keepdims=True)
    shape = [1, 1, 1]
    shape[a] = -1
    std = np.sqrt(np.maximum(var + epsilon, 2.0 ** -126))
    y = (x - mean) / std * np.asarray(scale, F).reshape(shape)
    return y if bias is None else y + np.asarray(bias, F).reshape(shape)
