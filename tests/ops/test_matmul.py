"""MatMul of two activations and of an activation by a constant, on operands placed on any
glcnn axes (a_axes, b_axes, out_axes): GPU vs reference at fp32, fp16 and u8 (batch-lane and
generic shaders, broadcast batches, K not a multiple of 4, K in the thousands), the reference
vs numpy / onnxruntime, the torch runner, and the errors. The vector form is test_gemm.py's."""

import numpy as np
import pytest
from ort_node import run_node
from precision_check import PRECISIONS, check, normal_inputs

import glcnn
from glcnn.graph import Graph, Node, reference
from glcnn.ops import make_op

CL, LC = [1, 0, 2], [1, 2, 0]  # rank-3 (1, M, K) stored (M, 1, K) / channels last (K, 1, M)

TENSORS = [  # (a shape, b shape, attrs, id)
    ((8, 40, 15), (8, 15, 40), {}, "attention-qk"),
    ((8, 40, 40), (8, 40, 15), {}, "attention-pv"),
    ((3, 5, 7), (3, 7, 4), {}, "c3-k7"),
    ((1, 5, 7), (13, 7, 4), {}, "batch-broadcast-a"),
    ((5, 6, 13), (1, 13, 3), {}, "batch-broadcast-b"),
    ((13, 1, 7), (7, 1, 5), {"a_axes": CL, "b_axes": CL, "out_axes": CL}, "cl"),
    ((7, 1, 13), (5, 1, 7), {"a_axes": LC, "b_axes": LC, "out_axes": LC}, "lc"),
    ((7, 1, 13), (7, 1, 5), {"a_axes": LC, "b_axes": CL, "out_axes": [1, 0, 2]}, "mixed"),
    ((5, 9, 3), (5, 3, 6), {"out_axes": [2, 0, 1]}, "out-permuted"),
    ((13, 1, 7), (7, 1, 5), {"a_axes": CL, "b_axes": CL, "out_axes": LC}, "b-gather"),
    ((7, 1, 13), (5, 1, 7), {"a_axes": LC, "b_axes": LC, "out_axes": CL}, "a-gather"),
    ((1, 4, 3), (8, 3, 5), {}, "a-batch-scalar"),
    ((3, 5, 257), (3, 257, 2), {}, "k257"),
    ((2, 3, 3001), (2, 3001, 2), {"a_axes": [0, 1, 2], "b_axes": [0, 1, 2],
                                  "out_axes": [1, 0, 2]}, "k3001-generic"),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("a", "b", "attrs"), [t[:3] for t in TENSORS],
                         ids=[t[3] for t in TENSORS])
def test_matmul_tensors(ctx, a, b, attrs, precision):
    xs = normal_inputs([a, b])
    xs[1] = (xs[1] / np.sqrt(max(b))).astype(np.float32)  # outputs O(1), as K ≤ max(b)
    check(ctx, "MatMul", attrs, [a, b], precision, inputs=xs)


CONSTANTS = [  # (a shape, B (K, N), attrs, id)
    ((5, 1, 13), (5, 7), {"a_axes": LC, "out_axes": LC}, "lc"),
    ((13, 1, 5), (5, 7), {"a_axes": CL, "out_axes": CL}, "cl"),
    ((3, 4, 6), (6, 9), {}, "heads"),
    ((40, 1, 120), (120, 33), {"a_axes": CL, "out_axes": CL}, "svtr-cl"),
    ((3, 1, 1), (1, 5), {"a_axes": [1, 0, 2]}, "vector-as-rows"),
    ((5, 1, 13), (5, 7), {"a_axes": LC, "out_axes": CL}, "lc-to-cl"),
    ((5, 1, 13), (5, 6), {"a_axes": LC, "out_axes": [2, 1, 0]}, "n-on-w"),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("a", "b", "attrs"), [t[:3] for t in CONSTANTS],
                         ids=[t[3] for t in CONSTANTS])
def test_matmul_constant(ctx, a, b, attrs, precision):
    w = (normal_inputs([b], seed=3)[0] / np.sqrt(b[0])).astype(np.float32)
    check(ctx, "MatMul", attrs, [a], precision, {"B": w})


