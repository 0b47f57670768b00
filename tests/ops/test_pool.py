"""MaxPool and AveragePool: the GPU against glcnn.graph.reference, the reference against PyTorch and
onnxruntime (ceil_mode and count_include_pad are where implementations go wrong), properties,
and the attribute values glcnn refuses."""

from dataclasses import dataclass

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import PRECISIONS, check_op
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from ort_node import run_node

import glcnn
from glcnn.graph import Node, reference
from glcnn.ops import make_op


@dataclass(frozen=True)
class PoolCase:
    """One pooling configuration; pads are (top, left, bottom, right)."""

    op: str
    c: int
    hw: tuple
    k: tuple
    s: tuple = (1, 1)
    pads: tuple = (0, 0, 0, 0)
    d: tuple = (1, 1)
    ceil: int = 0
    include_pad: int = 0
    auto_pad: str = "NOTSET"

    @property
    def shape(self):
        return (self.c, *self.hw)

    def attrs(self):
        attrs = {"kernel_shape": list(self.k), "strides": list(self.s),
                 "dilations": list(self.d), "ceil_mode": self.ceil}
        if self.auto_pad == "NOTSET":
            attrs["pads"] = list(self.pads)
        else:
            attrs["auto_pad"] = self.auto_pad
        if self.op == "AveragePool":
            attrs["count_include_pad"] = self.include_pad
        return attrs

    def id(self, precision=None):
        def pair(v, sep="x"):
            return str(v[0]) if len(set(v)) == 1 else sep.join(map(str, v))
        parts = [self.op.lower(), f"c{self.c}", f"hw{pair(self.hw)}", f"k{pair(self.k)}",
                 f"s{pair(self.s)}"]
        parts += [f"p{pair(self.pads, '_')}"] if self.auto_pad == "NOTSET" else [
            self.auto_pad.lower().replace("_", "")]
        parts += [f"d{pair(self.d)}"] if self.d != (1, 1) else []
        parts += ["ceil"] if self.ceil else []
        parts += ["incpad"] if self.include_pad else []
        return "-".join(parts + ([precision] if precision else []))


