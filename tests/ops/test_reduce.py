"""GlobalAveragePool, GlobalMaxPool, ReduceMean, ReduceMax and InstanceNormalization's
internal statistics ops: GPU vs reference, reference vs PyTorch and onnxruntime, the
W-then-H split of `glcnn.graph.passes.expand_reductions`, and the errors."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import PRECISIONS, check_op, optimised_matches_original, random_inputs, signature
from ort_node import run_node

import glcnn
from glcnn.graph import Graph, Node, reference
from glcnn.ops import make_op

SHAPES = [(1, 1, 1), (3, 5, 7), (5, 1, 1), (13, 9, 4), (257, 3, 3), (4, 1, 9)]
SHAPE_IDS = ["c{}-{}x{}".format(*s) for s in SHAPES]

CASES = [  # (op, attrs, id)
    ("GlobalAveragePool", {}, "gap"),
    ("GlobalMaxPool", {}, "gmp"),
    ("ReduceMean", {"axes": [2, 3]}, "mean-hw"),
    ("ReduceMean", {"axes": [-1, -2], "keepdims": 0}, "mean-hw-nokeepdims"),
    ("ReduceMean", {"axes": [3]}, "mean-w"),
    ("ReduceMean", {"axes": [2], "keepdims": 1}, "mean-h"),
    ("ReduceMax", {"axes": [2, 3]}, "max-hw"),
    ("ReduceMax", {"axes": [-1]}, "max-w"),
    ("ReduceMax", {"axes": [2]}, "max-h"),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize(("op", "attrs"), [c[:2] for c in CASES], ids=[c[2] for c in CASES])
def test_reduce(ctx, op, attrs, shape, precision):
    check_op(ctx, op, attrs, [shape], None, precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("op", "attrs"), [c[:2] for c in CASES[:5]], ids=[c[2] for c in CASES[:5]])
def test_reduce_large_plane_in_one_pass(ctx, op, attrs, precision):
    check_op(ctx, op, attrs, [(5, 64, 64)], None, precision)


INTERNAL = [  # InstanceNormalization's statistics (see glcnn/ops/reduce.py)
    ("InstanceNormMean", [2, 3], 1), ("InstanceNormMean", [3], 1),
    ("InstanceNormVariance", [2, 3], 2), ("InstanceNormVariance", [2], 2),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", [(3, 5, 7), (13, 9, 4), (1, 1, 1)],
                         ids=["c3-5x7", "c13-9x4", "c1-1x1"])
@pytest.mark.parametrize(("op", "axes", "inputs"), INTERNAL,
                         ids=[f"{op}-{'-'.join(map(str, a))}" for op, a, _ in INTERNAL])
def test_instancenorm_statistics(ctx, op, axes, inputs, shape, precision):
    in_shapes = [shape, (shape[0], 1, 1)][:inputs]
    check_op(ctx, op, {"axes": axes}, in_shapes, None, precision)


# --- the split into a W pass and an H pass ----------------------------------------------------
SPLITS = [  # (op, attrs, input shape, ops after optimize)
    ("GlobalAveragePool", {}, (5, 64, 64), ["ReduceMean", "ReduceMean"]),
    ("GlobalMaxPool", {}, (3, 33, 37), ["ReduceMax", "ReduceMax"]),
    ("ReduceMean", {"axes": [2, 3], "keepdims": 0}, (13, 40, 31), ["ReduceMean", "ReduceMean"]),
    ("GlobalAveragePool", {}, (3, 224, 224), ["ReduceMean", "ReduceMean"]),
    ("GlobalAveragePool", {}, (5, 20, 20), ["GlobalAveragePool"]),  # small: one pass is faster
    ("ReduceMean", {"axes": [3]}, (5, 64, 64), ["ReduceMean"]),  # one axis: already parallel
    ("ReduceMax", {"axes": [2, 3]}, (5, 1, 2000), ["ReduceMax"]),  # nothing to split (fits 4096²)
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("op", "attrs", "shape", "after"), SPLITS,
                         ids=[f"{s[0]}-{'x'.join(map(str, s[2]))}" for s in SPLITS])
def test_optimised_reduction(ctx, op, attrs, shape, after, precision):
    graph = Graph({"x": shape}, [Node(op, "y", ["x"], dict(attrs))], ["y"])
    optimised = optimised_matches_original(ctx, graph, precision)
    assert signature(optimised) == after
    assert optimised.nodes[-1].name == "y"
    if len(after) == 2:
        assert optimised.nodes[0].attrs["axes"] == [3] and optimised.nodes[1].attrs["axes"] == [2]


# --- the reference against PyTorch and onnxruntime (GL-free) --------------------------------
def _graph_ref(op, attrs, x):
    graph = Graph({"x": x.shape}, [Node(op, "y", ["x"], dict(attrs))], ["y"])
    return reference.run(graph, {"x": x})["y"]


def test_reference_matches_torch():
    x = random_inputs([(5, 7, 6)], seed=3)[0]
    t = torch.from_numpy(x.astype(np.float64))[None]
    expected = {
        ("GlobalAveragePool", ()): F.adaptive_avg_pool2d(t, 1),
        ("GlobalMaxPool", ()): F.adaptive_max_pool2d(t, 1),
        ("ReduceMean", (2, 3)): t.mean((2, 3), keepdim=True),
        ("ReduceMean", (3,)): t.mean(3, keepdim=True),
        ("ReduceMax", (2,)): t.amax(2, keepdim=True),
    }
    for (op, axes), want in expected.items():
        got = _graph_ref(op, {"axes": list(axes)} if axes else {}, x)
        np.testing.assert_allclose(got, want[0].numpy(), rtol=1e-12, err_msg=f"{op} {axes}")


@pytest.mark.parametrize(("op", "attrs"), [c[:2] for c in CASES], ids=[c[2] for c in CASES])
def test_reference_matches_onnxruntime(op, attrs):
    x = random_inputs([(13, 9, 4)], seed=4)[0]
    # Opset 19: ReduceMean/ReduceMax take the axes as an input.
    axes = [np.array(attrs["axes"], np.int64)] if "axes" in attrs else []
    want = run_node(op, [x], {k: v for k, v in attrs.items() if k != "axes"}, axes)
    got = _graph_ref(op, attrs, x)
    # keepdims=0 over H and W gives ONNX (1, C): glcnn's vector (C, 1, 1).
    np.testing.assert_allclose(got, want.reshape(got.shape), rtol=1e-6, atol=1e-7)


# --- errors name the layer and the value --------------------------------------------------------
ERRORS = [  # (op, attrs, message fragment)
    ("ReduceMean", {"axes": [1, 2]}, r"axes=\[1, 2\] unsupported"),
    ("ReduceMax", {"axes": [0, 2]}, r"axes=\[0, 2\] unsupported"),
    ("ReduceMean", {}, r"axes=all \(default\) unsupported"),
    ("ReduceMean", {"axes": []}, r"axes=\[\] unsupported"),
    ("ReduceMean", {"axes": [4]}, r"axes=\[4\] out of range"),
    ("ReduceMax", {"axes": [3], "keepdims": 0}, r"keepdims=0 with axes=\[3\]"),
]


ERROR_IDS = ["channel-with-h", "batch-axis", "no-axes", "empty-axes", "axis-out-of-range",
             "keepdims0-one-axis"]


@pytest.mark.parametrize(("op", "attrs", "message"), ERRORS, ids=ERROR_IDS)
def test_unsupported_axes(op, attrs, message):
    with pytest.raises(glcnn.UnsupportedOpError, match=f"layer 'r' \\({op}\\): {message}"):
        make_op(Node(op, "r", ["x"], attrs), [(3, 4, 5)])


def test_variance_needs_a_channel_mean():
    node = Node("InstanceNormVariance", "v", ["x", "m"], {"axes": [2, 3]})
    with pytest.raises(glcnn.ShapeError, match=r"layer 'v'.*mean input has shape \(3, 4, 5\)"):
        make_op(node, [(3, 4, 5), (3, 4, 5)])
