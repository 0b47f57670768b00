"""How many elements folding an ONNX node would allocate, from its constant inputs' shapes,
values and attributes, before it is evaluated (GL-free; used by onnx_fold).

`elements(node, values, attrs)` is an upper bound on the node's largest output and its
reference implementation's largest intermediate (Conv's im2col, say), or None for an op
whose size glcnn cannot bound (the folder refuses to evaluate it). Ops that never make
more elements than their largest input (elementwise, reductions, Reshape, Slice, ...) are
bounded by that input; the ops that can grow (Pad, Resize, Tile, Expand, ConstantOfShape,
Range, Gather, Concat, MatMul, Conv, OneHot, ...) each have a formula here.
"""

import math

import numpy as np

# Ops whose outputs (and the reference implementation's temporaries) hold at most as many
# elements as their largest input (NonZero: at most rank times).
NOT_GROWING = {
    "Abs", "Acos", "Acosh", "ArgMax", "ArgMin", "Asin", "Asinh", "Atan", "Atanh",
    "AveragePool", "BatchNormalization", "BitwiseNot", "Cast", "CastLike", "Ceil", "Celu",
    "Clip", "Compress", "Cos", "Cosh", "CumSum", "DepthToSpace", "DequantizeLinear", "Det",
    "Dropout", "DynamicQuantizeLinear", "Elu", "Erf", "Exp", "EyeLike", "Flatten", "Floor",
    "Gelu", "GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool", "GroupNormalization",
    "HardSigmoid", "HardSwish", "Hardmax", "Identity", "InstanceNormalization", "IsInf",
    "IsNaN", "LayerNormalization", "LeakyRelu", "Log", "LogSoftmax", "LpNormalization",
    "LpPool", "LRN", "MaxPool", "MeanVarianceNormalization", "Mish", "Neg", "NonZero", "Not",
    "QuantizeLinear", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
    "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
    "Relu", "Reshape", "ReverseSequence", "Round", "Scatter", "ScatterElements", "ScatterND",
    "Selu", "Shape", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Size", "Slice", "Softmax",
    "Softplus", "Softsign", "SpaceToDepth", "Split", "Sqrt", "Squeeze", "Tan", "Tanh",
    "ThresholdedRelu", "TopK", "Transpose", "Trilu", "Unique", "Unsqueeze",
}
# Elementwise ops whose inputs broadcast together.
BROADCASTING = {
    "Add", "And", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Div", "Equal",
    "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Max", "Mean", "Min", "Mod", "Mul",
    "Or", "Pow", "PRelu", "Sub", "Sum", "Where", "Xor",
}


def elements(node, values: list, attrs: dict, opset: int) -> int | None:
    """Upper bound of the elements folding `node` allocates at once, or None if unknown.

    Args:
        values: the constant inputs (None for an absent optional input).
        attrs: the node's attributes as plain values.
    """
    op = node.op_type
    if op == "Constant":  # a dense value is in the file; a sparse one is made dense
        sparse = attrs.get("sparse_value")
        return 1 if sparse is None else math.prod(abs(d) for d in sparse.dims)
    shapes = [() if v is None else tuple(np.shape(v)) for v in values]
    largest = max((math.prod(s) for s in shapes), default=1)
    if op in NOT_GROWING:
        return largest * max((len(s) for s in shapes), default=1) if op == "NonZero" \
            else largest
    if op in BROADCASTING:
        return _broadcast(shapes)
    formula = FORMULAS.get(op)
    return None if formula is None else formula(values, shapes, attrs, opset)


def _ints(value) -> list[int]:
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _broadcast(shapes) -> int:
    rank = max((len(s) for s in shapes), default=0)
    dims = [max((s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0), default=1)
            for i in range(rank)]
    return math.prod(dims)


def _expand(values, shapes, attrs, opset):
    target = [abs(d) for d in _ints(values[1])]
    return _broadcast([shapes[0], tuple(target)])


def _tile(values, shapes, attrs, opset):
    return math.prod(shapes[0]) * math.prod(abs(r) for r in _ints(values[1]))


def _constant_of_shape(values, shapes, attrs, opset):
    return math.prod(abs(d) for d in _ints(values[0]))


def _range(values, shapes, attrs, opset):
    start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in values[:3])
    steps = abs((limit - start) / delta) if delta else 0.0
    return int(min(math.ceil(steps), 1 << 62)) if math.isfinite(steps) else 1 << 62


