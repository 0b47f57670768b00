"""Every registered op other than the convolutions, against glcnn.graph.reference."""

import numpy as np
import pytest
from helpers import PRECISIONS, atlas_texels, check_op, single_op_graph, storable

import glcnn
from glcnn.graph import Node
from glcnn.layout import pack
from glcnn.ops import REGISTRY, make_op

SHAPES = [(1, 1, 1), (3, 5, 7), (5, 1, 1), (13, 9, 4), (1, 11, 3)]
SHAPE_IDS = ["x".join(map(str, s)) for s in SHAPES]

# (op, attrs, id); PRelu's slope weight is added per shape by _weights.
ACTIVATIONS = [
    ("Relu", {}, "relu"),
    ("LeakyRelu", {}, "leakyrelu"),
    ("LeakyRelu", {"alpha": 0.2}, "leakyrelu-a0.2"),
    ("PRelu", {}, "prelu-per-channel"),
    ("PRelu", {"slope_shape": "C11"}, "prelu-c11"),
    ("PRelu", {"slope_shape": "1"}, "prelu-shared"),
    ("Clip", {"min": 0.0, "max": 6.0}, "clip-relu6"),
    ("Clip", {"min": -0.5, "max": 1.5}, "clip-asym"),
    ("Clip", {}, "clip-unbounded"),
    ("Sigmoid", {}, "sigmoid"),
    ("Tanh", {}, "tanh"),
    ("Elu", {}, "elu"),
    ("Elu", {"alpha": 0.7}, "elu-a0.7"),
    ("HardSigmoid", {}, "hardsigmoid"),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, "hardsigmoid-a0.3-b0.4"),
    ("HardSwish", {}, "hardswish"),
    ("Silu", {}, "silu"),
]
SATURATING = ("Sigmoid", "Tanh", "Elu", "Silu", "HardSigmoid", "HardSwish")


def _split(attrs, c, seed=0):
    """(attrs, weights): PRelu slopes of the requested shape, random and of both signs."""
    attrs = dict(attrs)
    shape = {"C": (c,), "C11": (c, 1, 1), "1": (1,)}[attrs.pop("slope_shape", "C")]
    slope = np.random.default_rng(seed).uniform(-0.5, 1.5, shape).astype(np.float32)
    return attrs, {"slope": slope}


def _activation_args(op, attrs, shape):
    return _split(attrs, shape[0]) if op == "PRelu" else (attrs, {})


def _scaled_inputs(shape, scale, seed=0):
    return [np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * scale]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize(("op", "attrs"), [a[:2] for a in ACTIVATIONS],
                         ids=[a[2] for a in ACTIVATIONS])
def test_activation(ctx, op, attrs, shape, precision):
    attrs, weights = _activation_args(op, attrs, shape)
    check_op(ctx, op, attrs, [shape], weights, precision, inputs=_scaled_inputs(shape, 3.0))


def _extremes(shape):
    """±100 and the float32 exp() overflow edges (|x| ≈ 88.7), plus small values."""
    edges = np.array([-100, -90, -89, -88.5, -44.5, -20, -1e-3, 0, 1e-3, 20, 44.5, 88.5, 89,
                      90, 100], np.float32)
    return [np.resize(edges, shape).astype(np.float32)]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("op", SATURATING)
def test_activation_large_inputs_stay_finite(ctx, op, precision):
    shape = (5, 3, 5)  # 75 values: every edge value lands in every lane
    check_op(ctx, op, {}, [shape], None, precision, inputs=_extremes(shape))


# --- BatchNormalization ---------------------------------------------------------------------
def _bn_weights(c, seed=0):
    rng = np.random.default_rng(seed)
    return {"scale": rng.standard_normal(c), "B": rng.standard_normal(c),
            "mean": rng.standard_normal(c), "var": rng.uniform(0.05, 3.0, c)}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("epsilon", [None, 1e-3], ids=["eps-default", "eps1e-3"])
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_batchnorm(ctx, shape, epsilon, precision):
    attrs = {} if epsilon is None else {"epsilon": epsilon}
    weights = {k: v.astype(np.float32) for k, v in _bn_weights(shape[0]).items()}
    check_op(ctx, "BatchNormalization", attrs, [shape], weights, precision)