def test_lane_forms_are_chosen():
    def form(shapes, attrs, weights=None):
        return make_op(Node("MatMul", "m", [f"x{i}" for i in range(len(shapes))], attrs,
                            weights or {}), shapes).defines()
    # heads on the channels of all three: one vec4 product per k
    assert form([(8, 4, 3), (8, 3, 5)], {}) == {"A_VECTOR": 1, "B_VECTOR": 1}
    # one head of a broadcasts: a scalar for all 4 lanes
    assert form([(1, 4, 3), (8, 3, 5)], {}) == {"B_VECTOR": 1}
    # m on the channels of a and y (a sequence stored (M, 1, K)); b does not depend on m
    assert form([(13, 1, 7), (7, 1, 5)], {"a_axes": CL, "b_axes": CL, "out_axes": CL}) == \
        {"A_VECTOR": 1}
    # n on y's channels, on b's W: 4 fetches per k; a does not depend on n
    assert form([(13, 1, 7), (7, 1, 5)], {"a_axes": CL, "b_axes": CL, "out_axes": LC}) == \
        {"B_GATHER": 1}
    assert form([(5, 1, 13)], {"a_axes": LC, "out_axes": LC}, {"B": np.ones((5, 2))}) == \
        {"B_VECTOR": 1, "CONSTANT_B": 1}
    assert form([(5, 1, 13)], {"a_axes": LC, "out_axes": CL}, {"B": np.ones((5, 2))}) == \
        {"A_GATHER": 1, "CONSTANT_B": 1}
    assert form([(6, 1, 1)], {}, {"B": np.ones((6, 2))}) == {}  # glcnn's dense layer


def test_reference_matches_numpy_and_onnxruntime():
    a, b = normal_inputs([(3, 5, 7), (3, 7, 4)], seed=4)
    graph = Graph({"a": a.shape, "b": b.shape}, [Node("MatMul", "y", ["a", "b"])], ["y"])
    got = reference.run(graph, {"a": a, "b": b})["y"]
    np.testing.assert_allclose(got, np.matmul(a.astype(np.float64), b), rtol=1e-12)
    np.testing.assert_allclose(got, run_node("MatMul", [a[None], b[None]], {})[0],
                               rtol=1e-5, atol=1e-5)
    # channels last: (1, M, K) stored (K, 1, M); y (1, M, N) stored (N, 1, M)
    x = a[0]  # (M, K) = (5, 7)
    lc = Graph({"x": (7, 1, 5)}, [Node("MatMul", "y", ["x"], {"a_axes": LC, "out_axes": LC},
                                       {"B": b[0]})], ["y"])
    got = reference.run(lc, {"x": x.T[:, None, :]})["y"]
    np.testing.assert_allclose(got[:, 0, :].T, x.astype(np.float64) @ b[0], rtol=1e-12)


@pytest.mark.parametrize(("shapes", "attrs", "weights"), [
    ([(3, 5, 7), (3, 7, 4)], {}, None),
    ([(13, 1, 7), (7, 1, 5)], {"a_axes": CL, "b_axes": CL, "out_axes": [1, 2, 0]}, None),
    ([(5, 1, 13)], {"a_axes": LC, "out_axes": LC}, {"B": (5, 7)}),
    ([(6, 1, 1)], {}, {"B": (6, 2)}),
], ids=["heads", "cl", "constant-lc", "vector"])
def test_torch_runner_matches_reference(shapes, attrs, weights):
    from glcnn.commands.torch_runner import TorchRunner
    names = [f"x{i}" for i in range(len(shapes))]
    w = {k: normal_inputs([s], seed=5)[0] for k, s in (weights or {}).items()}
    graph = Graph(dict(zip(names, shapes)), [Node("MatMul", "y", names, attrs, w)], ["y"])
    feeds = dict(zip(names, normal_inputs(shapes)))
    np.testing.assert_allclose(TorchRunner(graph, threads=1)(feeds)["y"],
                               reference.run(graph, feeds)["y"], rtol=1e-5, atol=1e-5)


ERRORS = [  # (shapes, attrs, weights, error, message)
    ([(3, 5, 7), (3, 6, 4)], {}, None, glcnn.ShapeError, r"inner sizes must match"),
    ([(3, 5, 7), (2, 7, 4)], {}, None, glcnn.ShapeError, r"batches match or be 1"),
    ([(3, 5, 7), (3, 7, 4)], {"a_axes": [0, 0, 2]}, None, glcnn.UnsupportedOpError,
     r"a_axes=\[0, 0, 2\] must be a permutation"),
    ([(3, 5, 7)], {}, {"B": np.ones((6, 2))}, glcnn.ShapeError, r"inner sizes must match"),
    ([(3, 5, 7)], {"out_axes": [0, 1]}, {"B": np.ones((7, 2))}, glcnn.UnsupportedOpError,
     r"out_axes=\[0, 1\] must have 3 values"),
]


@pytest.mark.parametrize(("shapes", "attrs", "weights", "error", "message"), ERRORS,
                         ids=["inner", "batch", "axes", "constant-inner", "axes-length"])
def test_errors(shapes, attrs, weights, error, message):
    names = [f"x{i}" for i in range(len(shapes))]
    with pytest.raises(error, match=f"layer 'm' \\(MatMul\\): .*{message}"):
        make_op(Node("MatMul", "m", names, attrs, weights or {}), shapes)
