"""The numpy float64 functions of the reference (`glcnn.graph.reference`), one per op family.

Written to be obviously right, not fast: convolutions are explicit loops over kernel taps
with float64 accumulation. Every function takes (C, H, W) arrays (batch 1) and the op's
attributes and weights as plain arguments; `glcnn.graph.reference` reads them from a node.
"""

import math
from fractions import Fraction

import numpy as np

from ..errors import UnsupportedOpError, quote

F = np.float64


def conv(x, W, B=None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1):
    """ONNX Conv: y[o] = B[o] + sum_{c in group(o), ky, kx} x_pad[c, oy*s + ky*d, ...] W[o, c, ..].

    pads = (top, left, bottom, right); W is (Co, Ci/group, kh, kw).
    """
    x, W = np.asarray(x, F), np.asarray(W, F)
    ci, h, w = x.shape
    co, cg, kh, kw = W.shape
    (sy, sx), (dy, dx), (pt, pl, pb, pr) = strides, dilations, pads
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dy * (kh - 1) - 1) // sy + 1
    ow = (w + pl + pr - dx * (kw - 1) - 1) // sx + 1
    cog = co // group
    y = np.zeros((co, oh, ow), F)
    for g in range(group):
        xg = xp[g * cg:(g + 1) * cg]
        Wg = W[g * cog:(g + 1) * cog]
        for ky in range(kh):
            for kx in range(kw):
                window = xg[:, ky * dy: ky * dy + sy * (oh - 1) + 1: sy,
                            kx * dx: kx * dx + sx * (ow - 1) + 1: sx]
                y[g * cog:(g + 1) * cog] += np.einsum("oc,chw->ohw", Wg[:, :, ky, kx], window)
    if B is not None:
        y += np.asarray(B, F)[:, None, None]
    return y


def conv_transpose(x, W, B=None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1),
                   group=1, output_padding=(0, 0)):
    """ONNX/PyTorch ConvTranspose: scatter x[c, iy, ix] W[c, o, ky, kx] to (iy*s + ky*d - pad).

    W is (Ci, Co/group, kh, kw). Output size per axis:
    (in - 1)*s - pad_begin - pad_end + d*(k - 1) + output_padding + 1.
    """
    x, W = np.asarray(x, F), np.asarray(W, F)
    ci, h, w = x.shape
    _, cog, kh, kw = W.shape
    (sy, sx), (dy, dx), (pt, pl, pb, pr) = strides, dilations, pads
    oy_pad, ox_pad = output_padding
    full_h = (h - 1) * sy + dy * (kh - 1) + 1 + oy_pad
    full_w = (w - 1) * sx + dx * (kw - 1) + 1 + ox_pad
    full = np.zeros((cog * group, full_h + max(0, -pt) + pb, full_w + max(0, -pl) + pr), F)
    cg = ci // group
    for g in range(group):
        xg, Wg = x[g * cg:(g + 1) * cg], W[g * cg:(g + 1) * cg]
        for ky in range(kh):
            for kx in range(kw):
                contrib = np.einsum("co,chw->ohw", Wg[:, :, ky, kx], xg)
                full[g * cog:(g + 1) * cog,
                     ky * dy: ky * dy + sy * (h - 1) + 1: sy,
                     kx * dx: kx * dx + sx * (w - 1) + 1: sx] += contrib
    oh = full_h - pt - pb
    ow = full_w - pl - pr
    y = full[:, pt:pt + oh, pl:pl + ow]
    if B is not None:
        y = y + np.asarray(B, F)[:, None, None]
    return y


def batchnorm(x, scale, B, mean, var, epsilon=1e-5):
    """ONNX BatchNormalization (inference): (x - mean) / sqrt(var + eps) * scale + B."""
    c = lambda v: np.asarray(v, F)[:, None, None]  # noqa: E731
    return (np.asarray(x, F) - c(mean)) / np.sqrt(c(var) + epsilon) * c(scale) + c(B)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def activation_grad(op: str, dy, y, alpha=None) -> np.ndarray:
    """dy · f'(z) of activation `op` (glcnn.ops.base.GRAD_ACTIVATIONS) with output y = f(z),
    f' written in terms of y (as PyTorch's backward)."""
    dy, y = np.asarray(dy, F), np.asarray(y, F)
    derivative = {"Relu": lambda: (y > 0) * 1.0,
                  "LeakyRelu": lambda: np.where(y > 0, 1.0, alpha),
                  "Sigmoid": lambda: y * (1 - y),
                  "Tanh": lambda: 1 - y * y,
                  "Elu": lambda: np.where(y > 0, 1.0, y + (alpha or 0.0))}[op]
    return dy * derivative()


