"""Gemm and MatMul on a vector: GPU vs reference (K up to 50k), the wrapped weight layout,
texture limits, reference vs PyTorch and onnxruntime, fusion, and the errors."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import PRECISIONS, check_op, optimised_matches_original, random_inputs, signature
from ort_node import run_node

import glcnn
from glcnn.graph import Graph, Node, passes, reference
from glcnn.layout import matrix_grid, pack_matrix
from glcnn.ops import make_op

SIZES = [(1, 1), (3, 5), (13, 4), (5, 257), (257, 13), (1000, 10), (50000, 5)]  # (K, N)
SIZE_IDS = [f"k{k}-n{n}" for k, n in SIZES]


def _matrix(rows, cols, seed=0):
    """Random weights scaled so outputs stay O(1) (as a trained layer's would)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, cols)) / np.sqrt(rows + cols)).astype(np.float32)


def _bias(form, n, seed=1):
    shape = {"none": None, "scalar": (), "one": (1,), "N": (n,), "1xN": (1, n), "1x1": (1, 1)}[form]
    return None if shape is None else np.random.default_rng(seed).standard_normal(shape).astype(
        np.float32)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("k", "n"), SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("trans_b", [0, 1], ids=["B-KxN", "transB"])
def test_gemm(ctx, trans_b, k, n, precision):
    b = _matrix(n, k) if trans_b else _matrix(k, n)
    weights = {"B": b, "C": _bias("N", n)}
    check_op(ctx, "Gemm", {"transB": trans_b}, [(k, 1, 1)], weights, precision)


GEMM_ATTRS = [  # (attrs, bias form, id)
    ({"alpha": 0.5, "beta": 2.0}, "N", "alpha0.5-beta2"),
    ({"alpha": -1.5}, "none", "alpha-1.5-no-bias"),
    ({"beta": 0.0}, "N", "beta0"),
    ({}, "scalar", "bias-scalar"),
    ({}, "one", "bias-1"),
    ({}, "1xN", "bias-1xN"),
    ({"transA": 0, "transB": 1}, "1x1", "bias-1x1-transA0"),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("attrs", "bias"), [g[:2] for g in GEMM_ATTRS],
                         ids=[g[2] for g in GEMM_ATTRS])
def test_gemm_attributes(ctx, attrs, bias, precision):
    k, n = 37, 9
    weights = {"B": _matrix(n, k) if attrs.get("transB") else _matrix(k, n)}
    if _bias(bias, n) is not None:
        weights["C"] = _bias(bias, n)
    check_op(ctx, "Gemm", attrs, [(k, 1, 1)], weights, precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("k", "n"), [(1, 1), (13, 4), (257, 13)],
                         ids=["k1-n1", "k13-n4", "k257-n13"])
def test_matmul(ctx, k, n, precision):
    check_op(ctx, "MatMul", {}, [(k, 1, 1)], {"B": _matrix(k, n)}, precision)


@pytest.mark.parametrize("activation", ["Relu", "Sigmoid"])
def test_gemm_activation_fuses(ctx, activation):
    graph = Graph({"x": (20, 1, 1)}, [
        Node("Gemm", "fc", ["x"], {"transB": 1}, {"B": _matrix(7, 20), "C": _bias("N", 7)}),
        Node(activation, "act", ["fc"])], ["act"])
    assert signature(optimised_matches_original(ctx, graph)) == [f"Gemm+{activation}"]


# --- the weight layout and texture limits ------------------------------------------------------
@pytest.mark.parametrize(("n", "k"), [(1, 1), (5, 3), (13, 50), (257, 13), (10, 1001)],
                         ids=["n1-k1", "n5-k3", "n13-k50", "n257-k13", "n10-k1001"])
def test_pack_matrix_layout(n, k):
    w = np.arange(n * k, dtype=np.float32).reshape(n, k) + 1
    tex = pack_matrix(w)
    rows, row = matrix_grid(n, k)
    assert tex.shape == ((n + 3) // 4 * rows, row, 4) and row % 4 == 0
    for o in range(n):
        for i in range(k):
            s = o // 4
            assert tex[s * rows + i // row, i % row, o % 4] == w[o, i]
    assert np.count_nonzero(tex) == n * k  # padding is zero


@pytest.mark.parametrize(("n", "k"), [(10, 50000), (4096, 25088), (1000, 4096), (1, 100000)],
                         ids=["n10-k50000", "vgg-fc6", "n1000-k4096", "n1-k100000"])
def test_large_matrices_stay_near_square(n, k):
    rows, row = matrix_grid(n, k)
    height = (n + 3) // 4 * rows
    assert max(height, row) <= 8192  # fits GL 4.x's minimum guarantee and llvmpipe's 16384
    assert height * row <= 1.01 * ((n + 3) // 4) * (k + 3) // 4 * 4 + 4 * height  # ~no waste


def test_too_large_weights_raise_texture_size_error(ctx, monkeypatch):
    # The (50000, 1, 1) input atlas is 112×112; the weights need 224×224.
    monkeypatch.setattr(type(ctx), "max_texture_size", property(lambda self: 150))
    graph = Graph({"x": (50000, 1, 1)}, [Node("Gemm", "fc6", ["x"], {}, {"B": _matrix(50000, 2)})],
                  ["fc6"])
    with pytest.raises(glcnn.TextureSizeError,
                       match=r"layer 'fc6': weight texture u_weights needs 224×224 texels"):
        glcnn.Pipeline(graph, ctx)


# --- the reference (GL-free) ----------------------------------------------------------------------
def test_reference_matches_torch_and_onnxruntime():
    x = random_inputs([(23, 1, 1)], seed=2)[0]
    w, b = _matrix(6, 23), _bias("N", 6)
    got = reference.gemm(x, w, b, transB=1)[:, 0, 0]
    t = {k: torch.from_numpy(v.astype(np.float64)) for k, v in {"x": x, "w": w, "b": b}.items()}
    np.testing.assert_allclose(got, F.linear(t["x"].reshape(1, -1), t["w"], t["b"])[0].numpy(),
                               rtol=1e-12)
    ort = run_node("Gemm", [x.ravel()], {"alpha": 0.5, "beta": 2.0, "transB": 1}, [w, b])
    np.testing.assert_allclose(reference.gemm(x, w, b, 0.5, 2.0, 1).ravel(), ort, atol=1e-5)
    m = _matrix(23, 4)
    np.testing.assert_allclose(reference.gemm(x, m).ravel(), run_node("MatMul", [x.ravel()],
                                                                     {}, [m]), atol=1e-5)


# --- errors -----------------------------------------------------------------------------------
ERRORS = [  # (op, attrs, input shape, weights, error, message)
    ("Gemm", {"transA": 1}, (4, 1, 1), {"B": np.ones((4, 2))}, glcnn.UnsupportedOpError,
     "transA=1 unsupported"),
    ("Gemm", {}, (4, 3, 3), {"B": np.ones((36, 2))}, glcnn.ShapeError,
     r"input has shape \(4, 3, 3\); expected a vector .*Flatten"),
    ("Gemm", {"transB": 1}, (4, 1, 1), {"B": np.ones((4, 2))}, glcnn.ShapeError,
     r"input has 4 features; weight B of shape \(4, 2\) \(transB=1\) expects 2"),
    ("Gemm", {}, (4, 1, 1), {"B": np.ones((4, 2)), "C": np.ones(3)}, glcnn.WeightError,
     r"bias C has shape \(3,\)"),
    ("MatMul", {}, (4, 1, 1), {}, glcnn.WeightError, "missing weight 'B'"),
    ("MatMul", {}, (4, 1, 1), {"B": np.ones(4)}, glcnn.WeightError,
     r"weight 'B' has shape \(4,\), expected"),
]


@pytest.mark.parametrize(("op", "attrs", "shape", "weights", "error", "message"), ERRORS,
                         ids=["transA", "image-input", "k-mismatch", "bias-shape",
                              "matmul-no-B", "matmul-1d-B"])
def test_errors_name_layer_and_value(op, attrs, shape, weights, error, message):
    with pytest.raises(error, match=f"layer 'fc' \\({op}\\): {message}"):
        make_op(Node(op, "fc", ["x"], attrs, weights), [shape])


def test_tensor_operands_are_refused():
    node = Node("Gemm", "fc", ["x", "w"], {}, {"B": np.ones((4, 2))})
    with pytest.raises(glcnn.UnsupportedOpError, match=r"layer 'fc'.*must be constant"):
        make_op(node, [(4, 1, 1), (4, 2, 1)])


def test_optimize_keeps_gemm_results():
    graph = Graph({"x": (9, 1, 1)}, [Node("Gemm", "fc", ["x"], {}, {"B": _matrix(9, 3)})],
                  ["fc"])
    x = random_inputs([(9, 1, 1)], seed=3)[0]
    np.testing.assert_array_equal(
        reference.run(passes.optimize(copy.deepcopy(graph)), {"x": x})["fc"],
        reference.run(graph, {"x": x})["fc"])
