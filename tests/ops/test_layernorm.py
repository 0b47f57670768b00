"""LayerNormalization over one glcnn axis: GPU vs reference at fp32, fp16 and u8 (C 3, 5,
13, 120; H = 1 with long W), the reference vs PyTorch and onnxruntime, the torch runner,
fused activations, and the errors. The fusion of the decomposed chain is tests/graph/
test_fuse_norm.py's."""

import numpy as np
import pytest
import torch
from helpers import optimised_matches_original, signature
from ort_node import run_node
from precision_check import PRECISIONS, check, normal_inputs

import glcnn
from glcnn.graph import Graph, Node, reference
from glcnn.ops import make_op

CASES = [  # (shape, axis)
    ((3, 1, 17), 3), ((40, 1, 120), 3), ((120, 1, 40), 1), ((5, 9, 4), 2), ((13, 2, 3), 1),
    ((3, 1, 17), -1), ((5, 9, 4), -2), ((13, 2, 3), -3), ((1, 1, 7), 3), ((5, 1, 1), 1),
]
IDS = ["c{}-{}x{}-axis{}".format(*s, a) for s, a in CASES]


def _weights(n, bias=True, seed=2):
    rng = np.random.default_rng(seed)
    w = {"scale": rng.uniform(0.5, 1.5, n).astype(np.float32)}
    if bias:
        w["bias"] = rng.standard_normal(n).astype(np.float32)
    return w


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("shape", "axis"), CASES, ids=IDS)
def test_layernorm(ctx, shape, axis, precision):
    n = shape[axis % 4 - 1]
    x = normal_inputs([shape], scale=2.0)[0] + 3.0  # a mean far from 0, as residual streams have
    check(ctx, "LayerNormalization", {"axis": axis, "epsilon": 1e-5}, [shape], precision,
          _weights(n), [x])


@pytest.mark.parametrize("precision", PRECISIONS)
def test_no_bias_and_large_epsilon(ctx, precision):
    check(ctx, "LayerNormalization", {"axis": 3, "epsilon": 0.5}, [(5, 2, 11)], precision,
          _weights(11, bias=False))


def test_constant_line_is_finite(ctx):
    x = np.full((5, 1, 9), 4.0, np.float32)  # variance 0: y = bias (scale · 0 / sqrt(eps))
    check(ctx, "LayerNormalization", {"axis": 3, "epsilon": 0.0}, [x.shape], "fp32",
          _weights(9), [x])


def test_activation_fuses(ctx):
    graph = Graph({"x": (4, 1, 9)}, [
        Node("LayerNormalization", "ln", ["x"], {"axis": 3}, _weights(9)),
        Node("Relu", "r", ["ln"])], ["r"])
    assert signature(optimised_matches_original(ctx, graph)) == ["LayerNormalization+Relu"]


def test_reference_matches_torch_and_onnxruntime():
    x = normal_inputs([(4, 3, 10)], seed=3)[0]
    w = _weights(10)
    graph = Graph({"x": x.shape}, [Node("LayerNormalization", "y", ["x"], {"axis": -1}, w)],
                  ["y"])
    got = reference.run(graph, {"x": x})["y"]
    want = torch.nn.functional.layer_norm(torch.from_numpy(x.astype(np.float64)), (10,),
                                          torch.from_numpy(w["scale"].astype(np.float64)),
                                          torch.from_numpy(w["bias"].astype(np.float64)), 1e-5)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-10, atol=1e-12)
    ort = run_node("LayerNormalization", [x[None]], {"axis": -1, "epsilon": 1e-5},
                   [w["scale"], w["bias"]])
    np.testing.assert_allclose(got, ort[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axis", [1, 2, 3])
def test_torch_runner_matches_reference(axis):
    from glcnn.commands.torch_runner import TorchRunner
    shape = (5, 6, 7)
    graph = Graph({"x": shape}, [Node("LayerNormalization", "y", ["x"], {"axis": axis},
                                      _weights(shape[axis - 1]))], ["y"])
    x = normal_inputs([shape])[0]
    np.testing.assert_allclose(TorchRunner(graph, threads=1)({"x": x})["y"],
                               reference.run(graph, {"x": x})["y"], rtol=1e-5, atol=1e-5)


ERRORS = [  # (attrs, weights, error, message)
    ({"axis": 0}, _weights(3), glcnn.UnsupportedOpError, r"axis=0 unsupported"),
    ({"axis": 4}, _weights(3), glcnn.UnsupportedOpError, r"axis=4 unsupported"),
    ({"axis": 1, "epsilon": -1.0}, _weights(3), glcnn.UnsupportedOpError,
     r"epsilon=-1.0 must be a finite number"),
    ({"axis": 3}, _weights(4), glcnn.WeightError,
     r"weight 'scale' has 4 values; axis 3 of input \(3, 4, 5\) has 5"),
    ({"axis": 3}, {}, glcnn.WeightError, r"missing weight 'scale'"),
]


@pytest.mark.parametrize(("attrs", "weights", "error", "message"), ERRORS,
                         ids=["batch", "out-of-range", "epsilon", "scale-size", "no-scale"])
def test_errors(attrs, weights, error, message):
    with pytest.raises(error, match=f"layer 'n' \\(LayerNormalization\\): {message}"):
        make_op(Node("LayerNormalization", "n", ["x"], attrs, weights), [(3, 4, 5)])