def _pad(values, shapes, attrs, opset):
    """pads: an input from opset 11, attribute "pads" ("paddings" in opset 1) before."""
    pads = _ints(values[1]) if len(values) > 1 and values[1] is not None else \
        list(attrs.get("pads", attrs.get("paddings", [])))
    dims = list(shapes[0])
    axes = _ints(values[3]) if len(values) > 3 and values[3] is not None else \
        list(range(len(pads) // 2))
    for i, axis in enumerate(axes):
        if -len(dims) <= axis < len(dims):
            dims[axis] += max(pads[i], 0) + max(pads[i + len(axes)], 0)
    return math.prod(dims)


def _resize(values, shapes, attrs, opset):
    """Resize (X, roi, scales, sizes) from opset 11, (X, scales) in opset 10; Upsample
    (X, scales) from opset 9, attribute "scales" before."""
    dims = list(shapes[0])
    scales = sizes = None
    if len(values) == 2 or (opset < 11 and len(values) > 1):
        scales = values[1]
    elif len(values) > 2:
        scales, sizes = values[2], values[3] if len(values) > 3 else None
    if scales is None and "scales" in attrs:
        scales = attrs["scales"]
    axes = list(attrs.get("axes", range(len(dims))))
    if sizes is not None and np.size(sizes):
        new = [abs(s) for s in _ints(sizes)]
    elif scales is not None and np.size(scales):
        new = [math.ceil(dims[a] * min(abs(float(s)), 1e12))
               for a, s in zip(axes, np.asarray(scales, np.float64).reshape(-1))]
    else:
        return None
    for axis, size in zip(axes, new):
        if -len(dims) <= axis < len(dims):
            dims[axis] = size
    return math.prod(dims) * 2  # the reference keeps coordinates beside the output


def _gather(values, shapes, attrs, opset):
    data, indices = shapes[0], shapes[1]
    axis = int(attrs.get("axis", 0)) % max(len(data), 1)
    return math.prod(data[:axis]) * math.prod(indices) * math.prod(data[axis + 1:])


def _gather_nd(values, shapes, attrs, opset):
    data, indices = shapes[0], shapes[1]
    batch = int(attrs.get("batch_dims", 0))
    last = indices[-1] if indices else 0
    return math.prod(indices[:-1]) * math.prod(data[batch + last:])


def _concat(values, shapes, attrs, opset):
    return sum(math.prod(s) for s in shapes)


def _matmul(values, shapes, attrs, opset):
    a, b = (s if len(s) > 1 else (1, *s) for s in shapes[:2])
    batch = _broadcast([a[:-2], b[:-2]])
    return batch * a[-2] * b[-1] + math.prod(a) + math.prod(b)


def _gemm(values, shapes, attrs, opset):
    a, b = shapes[0], shapes[1]
    m = a[1] if attrs.get("transA") else a[0]
    n = b[0] if attrs.get("transB") else b[-1]
    return m * n + math.prod(a) + math.prod(b)


def _one_hot(values, shapes, attrs, opset):
    return math.prod(shapes[0]) * abs(int(np.asarray(values[1]).reshape(-1)[0]))


def _einsum(values, shapes, attrs, opset):
    """At most the product of every index's size (the full outer product)."""
    sizes: dict[str, int] = {}
    terms = str(attrs.get("equation", "")).split("->")[0].replace(" ", "").split(",")
    for term, shape in zip(terms, shapes):
        if "." in term or len(term) != len(shape):
            return None
        for letter, dim in zip(term, shape):
            sizes[letter] = max(sizes.get(letter, 1), dim)
    return math.prod(sizes.values())


def _conv(values, shapes, attrs, opset):
    """N · max(M, C·kernel) · the padded input's spatial size: the output and im2col."""
    x, w = shapes[0], shapes[1]
    spatial = x[2:]
    pads = list(attrs.get("pads", [0] * 2 * len(spatial)))
    padded = [d + abs(pads[i]) + abs(pads[i + len(spatial)]) if len(pads) == 2 * len(spatial)
              else d for i, d in enumerate(spatial)]
    return x[0] * max(w[0], math.prod(w[1:])) * math.prod(padded)


def _conv_transpose(values, shapes, attrs, opset):
    x, w = shapes[0], shapes[1]
    spatial, kernel = x[2:], w[2:]
    strides = list(attrs.get("strides", [1] * len(spatial)))
    dilations = list(attrs.get("dilations", [1] * len(spatial)))
    extra = list(attrs.get("output_padding", [0] * len(spatial)))
    if "output_shape" in attrs:
        out = [abs(d) for d in attrs["output_shape"]][-len(spatial):]
    else:
        out = [(d - 1) * abs(s) + (k - 1) * abs(dl) + 1 + abs(e)
               for d, s, k, dl, e in zip(spatial, strides, kernel, dilations, extra)]
    return x[0] * max(w[1] * int(attrs.get("group", 1)), math.prod(w[1:]) * math.prod(spatial),
                      1) * max(math.prod(out), 1)


FORMULAS = {
    "ConstantOfShape": _constant_of_shape, "Expand": _expand, "Tile": _tile, "Range": _range,
    "Pad": _pad, "Resize": _resize, "Upsample": _resize, "Gather": _gather,
    "GatherElements": lambda values, shapes, attrs, opset: math.prod(shapes[1]),
    "GatherND": _gather_nd, "Concat": _concat, "MatMul": _matmul, "Gemm": _gemm,
    "OneHot": _one_hot, "Einsum": _einsum, "Conv": _conv, "ConvTranspose": _conv_transpose,
}
