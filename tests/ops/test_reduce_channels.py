"""ReduceMean, ReduceMax and ReduceSum over the channel axis (C → 1), and ReduceSum over H
and W: GPU vs reference at fp32, fp16 and u8 (C 3, 5, 13, the OCR head's 6625), the
reference and torch runner vs PyTorch / onnxruntime, and the errors."""

import numpy as np
import pytest
import torch
from ort_node import run_node
from precision_check import PRECISIONS, check, normal_inputs

import glcnn
from glcnn.graph import Graph, Node, reference
from glcnn.ops import make_op

SHAPES = [(3, 1, 17), (5, 4, 3), (13, 1, 40), (1, 2, 2), (120, 1, 9)]
OPS = ["ReduceMean", "ReduceMax", "ReduceSum"]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=["c{}-{}x{}".format(*s) for s in SHAPES])
@pytest.mark.parametrize("axes", [[1], [-3]], ids=["axis1", "axis-3"])
@pytest.mark.parametrize("op", OPS)
def test_reduce_channels(ctx, op, axes, shape, precision):
    check(ctx, op, {"axes": axes}, [shape], precision)


@pytest.mark.parametrize("precision", PRECISIONS[:2])
@pytest.mark.parametrize("op", OPS)
def test_many_channels(ctx, op, precision):
    # 6625 channels: 1657 slices in blocks of 32; a constant offset checks the sum's accuracy.
    x = normal_inputs([(6625, 1, 5)])[0] + 3.0
    check(ctx, op, {"axes": [1]}, [x.shape], precision, inputs=[x])


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("axes", [[2], [3], [2, 3]], ids=["h", "w", "hw"])
def test_reduce_sum_spatial(ctx, axes, precision):
    check(ctx, "ReduceSum", {"axes": axes}, [(5, 3, 7)], precision)


def test_reference_matches_torch_and_onnxruntime():
    x = normal_inputs([(13, 3, 4)], seed=2)[0]
    t = torch.from_numpy(x.astype(np.float64))[None]
    for op, fn in (("ReduceMean", t.mean), ("ReduceMax", t.amax), ("ReduceSum", t.sum)):
        graph = Graph({"x": x.shape}, [Node(op, "y", ["x"], {"axes": [1]})], ["y"])
        got = reference.run(graph, {"x": x})["y"]
        np.testing.assert_allclose(got, fn(1, keepdim=True)[0].numpy(), rtol=1e-12)
        # opset 18+: the axes are an input
        want = run_node(op, [x], {}, [np.array([1], np.int64)])
        np.testing.assert_allclose(got, want.reshape(got.shape), rtol=1e-5, atol=1e-6)


def test_torch_runner_matches_reference():
    from glcnn.commands.torch_runner import TorchRunner
    x = normal_inputs([(13, 3, 4)])[0]
    for op in OPS:
        graph = Graph({"x": x.shape}, [Node(op, "y", ["x"], {"axes": [1]})], ["y"])
        np.testing.assert_allclose(TorchRunner(graph, threads=1)({"x": x})["y"],
                                   reference.run(graph, {"x": x})["y"], rtol=1e-5, atol=1e-5)


ERRORS = [
    ({"axes": [1, 3]}, r"axes=\[1, 3\] unsupported"),
    ({"axes": [0]}, r"axes=\[0\] unsupported"),
    ({"axes": [1], "keepdims": 0}, r"keepdims=0 with axes=\[1\]"),
]


@pytest.mark.parametrize(("attrs", "message"), ERRORS, ids=["c-and-w", "batch", "keepdims0"])
def test_errors(attrs, message):
    with pytest.raises(glcnn.UnsupportedOpError, match=f"layer 'r' \\(ReduceSum\\): {message}"):
        make_op(Node("ReduceSum", "r", ["x"], attrs), [(3, 4, 5)])


def test_internal_statistics_stay_spatial():
    with pytest.raises(glcnn.UnsupportedOpError, match=r"axes=\[1\] unsupported"):
        make_op(Node("InstanceNormMean", "r", ["x"], {"axes": [1]}), [(3, 4, 5)])