def activation(op, x, attrs, weights):
    """The pointwise activations, by ONNX op type (plus "Silu": x * sigmoid(x))."""
    x = np.asarray(x, F)
    if op == "Relu":
        return np.maximum(x, 0)
    if op == "LeakyRelu":
        return np.where(x >= 0, x, attrs.get("alpha", 0.01) * x)
    if op == "PRelu":
        slope = np.asarray(weights["slope"], F).reshape(-1)
        slope = np.broadcast_to(slope, (x.shape[0],))[:, None, None]
        return np.where(x >= 0, x, slope * x)
    if op == "Clip":
        return np.clip(x, attrs.get("min", -np.inf), attrs.get("max", np.inf))
    if op == "Sigmoid":
        return _sigmoid(x)
    if op == "Tanh":
        return np.tanh(x)
    if op == "Elu":
        return np.where(x > 0, x, attrs.get("alpha", 1.0) * np.expm1(x))
    if op == "HardSigmoid":
        return np.clip(attrs.get("alpha", 0.2) * x + attrs.get("beta", 0.5), 0, 1)
    if op == "HardSwish":
        return x * np.clip(x / 6 + 0.5, 0, 1)
    if op == "Silu":
        return x * _sigmoid(x)
    raise UnsupportedOpError(f"reference has no activation {quote(op)}")


ACTIVATIONS = ("Relu", "LeakyRelu", "PRelu", "Clip", "Sigmoid", "Tanh", "Elu",
               "HardSigmoid", "HardSwish", "Silu")


def slice_hw(x, starts, ends, axes, steps=None):
    """ONNX Slice with positive steps; axes count NCHW dims (1 = C, 2 = H, 3 = W, negatives
    allowed)."""
    index = [slice(None)] * 4
    for start, end, axis, step in zip(starts, ends, axes, steps or [1] * len(starts)):
        index[axis] = slice(start, end, step)
    return x[None][tuple(index)][0]


def transpose(x, perm):
    """ONNX Transpose of the NCHW tensor x[None] with perm[0] = 0 (the batch stays first)."""
    return np.asarray(x, F)[None].transpose(perm)[0]


def rearrange_indices(count, dims, strides, offset=0, dims2=None, strides2=None):
    """glcnn's Rearrange (glcnn/ops/rearrange.py) as an index array: for each output element
    o < `count`, the input's flat index g (o unravelled by `dims` and dotted with `strides`,
    plus `offset`; then, with `dims2`, that unravelled by `dims2` and dotted with `strides2`)."""
    f = offset + sum(i * s for i, s in zip(np.unravel_index(np.arange(count), dims), strides))
    if dims2 is None:
        return np.asarray(f, np.int64)
    return np.asarray(sum(j * s for j, s in zip(np.unravel_index(f, dims2), strides2)), np.int64)


def rearrange(x, shape, dims, strides, offset=0, dims2=None, strides2=None):
    """glcnn's Rearrange: y.reshape(-1)[o] = x.reshape(-1)[g(o)], y of (C', H', W') `shape`."""
    g = rearrange_indices(math.prod(shape), dims, strides, offset, dims2, strides2)
    return np.asarray(x, F).reshape(-1)[g].reshape(shape)


# --- elementwise math -----------------------------------------------------------------------
FLOAT32_TINY = 2.0 ** -126  # the smallest normal float32: GLSL may flush anything below it
FLOAT32_MAX = float(np.finfo(np.float32).max)


def divide(a, b):
    """glcnn's Div (glcnn/ops/binary.py): a / b, but |b| < 2^-126 gives ±Inf with the sign of
    a (0 if also |a| < 2^-126, where IEEE gives NaN) and quotients beyond float32 give ±Inf."""
    a, b = np.broadcast_arrays(np.asarray(a, F), np.asarray(b, F))
    zero_b = np.abs(b) < FLOAT32_TINY
    q = a / np.where(zero_b, 1.0, b)
    q = np.where(np.abs(q) > FLOAT32_MAX, np.copysign(np.inf, q), q)
    inf_a = np.where(a < 0, -np.inf, np.inf)
    return np.where(zero_b, np.where(np.abs(a) < FLOAT32_TINY, 0.0, inf_a), q)


