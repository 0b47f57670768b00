"""DepthToSpace (pixel shuffle): the GPU against glcnn.graph.reference, the reference against
PyTorch's pixel_shuffle (CRD) and onnxruntime (DCR and CRD), and refusals."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import PRECISIONS, check_op
from ort_node import run_node

import glcnn
from glcnn.graph import Node, reference
from glcnn.ops import make_op

# (mode, blocksize, input shape)
CASES = [
    ("DCR", 2, (4, 3, 5)),
    ("DCR", 2, (20, 3, 5)),
    ("DCR", 3, (27, 2, 3)),
    ("DCR", 2, (52, 1, 1)),
    ("CRD", 2, (4, 3, 5)),
    ("CRD", 3, (27, 2, 3)),
    ("CRD", 2, (52, 3, 2)),
    ("CRD", 1, (5, 3, 4)),
    ("DCR", 4, (16, 1, 1)),
]
CASE_IDS = [f"d2s-{mode.lower()}-b{b}-c{c}-hw{h}x{w}" for mode, b, (c, h, w) in CASES]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("mode", "block", "shape"), CASES, ids=CASE_IDS)
def test_depth_to_space_matches_reference(ctx, mode, block, shape, precision):
    check_op(ctx, "DepthToSpace", {"blocksize": block, "mode": mode}, [shape],
             precision=precision)


def _reference(x, mode, block):
    node = Node("DepthToSpace", "y", ["x"], {"blocksize": block, "mode": mode})
    return reference.evaluate(node, {"x": np.asarray(x, np.float64)})


@pytest.mark.parametrize(("mode", "block", "shape"), CASES, ids=CASE_IDS)
def test_reference_matches_onnxruntime(mode, block, shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    expected = run_node("DepthToSpace", [x], {"blocksize": block, "mode": mode})
    np.testing.assert_array_equal(_reference(x, mode, block), expected)


@pytest.mark.parametrize(("mode", "block", "shape"), [c for c in CASES if c[0] == "CRD"],
                         ids=[i for c, i in zip(CASES, CASE_IDS) if c[0] == "CRD"])
def test_crd_reference_is_torch_pixel_shuffle(mode, block, shape):
    x = np.random.default_rng(1).standard_normal(shape)
    expected = F.pixel_shuffle(torch.from_numpy(x)[None], block)[0].numpy()
    np.testing.assert_array_equal(_reference(x, mode, block), expected)


ERRORS = [
    ({"blocksize": 2, "mode": "RDC"}, glcnn.UnsupportedOpError, "mode='RDC'", "mode-rdc"),
    ({"blocksize": 0}, glcnn.UnsupportedOpError, "blocksize=0", "blocksize-0"),
    ({}, glcnn.UnsupportedOpError, "blocksize=None", "no-blocksize"),
    ({"blocksize": 3}, glcnn.ShapeError, "not a multiple of blocksize² = 9", "channels-vs-block"),
]


@pytest.mark.parametrize(("attrs", "error", "message"), [e[:3] for e in ERRORS],
                         ids=[e[3] for e in ERRORS])
def test_refused(attrs, error, message):
    with pytest.raises(error, match=message) as info:
        make_op(Node("DepthToSpace", "layer_under_test", ["x"], attrs), [(8, 4, 4)])
    assert "'layer_under_test'" in str(info.value)