# --- Add and Mul ------------------------------------------------------------------------------
def _constant(form, c, seed=0):
    shape = {"scalar": (), "one": (1,), "C": (c,), "C11": (c, 1, 1), "1C11": (1, c, 1, 1)}[form]
    return np.asarray(np.random.default_rng(seed).standard_normal(shape), np.float32)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("form", ["same-shape", "channel-tensor"])
@pytest.mark.parametrize("op", ["Add", "Mul"])
def test_binary_tensors(ctx, op, form, shape, precision):
    other = shape if form == "same-shape" else (shape[0], 1, 1)
    check_op(ctx, op, {}, [shape, other], None, precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("form", ["scalar", "one", "C", "C11", "1C11"])
@pytest.mark.parametrize("op", ["Add", "Mul"])
def test_binary_constant(ctx, op, form, shape, precision):
    check_op(ctx, op, {}, [shape], {"B": _constant(form, shape[0])}, precision)


# --- Slice ------------------------------------------------------------------------------------
BIG = 2**63 - 1  # ONNX's "to the end"
SLICES = [
    ({"starts": [1, 2], "ends": [7, 10]}, "default-axes"),
    ({"starts": [1, 2], "ends": [7, 10], "axes": [2, 3], "steps": [1, 1]}, "explicit-steps"),
    ({"starts": [2, 1], "ends": [6, 8], "axes": [3, 2]}, "axes-reversed"),
    ({"starts": [2], "ends": [5], "axes": [2]}, "rows-only"),
    ({"starts": [-4], "ends": [-1], "axes": [-1]}, "negative-start-end"),
    ({"starts": [-3, 0], "ends": [BIG, -2], "axes": [-2, -1]}, "negative-axes"),
    ({"starts": [-100, 3], "ends": [100, BIG], "axes": [2, 3]}, "clamped"),
    ({"starts": [4, 5], "ends": [5, 6]}, "one-pixel"),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", [(3, 9, 11), (13, 8, 10), (1, 7, 12)],
                         ids=["c3-9x11", "c13-8x10", "c1-7x12"])
@pytest.mark.parametrize("attrs", [s[0] for s in SLICES], ids=[s[1] for s in SLICES])
def test_slice(ctx, attrs, shape, precision):
    check_op(ctx, "Slice", attrs, [shape], None, precision)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_slice_of_one_pixel_image(ctx, precision):
    check_op(ctx, "Slice", {"starts": [0, -1], "ends": [BIG, 1]}, [(5, 1, 1)], None, precision)


# --- the padding lanes and tiles stay zero even where f(0) != 0 ----------------------------
PADDING_CASES = [
    ("Sigmoid", {}, {}),
    ("HardSigmoid", {}, {}),
    ("Clip", {"min": 1.0, "max": 2.0}, {}),
    ("Add", {}, {"B": np.arange(1, 10, dtype=np.float32)}),
    ("Conv", {"activation": {"op": "Sigmoid"}},
     {"W": np.ones((9, 9, 1, 1), np.float32), "B": np.ones(9, np.float32)}),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("op", "attrs", "weights"), PADDING_CASES,
                         ids=[c[0] + ("+Sigmoid" if c[1].get("activation") else "")
                              for c in PADDING_CASES])
def test_unused_lanes_and_tiles_are_zero(ctx, op, attrs, weights, precision):
    shape = (9, 3, 4)  # 3 slices in a 2×2 grid: lanes 1-3 of slice 2 and tile (1, 1) unused
    graph = single_op_graph(op, attrs, [shape], weights)
    x = storable(np.random.default_rng(0).standard_normal(shape), precision)
    with glcnn.Pipeline(graph, ctx, precision=precision) as pipe:
        y = pipe.run(x)
        raw = atlas_texels(pipe.texture("y"), shape)
    unused = pack(np.ones(shape, np.float32)) == 0
    assert unused.sum() == 3 * 12 + 4 * 12, "the test's picture of the padding is wrong"
    assert not raw[unused].any(), f"{op} {attrs} {precision}: padding texels are not zero"
    np.testing.assert_array_equal(raw, pack(y), err_msg=f"{op} {precision}")


# --- errors -----------------------------------------------------------------------------------
ERRORS = [
    ("NotAnOp", {}, {}, [(3, 4, 4)], glcnn.UnsupportedOpError, "op type 'NotAnOp'"),
    ("Slice", {"starts": [0], "ends": [2], "axes": [1], "steps": [2]}, {}, [(3, 4, 4)],
     glcnn.UnsupportedOpError, "1 on the channel axis"),
    ("Slice", {"starts": [0], "ends": [1], "axes": [0]}, {}, [(3, 4, 4)],
     glcnn.UnsupportedOpError, "axes"),
    ("Slice", {"starts": [0, 0], "ends": [4, 4], "steps": [-1, 1]}, {}, [(3, 4, 4)],
     glcnn.UnsupportedOpError, "steps"),
    ("Slice", {"starts": [0, 0], "ends": [4]}, {}, [(3, 4, 4)], glcnn.UnsupportedOpError,
     "starts/ends"),
    ("Slice", {"starts": [3, 0], "ends": [2, 4]}, {}, [(3, 4, 4)], glcnn.ShapeError, "empty"),
    ("Slice", {"starts": [9], "ends": [BIG], "axes": [3]}, {}, [(3, 4, 4)], glcnn.ShapeError,
     "empty"),
    ("Add", {}, {}, [(3, 4, 4), (3, 4, 2)], glcnn.ShapeError, "cannot broadcast"),
    ("Add", {}, {}, [(3, 4, 4), (2, 4, 4)], glcnn.ShapeError, "cannot broadcast"),
    ("Mul", {}, {}, [(3, 4, 4), (4, 1, 1)], glcnn.ShapeError, "cannot broadcast"),
    ("Mul", {}, {"B": np.ones(2, np.float32)}, [(3, 4, 4)], glcnn.UnsupportedOpError,
     "constant B has 2 values"),
    ("Add", {}, {}, [(3, 4, 4)], glcnn.UnsupportedOpError, "second tensor input"),
    ("PRelu", {}, {"slope": np.ones(2, np.float32)}, [(3, 4, 4)], glcnn.WeightError,
     "slope has 2 values"),
    ("PRelu", {}, {}, [(3, 4, 4)], glcnn.WeightError, "missing weight 'slope'"),
    ("Relu", {"activation": {"op": "Sigmoid"}}, {}, [(3, 4, 4)], glcnn.UnsupportedOpError,
     "second fused activation"),
    ("Add", {"activation": {"op": "NotAnActivation"}}, {"B": np.ones(1, np.float32)}, [(3, 4, 4)],
     glcnn.UnsupportedOpError, "cannot fuse activation 'NotAnActivation'"),
    ("BatchNormalization", {}, {**_bn_weights(3), "var": -np.ones(3)}, [(3, 4, 4)],
     glcnn.WeightError, "var \\+ epsilon must be positive"),
    ("BatchNormalization", {}, {**_bn_weights(3), "mean": np.ones(4)}, [(3, 4, 4)],
     glcnn.WeightError, "'mean' has shape \\(4,\\)"),
    ("BatchNormalization", {}, {**_bn_weights(3), "scale": np.array([1, np.nan, 1])},
     [(3, 4, 4)], glcnn.WeightError, "NaN"),
]
ERROR_IDS = ["unknown-op", "slice-channel-step", "slice-batch-axis", "slice-negative-step",
             "slice-length-mismatch", "slice-empty-rows", "slice-start-past-end",
             "add-broadcast-w", "add-broadcast-c", "mul-broadcast-channels",
             "mul-constant-size", "add-no-operand", "prelu-slope-size", "prelu-no-slope",
             "activation-fused-twice", "unknown-fused-activation", "bn-negative-var",
             "bn-mean-shape", "bn-nan-scale"]


@pytest.mark.parametrize(("op", "attrs", "weights", "shapes", "error", "message"), ERRORS,
                         ids=ERROR_IDS)
def test_invalid_node(op, attrs, weights, shapes, error, message):
    node = Node(op, "layer_under_test", [f"x{i}" for i in range(len(shapes))], attrs, weights)
    with pytest.raises(error, match=message) as info:
        make_op(node, shapes)
    assert "'layer_under_test'" in str(info.value)


def test_ops_under_test_are_registered():
    """Guards against renames: each op tested here and in test_conv.py is in the registry."""
    tested = {a[0] for a in ACTIVATIONS} | {"BatchNormalization", "Add", "Mul", "Slice"}
    tested |= {"Conv", "ConvTranspose"}  # tests/ops/test_conv.py
    assert tested <= set(REGISTRY), f"not registered: {tested - set(REGISTRY)}"