M, A = "MaxPool", "AveragePool"
CASES = [
    PoolCase(M, 5, (7, 7), (3, 3), (2, 2), (1, 1, 1, 1), ceil=1),
    PoolCase(M, 1, (1, 1), (1, 1)),
    PoolCase(M, 3, (1, 1), (3, 3), pads=(1, 1, 1, 1)),
    PoolCase(M, 13, (9, 6), (3, 2), (2, 1), (0, 1, 2, 0), ceil=1),
    PoolCase(M, 3, (8, 8), (3, 3), (1, 1), (2, 2, 2, 2), d=(2, 2)),
    PoolCase(M, 5, (5, 5), (2, 2), (2, 2), (1, 1, 1, 1), ceil=1),  # ceil rule drops a window
    PoolCase(M, 4, (7, 6), (3, 3), (2, 2), auto_pad="SAME_UPPER"),
    PoolCase(M, 3, (6, 7), (2, 4), (2, 3), auto_pad="SAME_LOWER"),
    PoolCase(A, 5, (7, 7), (3, 3), (2, 2), (1, 1, 1, 1), ceil=1, include_pad=1),
    PoolCase(A, 5, (7, 7), (3, 3), (2, 2), (1, 1, 1, 1), ceil=1),
    PoolCase(A, 13, (9, 6), (3, 2), (2, 1), (0, 1, 2, 0), ceil=1, include_pad=1),
    PoolCase(A, 1, (1, 1), (1, 1)),
    PoolCase(A, 3, (9, 8), (3, 3), (2, 2), (1, 0, 0, 2), d=(2, 2), ceil=1, include_pad=1),
    PoolCase(A, 5, (5, 5), (2, 2), (2, 2), (1, 1, 1, 1), ceil=1, include_pad=1),
    PoolCase(A, 3, (7, 6), (3, 3), (2, 2), auto_pad="SAME_LOWER", include_pad=1),
    PoolCase(A, 3, (7, 6), (3, 3), (2, 2), auto_pad="VALID"),
    PoolCase(M, 3, (6, 6), (3, 3), (2, 2), ceil=1, auto_pad="VALID"),  # ceil_mode applies
    PoolCase(A, 6, (7, 7), (7, 7)),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", CASES, ids=[c.id() for c in CASES])
def test_pool_matches_reference(ctx, case, precision):
    check_op(ctx, case.op, case.attrs(), [case.shape], precision=precision)


def _torch_pool(case, x):
    t = torch.from_numpy(x).double()[None]
    pad = case.pads[:2]
    if case.op == M:
        return F.max_pool2d(t, case.k, case.s, pad, case.d, ceil_mode=bool(case.ceil))[0].numpy()
    return F.avg_pool2d(t, case.k, case.s, pad, ceil_mode=bool(case.ceil),
                        count_include_pad=bool(case.include_pad))[0].numpy()


def _reference(case, x):
    node = Node(case.op, "y", ["x"], case.attrs())
    return reference.evaluate(node, {"x": np.asarray(x, np.float64)})


# PyTorch takes symmetric pads ≤ k/2 only, and no dilation for average pooling.
TORCH_CASES = [c for c in CASES if c.auto_pad == "NOTSET" and c.pads[:2] == c.pads[2:]
               and 2 * max(c.pads) <= min(c.k) and (c.op == M or c.d == (1, 1))]


@pytest.mark.parametrize("case", TORCH_CASES, ids=[c.id() for c in TORCH_CASES])
def test_reference_matches_torch(case):
    x = np.random.default_rng(1).standard_normal(case.shape)
    np.testing.assert_allclose(_reference(case, x), _torch_pool(case, x), rtol=0, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=[c.id() for c in CASES])
def test_reference_matches_onnxruntime(case):
    x = np.random.default_rng(2).standard_normal(case.shape).astype(np.float32)
    expected = run_node(case.op, [x], case.attrs())
    np.testing.assert_allclose(_reference(case, x), expected, rtol=0, atol=2e-6)


@st.composite
def pool_cases(draw, torch_compatible=False):
    op = draw(st.sampled_from([M, A]))
    k = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    if torch_compatible:
        pads = tuple(draw(st.integers(0, kk // 2)) for kk in k) * 2
        d = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) if op == M else (1, 1)
    else:
        pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
        d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    return PoolCase(op, draw(st.integers(1, 6)), (draw(st.integers(1, 9)), draw(st.integers(1, 9))),
                    k, (draw(st.integers(1, 3)), draw(st.integers(1, 3))), pads, d,
                    draw(st.integers(0, 1)), draw(st.integers(0, 1)))


def _valid(case) -> bool:
    try:
        make_op(Node(case.op, "y", ["x"], case.attrs()), [case.shape])
    except glcnn.GlcnnError:
        return False
    return True


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
@given(case=pool_cases())
def test_pool_property_matches_reference(ctx, case):
    assume(_valid(case))
    check_op(ctx, case.op, case.attrs(), [case.shape])


@settings(max_examples=150, deadline=None, derandomize=True)
@given(case=pool_cases(torch_compatible=True))
def test_reference_property_matches_torch(case):
    assume(_valid(case))
    x = np.random.default_rng(3).standard_normal(case.shape)
    np.testing.assert_allclose(_reference(case, x), _torch_pool(case, x), rtol=0, atol=1e-12)


ERRORS = [
    ({"kernel_shape": [2, 2], "auto_pad": "SAME"}, "auto_pad='SAME'", "auto-pad-same"),
    ({"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER", "dilations": [2, 2]}, "dilations",
     "same-with-dilation"),
    ({"kernel_shape": [2, 2], "auto_pad": "VALID", "pads": [1, 1, 1, 1]}, "non-zero pads",
     "auto-pad-and-pads"),
    ({"kernel_shape": [2, 2], "pads": [2, 0, 0, 0]}, "row 0 without any input tap",
     "window-all-padding"),
    ({"strides": [2, 2]}, "kernel_shape is required", "no-kernel"),
    ({"kernel_shape": [2, 2], "strides": [0, 1]}, "must be ≥ 1", "stride-0"),
    ({"kernel_shape": [3]}, "kernel_shape=\\[3\\] must have 2 values", "1d-kernel"),
]


@pytest.mark.parametrize("op", [M, A])
@pytest.mark.parametrize(("attrs", "message"), [e[:2] for e in ERRORS], ids=[e[2] for e in ERRORS])
def test_refused_attributes(op, attrs, message):
    with pytest.raises(glcnn.UnsupportedOpError, match=message) as info:
        make_op(Node(op, "layer_under_test", ["x"], attrs), [(3, 6, 6)])
    assert "'layer_under_test'" in str(info.value)


def test_empty_output_is_a_shape_error():
    with pytest.raises(glcnn.ShapeError, match="empty output"):
        make_op(Node(M, "p", ["x"], {"kernel_shape": [5, 5]}), [(3, 4, 4)])
