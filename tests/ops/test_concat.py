"""Concat on the channel axis: the GPU against glcnn.graph.reference for any channel counts (slices
straddling inputs), the reference against torch.cat, the ALIGNED variant choice, refusals."""

import numpy as np
import pytest
import torch
from helpers import PRECISIONS, check_op

import glcnn
from glcnn.graph import Node, reference
from glcnn.ops import make_op

# (channel counts of the inputs, H, W, axis)
CASES = [
    ((1, 3), 3, 4, 1),
    ((1, 3, 5), 5, 3, 1),
    ((13, 1), 4, 4, -3),
    ((5, 4), 3, 5, 1),
    ((4, 8), 3, 5, 1),
    ((4, 8, 5), 2, 7, 1),
    ((2,) * 8, 3, 3, 1),
    ((1, 3, 1, 5, 2, 4, 7, 1), 2, 3, 1),
    ((3,), 3, 4, 1),
    ((1, 1, 1, 1, 1), 1, 1, 1),
]
CASE_IDS = [f"concat-c{'_'.join(map(str, cs))}-hw{h}x{w}" + ("-axis-3" if axis < 0 else "")
            for cs, h, w, axis in CASES]


def _shapes(channels, h, w):
    return [(c, h, w) for c in channels]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("channels", "h", "w", "axis"), CASES, ids=CASE_IDS)
def test_concat_matches_reference(ctx, channels, h, w, axis, precision):
    check_op(ctx, "Concat", {"axis": axis}, _shapes(channels, h, w), precision=precision,
             seed=len(channels))


@pytest.mark.parametrize(("channels", "h", "w", "axis"), CASES, ids=CASE_IDS)
def test_reference_matches_torch(channels, h, w, axis):
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s) for s in _shapes(channels, h, w)]
    names = [f"x{i}" for i in range(len(xs))]
    y = reference.evaluate(Node("Concat", "y", names, {"axis": axis}), dict(zip(names, xs)))
    expected = torch.cat([torch.from_numpy(x)[None] for x in xs], dim=axis)[0].numpy()
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize(("channels", "aligned"), [((4, 8, 5), True), ((8, 3), True),
                                                   ((5, 4), False), ((1, 3), False)])
def test_aligned_variant_only_when_every_slice_is_whole(channels, aligned):
    names = [f"x{i}" for i in range(len(channels))]
    op = make_op(Node("Concat", "y", names, {"axis": 1}), _shapes(channels, 2, 2))
    assert ("ALIGNED" in op.defines()) == aligned
    assert op.uniforms()["u_end"] == tuple(np.cumsum(channels))


ERRORS = [
    ({"axis": 2}, [(3, 4, 4)] * 2, glcnn.UnsupportedOpError, "axis=2", "axis-h"),
    ({"axis": 0}, [(3, 4, 4)] * 2, glcnn.UnsupportedOpError, "axis=0", "axis-batch"),
    ({"axis": 1}, [(1, 4, 4)] * 9, glcnn.UnsupportedOpError, "9 inputs", "nine-inputs"),
    ({"axis": 1}, [(3, 4, 4), (3, 4, 5)], glcnn.ShapeError, "differ in H, W", "w-mismatch"),
]


@pytest.mark.parametrize(("attrs", "shapes", "error", "message"), [e[:4] for e in ERRORS],
                         ids=[e[4] for e in ERRORS])
def test_refused(attrs, shapes, error, message):
    names = [f"x{i}" for i in range(len(shapes))]
    with pytest.raises(error, match=message) as info:
        make_op(Node("Concat", "layer_under_test", names, attrs), shapes)
    assert "'layer_under_test'" in str(info.value)