def sqrt(x):
    """glcnn's Sqrt: sqrt(max(x, 0)); ONNX gives NaN for x < 0, which GLSL cannot promise."""
    return np.sqrt(np.maximum(np.asarray(x, F), 0.0))


def erf(x):
    """The error function, exactly (math.erf per element)."""
    x = np.asarray(x, F)
    return np.vectorize(math.erf, otypes=[F])(x) if x.size else x


def power(x, exponent):
    """glcnn's Pow with a constant scalar exponent p (glcnn/ops/activation.py, Math):
    integer p: x^p, odd p keeping the sign, 0^p = +Inf for p < 0 (either zero's sign);
    other p: max(x, 0)^p (ONNX: NaN for x < 0); x^0 = 1 everywhere; beyond float32: +-Inf;
    |x| < 2^-126 counts as 0 (GLSL may flush subnormals)."""
    x, p = np.asarray(x, F), float(exponent)
    if p == 0:
        return np.ones_like(x)
    base = x if p == int(p) else np.maximum(x, 0.0)
    base = np.where(np.abs(base) < FLOAT32_TINY, 0.0, base)
    with np.errstate(divide="ignore", over="ignore"):
        y = np.where(base == 0, np.inf if p < 0 else 0.0, np.abs(base) ** p)
    y = np.where(y > FLOAT32_MAX, np.inf, y)
    odd = p == int(p) and int(p) % 2 == 1
    return np.where((base < 0) & odd, -y, y)


# --- reductions, normalisation, softmax, vectors and dense layers ---------------------------
def reduce_hw(x, op, axes):
    """ReduceMean ("mean"), ReduceMax ("max") or ReduceSum ("sum") over NCHW `axes` (1 = C,
    2 = H, 3 = W), keeping them as size 1 (keepdims=0 over H and W gives the same (C, 1, 1),
    glcnn's vector)."""
    chw_axes = tuple(sorted({int(a) % 4 - 1 for a in axes}))
    fn = {"mean": np.mean, "max": np.max, "sum": np.sum}[op]
    return fn(np.asarray(x, F), axis=chw_axes, keepdims=True)


def instance_norm(x, scale, B, epsilon=1e-5):
    """ONNX InstanceNormalization: (x − mean) / sqrt(var + ε) · scale + B, with the mean and
    biased variance of each channel over H×W."""
    x = np.asarray(x, F)
    mean = x.mean(axis=(1, 2), keepdims=True)
    var = ((x - mean) ** 2).mean(axis=(1, 2), keepdims=True)
    scale, B = (np.asarray(v, F)[:, None, None] for v in (scale, B))
    return (x - mean) / np.sqrt(var + epsilon) * scale + B


def softmax_channels(x, axis=1):
    """Softmax over NCHW `axis` (1 = C, default; 2 = H, 3 = W) of (C, H, W)."""
    x, a = np.asarray(x, F), axis - 1
    e = np.exp(x - x.max(axis=a, keepdims=True))
    return e / e.sum(axis=a, keepdims=True)


def reshape(x, shape):
    """ONNX Reshape of the NCHW tensor x[None] (0 copies a dim, -1 is inferred), stored as
    glcnn stores it: rank 4 drops the batch, anything else is a vector (F, 1, 1)."""
    x4 = np.asarray(x, F)[None]
    dims = [x4.shape[i] if d == 0 else int(d) for i, d in enumerate(shape)]
    y = x4.reshape(dims)
    return y[0] if y.ndim == 4 else y.reshape(-1, 1, 1)


def gemm(x, B, C=None, alpha=1.0, beta=1.0, transB=0):
    """ONNX Gemm with A = x as a row vector (1, K): α·A·B' + β·C, as a vector (N, 1, 1)."""
    a = np.asarray(x, F).reshape(1, -1)
    b = np.asarray(B, F).T if transB else np.asarray(B, F)
    y = alpha * (a @ b)
    if C is not None:
        y = y + beta * np.asarray(C, F)
    return y.reshape(-1, 1, 1)


