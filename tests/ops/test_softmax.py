"""Softmax over channels: GPU vs reference (vectors and images, large logits), its two-pass
form from `glcnn.graph.passes.expand_reductions`, reference vs PyTorch and onnxruntime, and the
axes it refuses."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import (
    PRECISIONS,
    assert_close,
    atlas_texels,
    check_op,
    optimised_matches_original,
    random_inputs,
    signature,
    storable,
)
from ort_node import run_node

import glcnn
from glcnn.graph import Graph, Node, passes, reference
from glcnn.layout import pack
from glcnn.ops import make_op

VECTORS = [(1, 1, 1), (3, 1, 1), (5, 1, 1), (13, 1, 1), (257, 1, 1), (1000, 1, 1)]
IMAGES = [(1, 2, 3), (3, 5, 7), (13, 9, 4), (257, 3, 3)]
AXES = [({"axis": 1}, "axis1"), ({"axis": -3}, "axis-3")]


def _ids(shapes):
    return ["c{}-{}x{}".format(*s) for s in shapes]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", VECTORS, ids=_ids(VECTORS))
@pytest.mark.parametrize("attrs", [{}, {"axis": -1}, {"axis": 1}],
                         ids=["axis-default", "axis-1", "axis1"])
def test_softmax_vector(ctx, attrs, shape, precision):
    check_op(ctx, "Softmax", attrs, [shape], None, precision,
             inputs=[random_inputs([shape], seed=1)[0] * 4])


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", IMAGES, ids=_ids(IMAGES))
@pytest.mark.parametrize("attrs", [a[0] for a in AXES], ids=[a[1] for a in AXES])
def test_softmax_channels_of_image(ctx, attrs, shape, precision):
    check_op(ctx, "Softmax", attrs, [shape], None, precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", [(7, 1, 1), (13, 3, 2)], ids=_ids([(7, 1, 1), (13, 3, 2)]))
def test_softmax_large_logits_stay_finite(ctx, shape, precision):
    # exp(90) overflows float32 and exp(12) fp16: the max must be subtracted first.
    base = np.resize(np.array([-1e4, 90, 89.5, -3, 95, 0, 200], np.float32), shape[0])
    x = (base[:, None, None] + np.arange(shape[1] * shape[2]).reshape(shape[1:])).astype(
        np.float32)
    check_op(ctx, "Softmax", {"axis": 1}, [shape], None, precision, inputs=[x])
    check_op(ctx, "Softmax", {"axis": 1}, [shape], None, precision,
             inputs=[np.full(shape, 50.0, np.float32)])  # all equal: 1 / C each


EXPANSIONS = [  # (input shape, ops after optimize)
    ((13, 1, 1), ["Softmax"]),  # few channels: one pass is faster
    ((1000, 1, 1), ["SoftmaxStats", "SoftmaxApply"]),
    ((21843, 1, 1), ["SoftmaxStats", "SoftmaxApply"]),  # ImageNet-21k: 0.6 s in one pass
    ((21, 16, 16), ["SoftmaxStats", "SoftmaxApply"]),
    ((257, 3, 3), ["SoftmaxStats", "SoftmaxApply"]),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("shape", "after"), EXPANSIONS, ids=_ids([e[0] for e in EXPANSIONS]))
def test_optimised_softmax(ctx, shape, after, precision):
    graph = Graph({"x": shape}, [Node("Softmax", "y", ["x"], {"axis": 1})], ["y"])
    optimised = optimised_matches_original(ctx, graph, precision)
    assert signature(optimised) == after and optimised.nodes[-1].name == "y"


@pytest.mark.parametrize("precision", PRECISIONS)
def test_optimised_softmax_of_large_logits(ctx, precision):
    # The stored max is an input value, exact in fp16 too; S then matches it exactly.
    x = (np.random.default_rng(4).standard_normal((300, 2, 3)) * 30 + 900).astype(np.float32)
    graph = Graph({"x": x.shape}, [Node("Softmax", "y", ["x"], {"axis": 1})], ["y"])
    optimised = passes.optimize(copy.deepcopy(graph))
    assert signature(optimised) == ["SoftmaxStats", "SoftmaxApply"]
    x = storable(x, precision)
    with glcnn.Pipeline(optimised, ctx, precision=precision) as pipe:
        y = pipe.run(x)
    assert_close(y, reference.run(graph, {"x": x})["y"], precision, "softmax of 900 ± 30")


def test_softmax_apply_needs_stats():
    with pytest.raises(glcnn.ShapeError, match=r"layer 'a'.*stats of shape \(2, 3, 4\)"):
        make_op(Node("SoftmaxApply", "a", ["x", "s"]), [(5, 3, 4), (1, 3, 4)])


def test_reference_matches_torch_and_onnxruntime():
    x = random_inputs([(13, 3, 4)], seed=2)[0] * 5
    got = reference.softmax_channels(x)
    want = F.softmax(torch.from_numpy(x.astype(np.float64)), dim=0).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got, run_node("Softmax", [x], {"axis": 1}), atol=1e-6)
    v = x[:, 0, 0]  # a classifier output (N, C) = (1, 13), default axis -1 (opset >= 13)
    np.testing.assert_allclose(reference.softmax_channels(v[:, None, None]).ravel(),
                               run_node("Softmax", [v], {}), atol=1e-6)


UNSUPPORTED = [(0, (5, 1, 1)), (-4, (5, 1, 1)), (4, (5, 3, 4)), (-5, (5, 3, 4))]


@pytest.mark.parametrize(("axis", "shape"), UNSUPPORTED,
                         ids=["axis{}-c{}-{}x{}".format(a, *s) for a, s in UNSUPPORTED])
def test_unsupported_axis(axis, shape):
    with pytest.raises(glcnn.UnsupportedOpError,
                       match=rf"layer 's' \(Softmax\): axis={axis} unsupported for input"):
        make_op(Node("Softmax", "s", ["x"], {"axis": axis}), [shape])


@pytest.mark.parametrize("shape", [(9, 3, 4), (9, 1, 1)], ids=["c9-3x4", "c9-1x1"])
def test_padding_lanes_stay_zero(ctx, shape):
    # exp(0 − M) / Σ ≠ 0: the shared epilogue must still zero lanes 9-11 and the empty tile.
    graph = Graph({"x": shape}, [Node("Softmax", "y", ["x"], {"axis": 1})], ["y"])
    with glcnn.Pipeline(graph, ctx) as pipe:
        pipe.run(random_inputs([shape], seed=3)[0])
        raw = atlas_texels(pipe.texture("y"), shape)
    assert not raw[pack(np.ones(shape, np.float32)) == 0].any()
