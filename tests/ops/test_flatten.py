"""Flatten and Reshape to a vector: C order on the GPU, identity cases and their removal by
`glcnn.graph.passes.drop_identity_reshapes`, reference vs numpy/onnxruntime, and the errors."""

import copy

import numpy as np
import pytest
from helpers import (
    PRECISIONS,
    check_op,
    conv_node,
    optimised_matches_original,
    random_inputs,
    signature,
)
from ort_node import run_node

import glcnn
from glcnn.graph import Graph, Node, passes, reference
from glcnn.ops import make_op

SHAPES = [(1, 1, 1), (3, 5, 7), (5, 1, 1), (13, 9, 4), (257, 3, 3), (2, 1, 9)]
SHAPE_IDS = ["c{}-{}x{}".format(*s) for s in SHAPES]
FORMS = [  # (op, attrs, id)
    ("Flatten", {}, "flatten"),
    ("Flatten", {"axis": 0}, "flatten-axis0"),
    ("Flatten", {"axis": -3}, "flatten-axis-3"),
    ("Reshape", {"shape": [1, -1]}, "reshape-1x-1"),
    ("Reshape", {"shape": [-1]}, "reshape-1d"),
    ("Reshape", {"shape": [0, -1, 1, 1]}, "reshape-0x-1x1x1"),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize(("op", "attrs"), [f[:2] for f in FORMS], ids=[f[2] for f in FORMS])
def test_to_vector(ctx, op, attrs, shape, precision):
    check_op(ctx, op, attrs, [shape], None, precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", [(13, 9, 4), (3, 1, 1)], ids=["c13-9x4", "c3-1x1"])
def test_reshape_to_own_shape_is_a_copy(ctx, shape, precision):
    check_op(ctx, "Reshape", {"shape": [1, *shape]}, [shape], None, precision)
    check_op(ctx, "Reshape", {"shape": [0, 0, 0, 0]}, [shape], None, precision)


def test_c_order_on_the_gpu(ctx):
    x = np.arange(5 * 3 * 2, dtype=np.float32).reshape(5, 3, 2)
    graph = Graph({"x": x.shape}, [Node("Flatten", "f", ["x"], {"axis": 1})], ["f"])
    with glcnn.Pipeline(graph, ctx) as pipe:
        np.testing.assert_array_equal(pipe.run(x), x.reshape(-1, 1, 1))


# --- optimize drops identity reshapes -------------------------------------------------------------
def test_vector_flatten_is_absorbed_by_its_producer(ctx):
    graph = Graph({"x": (6, 8, 8)}, [
        Node("GlobalAveragePool", "gap", ["x"]), Node("Flatten", "flat", ["gap"], {"axis": 1}),
        Node("Gemm", "fc", ["flat"], {"transB": 1}, {"B": np.ones((3, 6), np.float32)})],
        ["fc"])
    optimised = optimised_matches_original(ctx, graph)
    assert signature(optimised) == ["GlobalAveragePool", "Gemm"]
    assert optimised.nodes[0].name == "flat"


def test_identity_reshape_of_a_graph_input_is_rewired(ctx):
    graph = Graph({"x": (6, 1, 1)}, [
        Node("Reshape", "r", ["x"], {"shape": [1, -1]}),
        Node("Softmax", "s", ["r"], {"axis": 1})], ["s"])
    optimised = optimised_matches_original(ctx, graph)
    assert signature(optimised) == ["Softmax"] and optimised.nodes[0].inputs == ["x"]


def test_reshapes_that_move_texels_or_are_outputs_stay(ctx):
    graph = Graph({"x": (3, 4, 5)}, [
        conv_node("conv", "x", 3, 8), Node("Flatten", "flat", ["conv"]),
        Node("Reshape", "same", ["x"], {"shape": [1, 3, 4, 5]})], ["flat", "same"])
    assert signature(optimised_matches_original(ctx, graph)) == ["Conv", "Flatten", "Reshape"]


# --- the reference (GL-free) ----------------------------------------------------------------------
@pytest.mark.parametrize(("op", "attrs"), [f[:2] for f in FORMS] + [
    ("Reshape", {"shape": [1, 13, 9, 4]})], ids=[f[2] for f in FORMS] + ["reshape-same"])
def test_reference_matches_onnxruntime(op, attrs):
    x = random_inputs([(13, 9, 4)], seed=1)[0]
    graph = Graph({"x": x.shape}, [Node(op, "y", ["x"], dict(attrs))], ["y"])
    got = reference.run(graph, {"x": x})["y"]
    if op == "Reshape":
        want = run_node(op, [x], {}, [np.array(attrs["shape"], np.int64)])
    else:
        want = run_node(op, [x], attrs)
    if want.size == got.size:  # run_node drops axis 0: of a 1-D (F,) result that is F itself
        np.testing.assert_array_equal(got.ravel(), want.ravel())
    np.testing.assert_array_equal(got.ravel(), x.ravel())  # C order


# --- errors -----------------------------------------------------------------------------------
ERRORS = [  # (op, attrs, message)
    ("Flatten", {"axis": 2}, r"axis=2 unsupported"),
    ("Flatten", {"axis": -1}, r"axis=-1 unsupported"),
    ("Reshape", {"shape": [3, 20]}, r"shape=\[3, 20\] on input \(1, 3, 4, 5\) unsupported"),
    ("Reshape", {"shape": [1, 3, 20]}, r"shape=\[1, 3, 20\] on input"),
    ("Reshape", {"shape": [1, 7]}, r"shape=\[1, 7\] on input"),
    ("Reshape", {"shape": [-1, -1]}, r"shape=\[-1, -1\] on input"),
    ("Reshape", {}, r"shape=\[\] on input"),
]


ERROR_IDS = ["flatten-axis2", "flatten-axis-1", "reshape-to-matrix", "reshape-rank3",
             "reshape-wrong-size", "reshape-two-minus-one", "reshape-no-shape"]


@pytest.mark.parametrize(("op", "attrs", "message"), ERRORS, ids=ERROR_IDS)
def test_errors_name_layer_and_value(op, attrs, message):
    with pytest.raises(glcnn.UnsupportedOpError, match=f"layer 'v' \\({op}\\): {message}"):
        make_op(Node(op, "v", ["x"], attrs), [(3, 4, 5)])


def test_optimize_keeps_reference_results():
    graph = Graph({"x": (5, 1, 1)}, [Node("Flatten", "f", ["x"]), Node("Relu", "r", ["f"])],
                  ["r"])
    x = random_inputs([(5, 1, 1)], seed=2)[0]
    np.testing.assert_array_equal(reference.run(passes.optimize(copy.deepcopy(graph)),
                                                {"x": x})["r"], reference.run(graph, {"x": x})["r"])