# --- pooling, resizing, padding and layout --------------------------------------------------
def _same_pads(size, k, s, lower):
    """auto_pad SAME_*: output ceil(size / s); the odd pad goes last (UPPER) or first (LOWER)."""
    out = -(-size // s)
    total = max(0, (out - 1) * s + k - size)
    small, large = total // 2, total - total // 2
    return (large, small) if lower else (small, large)


def pool_pads(shape_hw, kernel_shape, strides, pads, auto_pad):
    """Explicit (top, left, bottom, right) pads for a pooling window and `auto_pad`."""
    if auto_pad in ("NOTSET", ""):
        return tuple(pads)
    if auto_pad == "VALID":
        return (0, 0, 0, 0)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        (pt, pb), (pl, pr) = (_same_pads(n, k, s, auto_pad == "SAME_LOWER")
                              for n, k, s in zip(shape_hw, kernel_shape, strides))
        return (pt, pl, pb, pr)
    raise UnsupportedOpError(f"reference: auto_pad={quote(auto_pad)}")


def _pool_windows(size, k, s, d, pad_begin, pad_end, ceil_mode):
    """Tap positions of every output window along one axis. With ceil_mode, a last window
    starting past the input and the begin padding is dropped (ONNX and PyTorch)."""
    span = size + pad_begin + pad_end - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + pad_begin:
        out -= 1
    return [[o * s - pad_begin + t * d for t in range(k)] for o in range(out)]


def pool(x, kind, kernel_shape, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1),
         ceil_mode=0, count_include_pad=0, auto_pad="NOTSET"):
    """ONNX MaxPool / AveragePool on (C, H, W); `kind` is "max" or "average".

    Each window's taps inside the input are reduced; for "average" the divisor counts the
    taps inside the input (count_include_pad=0) or inside input + explicit pads (=1).
    """
    x = np.asarray(x, F)
    c, h, w = x.shape
    pt, pl, pb, pr = pool_pads((h, w), kernel_shape, strides, pads, auto_pad)
    (kh, kw), (sy, sx), (dy, dx) = kernel_shape, strides, dilations
    rows_of = _pool_windows(h, kh, sy, dy, pt, pb, ceil_mode)
    cols_of = _pool_windows(w, kw, sx, dx, pl, pr, ceil_mode)
    y = np.zeros((c, len(rows_of), len(cols_of)), F)
    for oy, rows in enumerate(rows_of):
        for ox, cols in enumerate(cols_of):
            taps = [x[:, r, q] for r in rows for q in cols if 0 <= r < h and 0 <= q < w]
            if kind == "max":
                y[:, oy, ox] = np.max(taps, axis=0)
            elif count_include_pad:  # taps in input + explicit pads, not ceil_mode's extra
                n = sum(-pt <= r < h + pb for r in rows) * sum(-pl <= q < w + pr for q in cols)
                y[:, oy, ox] = np.sum(taps, axis=0) / n
            else:
                y[:, oy, ox] = np.mean(taps, axis=0)
    return y


def _resize_source(o, in_size, out_size, scale, mode):
    """Input coordinate of output `o` on one axis (ONNX coordinate_transformation_mode).

    Exact: `scale` is a Fraction, so ties such as 2.5 round as the spec says.
    """
    half = Fraction(1, 2)
    if mode == "asymmetric":
        return o / scale
    if mode == "half_pixel":
        return (o + half) / scale - half
    if mode == "pytorch_half_pixel":
        return (o + half) / scale - half if out_size > 1 else 0
    if mode == "align_corners":
        return Fraction(o * (in_size - 1), out_size - 1) if out_size > 1 else 0
    if mode == "tf_half_pixel_for_nn":
        return (o + half) / scale
    if mode == "half_pixel_symmetric":
        offset = Fraction(in_size, 2) * (1 - out_size / (scale * in_size))
        return offset + (o + half) / scale - half
    raise UnsupportedOpError(f"reference: coordinate_transformation_mode={quote(mode)}")


def _round(v, nearest_mode):
    if nearest_mode == "round_prefer_floor":
        return math.ceil(v - Fraction(1, 2))
    if nearest_mode == "round_prefer_ceil":
        return math.floor(v + Fraction(1, 2))
    if nearest_mode == "floor":
        return math.floor(v)
    if nearest_mode == "ceil":
        return math.ceil(v)
    raise UnsupportedOpError(f"reference: nearest_mode={quote(nearest_mode)}")


