"""Softmax over H and W (and the channels of sequence-shaped tensors): GPU vs reference at
fp32, fp16 and u8, the SoftmaxStats → SoftmaxApply expansion over each axis (and the OCR
head's 6625 classes on the channels staying linear), the reference vs PyTorch."""

import numpy as np
import pytest
import torch
from helpers import optimised_matches_original, signature
from precision_check import PRECISIONS, check, normal_inputs

from glcnn.graph import Graph, Node, passes, reference

CASES = [  # (shape, axis)
    ((3, 1, 17), 3), ((3, 1, 17), -1), ((5, 9, 4), 2), ((5, 9, 4), -2), ((13, 1, 40), 3),
    ((8, 40, 40), 3),  # attention scores (heads, queries, keys)
    ((1, 1, 33), 3), ((13, 7, 1), 2), ((40, 1, 13), 1), ((5, 1, 1), 3),
]
IDS = ["c{}-{}x{}-axis{}".format(*s, a) for s, a in CASES]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("shape", "axis"), CASES, ids=IDS)
def test_softmax_axis(ctx, shape, axis, precision):
    check(ctx, "Softmax", {"axis": axis}, [shape], precision,
          inputs=normal_inputs([shape], seed=1, scale=3.0))


def test_large_logits_along_w_stay_finite(ctx):
    x = (np.arange(3 * 2 * 7).reshape(3, 2, 7) * 40.0 - 200).astype(np.float32)
    check(ctx, "Softmax", {"axis": 3}, [x.shape], "fp32", inputs=[x])


EXPANSIONS = [  # (input shape, axis, ops after optimize)
    ((3, 1, 17), 3, ["Softmax"]),                       # short rows: one pass
    ((8, 40, 40), 3, ["SoftmaxStats", "SoftmaxApply"]),  # attention
    ((5, 300, 2), 2, ["SoftmaxStats", "SoftmaxApply"]),
    ((13, 1, 2001), 3, ["SoftmaxStats", "SoftmaxApply"]),  # many classes along W (4002 wide)
    ((6625, 1, 40), 1, ["SoftmaxStats", "SoftmaxApply"]),  # OCR classes on the channels
]


@pytest.mark.parametrize("precision", PRECISIONS[:2])
@pytest.mark.parametrize(("shape", "axis", "after"), EXPANSIONS,
                         ids=["c{}-{}x{}-axis{}".format(*e[0], e[1]) for e in EXPANSIONS])
def test_optimised_softmax(ctx, shape, axis, after, precision):
    graph = Graph({"x": shape}, [Node("Softmax", "y", ["x"], {"axis": axis})], ["y"])
    optimised = optimised_matches_original(ctx, graph, precision)
    assert signature(optimised) == after and optimised.nodes[-1].name == "y"
    if len(after) == 2:
        assert optimised.nodes[0].attrs["axis"] == optimised.nodes[1].attrs["axis"] == axis


def test_expanded_softmax_of_ocr_head_is_linear():
    # One pass would read 1657² slices per pixel; the stats pass reads them twice.
    graph = Graph({"x": (6625, 1, 40)}, [Node("Softmax", "y", ["x"], {"axis": 1})], ["y"])
    assert signature(passes.expand_reductions(graph)) == ["SoftmaxStats", "SoftmaxApply"]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("axis", [2, 3])
def test_stats_and_apply(ctx, axis, precision):
    shape = (5, 6, 7)
    check(ctx, "SoftmaxStats", {"axis": axis}, [shape], precision)
    graph = Graph({"x": shape}, [Node("SoftmaxStats", "s", ["x"], {"axis": axis}),
                                 Node("SoftmaxApply", "y", ["x", "s"], {"axis": axis})], ["y"])
    x = normal_inputs([shape])[0]
    np.testing.assert_allclose(reference.run(graph, {"x": x})["y"],
                               reference.softmax_channels(x, axis), rtol=1e-12)


def test_reference_matches_torch():
    x = normal_inputs([(5, 6, 7)], scale=4)[0].astype(np.float64)
    for axis in (1, 2, 3):
        want = torch.softmax(torch.from_numpy(x)[None], axis)[0].numpy()
        graph = Graph({"x": x.shape}, [Node("Softmax", "y", ["x"], {"axis": axis})], ["y"])
        np.testing.assert_allclose(reference.run(graph, {"x": x})["y"], want, rtol=1e-12)


def test_torch_runner_matches_reference():
    from glcnn.commands.torch_runner import TorchRunner
    graph = Graph({"x": (8, 40, 40)}, [Node("Softmax", "y", ["x"], {"axis": 3})], ["y"])
    expanded = passes.expand_reductions(Graph({"x": (8, 40, 40)},
                                              [Node("Softmax", "y", ["x"], {"axis": 3})], ["y"]))
    x = normal_inputs([(8, 40, 40)])[0]
    want = reference.run(graph, {"x": x})["y"]
    for g in (graph, expanded):
        np.testing.assert_allclose(TorchRunner(g, threads=1)({"x": x})["y"], want, atol=1e-6)