def resize(x, mode="nearest", scales=None, sizes=None,
           coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor"):
    """ONNX Resize on H and W of (C, H, W): `scales` = (sh, sw) or `sizes` = (oh, ow).

    Output size floor(in * scale); with `sizes`, scale = out / in. Nearest rounds the
    source coordinate by `nearest_mode` and clamps it to the image; linear clamps it to
    [0, in - 1] and interpolates the two neighbouring pixels on each axis.
    """
    x = np.asarray(x, F)
    c, h, w = x.shape
    if sizes is not None:
        oh, ow = int(sizes[0]), int(sizes[1])
        sh, sw = Fraction(oh, h), Fraction(ow, w)
    else:
        oh, ow = math.floor(h * scales[0]), math.floor(w * scales[1])
        sh, sw = Fraction(float(scales[0])), Fraction(float(scales[1]))
    y = np.zeros((c, oh, ow), F)
    for oy in range(oh):
        v = _resize_source(oy, h, oh, sh, coordinate_transformation_mode)
        for ox in range(ow):
            u = _resize_source(ox, w, ow, sw, coordinate_transformation_mode)
            if mode == "nearest":
                iy = min(max(_round(v, nearest_mode), 0), h - 1)
                ix = min(max(_round(u, nearest_mode), 0), w - 1)
                y[:, oy, ox] = x[:, iy, ix]
            else:
                y[:, oy, ox] = _bilinear(x, min(max(v, 0), h - 1), min(max(u, 0), w - 1))
    return y


def _bilinear(x, v, u):
    """x[:, v, u] for fractional (v, u) inside the image."""
    y0, x0 = math.floor(v), math.floor(u)
    y1, x1 = min(y0 + 1, x.shape[1] - 1), min(x0 + 1, x.shape[2] - 1)
    fy, fx = float(v - y0), float(u - x0)
    top = (1 - fx) * x[:, y0, x0] + fx * x[:, y0, x1]
    bottom = (1 - fx) * x[:, y1, x0] + fx * x[:, y1, x1]
    return (1 - fy) * top + fy * bottom


def pad(x, pads, mode="constant", value=0.0):
    """ONNX Pad of (C, H, W) with 4D `pads` = (n0, c0, top, left, n1, c1, bottom, right).

    Negative pads crop first (as onnxruntime); the positive ones then pad what is left with
    `value` (constant) or numpy's reflect, edge and wrap, which are ONNX's modes, or its
    symmetric (TF's MirrorPad SYMMETRIC).
    """
    x = np.asarray(x, F)
    top, left, bottom, right = pads[2], pads[3], pads[6], pads[7]
    _, h, w = x.shape
    x = x[:, max(-top, 0):h - max(-bottom, 0), max(-left, 0):w - max(-right, 0)]
    width = ((pads[1], pads[5]), (max(top, 0), max(bottom, 0)), (max(left, 0), max(right, 0)))
    extra = {"constant_values": value} if mode == "constant" else {}
    return np.pad(x, width, mode=mode, **extra)


def concat(xs, axis=1):
    """ONNX Concat of (C, H, W) tensors along NCHW `axis` 1 (C), 2 (H) or 3 (W), or -3..-1."""
    return np.concatenate([np.asarray(x, F) for x in xs], axis=int(axis) % 4 - 1)


def depth_to_space(x, blocksize, mode="DCR"):
    """ONNX DepthToSpace, written as the spec's reshape/transpose.

    DCR: y[c, h*b + i, w*b + j] = x[(i*b + j)*C' + c, h, w];
    CRD: y[c, h*b + i, w*b + j] = x[c*b*b + i*b + j, h, w]   (PyTorch PixelShuffle).
    """
    x = np.asarray(x, F)
    c, h, w = x.shape
    b = blocksize
    if mode == "DCR":
        t = x.reshape(b, b, c // (b * b), h, w).transpose(2, 3, 0, 4, 1)
    else:
        t = x.reshape(c // (b * b), b, b, h, w).transpose(0, 3, 1, 4, 2)
    return t.reshape(c // (b * b), h * b, w * b)

