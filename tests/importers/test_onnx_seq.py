"""The ONNX converters of glcnn/importers/onnx_seq.py (Softmax, MatMul, LayerNormalization)
and the Reduce converter on tensors of any rank, against onnxruntime at fp32: attention
(q·kᵀ, Softmax over the keys, ·v), sequences stored as (L, 1, C) or channels last, MatMul by
a constant as a 1×1 Conv or a glcnn MatMul, LayerNorm written out as nine ops (PP-OCR's SVTR
neck, opset 12) fused into one pass; and the errors for what stays unsupported.

Each model is made with onnx.helper: a 4-D image input, a Conv so the data is not the input
itself, then the ops under test (as tests/importers/test_onnx_layout.py)."""

import numpy as np
import pytest
from onnx import helper, numpy_helper
from onnx_models import conv_then, matches_onnxruntime
from onnx_models import int_const as const

import glcnn
from glcnn.errors import UnsupportedOpError

pytestmark = pytest.mark.gl

RNG = np.random.default_rng(11)
X_SHAPE = (1, 3, 8, 10)  # the Conv makes c of (1, 6, 8, 10)


def model(tmp_path, nodes, out_shape, inits=(), opset=17, name="m.onnx"):
    return conv_then(tmp_path, nodes, out_shape, inits, X_SHAPE, opset, name, RNG)


def weights(name, shape, scale=0.3):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def check(path):
    return matches_onnxruntime(path, X_SHAPE, RNG)


def sequence(transposed=False):
    """c (1, 6, 8, 10) as the sequence (1, 6, 80), or transposed (1, 80, 6) (channels last)."""
    nodes = [helper.make_node("Reshape", ["c", "s"], ["seq" if not transposed else "r"])]
    if transposed:
        nodes.append(helper.make_node("Transpose", ["r"], ["seq"], perm=[0, 2, 1]))
    return nodes, [const("s", [1, 6, 80])]


# --- Softmax and reductions -----------------------------------------------------------------
@pytest.mark.parametrize("transposed", [False, True], ids=["cl", "lc"])
@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax_of_a_sequence(tmp_path, transposed, axis):
    nodes, inits = sequence(transposed)
    nodes.append(helper.make_node("Softmax", ["seq"], ["y"], axis=axis))
    check(model(tmp_path, nodes, [1, 80, 6] if transposed else [1, 6, 80], inits))


@pytest.mark.parametrize("axis", [1, 2, 3, -1])
def test_softmax_of_an_image_any_axis(tmp_path, axis):
    check(model(tmp_path, [helper.make_node("Softmax", ["c"], ["y"], axis=axis)], [1, 6, 8, 10]))


def test_softmax_opset12_last_axis(tmp_path):
    nodes = [helper.make_node("Softmax", ["c"], ["y"], axis=3)]
    check(model(tmp_path, nodes, [1, 6, 8, 10], opset=12))


REDUCTIONS = [  # (op, transposed, axes, keepdims, out shape)
    ("ReduceMean", False, [-1], 1, [1, 6, 1]),
    ("ReduceMean", True, [-1], 1, [1, 80, 1]),   # over the channels of (80, 1, 6) stored LC
    ("ReduceMax", True, [2], 1, [1, 80, 1]),
    ("ReduceSum", False, [2], 1, [1, 6, 1]),
    ("ReduceSum", True, [1], 1, [1, 1, 6]),
    ("ReduceMean", False, [2], 0, [1, 6]),        # (6, 1, 80) → (6, 1, 1): the vector
]


@pytest.mark.parametrize(("op", "transposed", "axes", "keepdims", "out"), REDUCTIONS,
                         ids=[f"{r[0]}-{'lc' if r[1] else 'cl'}-{r[2]}-k{r[3]}"
                              for r in REDUCTIONS])
def test_reduce_a_sequence(tmp_path, op, transposed, axes, keepdims, out):
    nodes, inits = sequence(transposed)
    nodes.append(helper.make_node(op, ["seq", "axes"], ["y"], keepdims=keepdims))
    check(model(tmp_path, nodes, out, [*inits, const("axes", axes)], opset=18))


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax", "ReduceSum"])
def test_reduce_image_channels(tmp_path, op):
    nodes = [helper.make_node(op, ["c", "axes"], ["y"], keepdims=1)]
    check(model(tmp_path, nodes, [1, 1, 8, 10], [const("axes", [1])], opset=18))


# --- MatMul ---------------------------------------------------------------------------------
def test_attention(tmp_path):
    """q = k = v = c as 6 heads of 8 queries × 10 features: softmax(q·kᵀ)·v."""
    nodes = [helper.make_node("Transpose", ["c"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["c", "kt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=3),
             helper.make_node("MatMul", ["p", "c"], ["y"])]
    ops = check(model(tmp_path, nodes, [1, 6, 8, 10]))
    assert ops.count("MatMul") == 2


def test_batch_broadcast(tmp_path):
    nodes = [helper.make_node("ReduceMean", ["c"], ["m"], axes=[1], keepdims=1),
             helper.make_node("Transpose", ["m"], ["mt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["c", "mt"], ["y"])]
    check(model(tmp_path, nodes, [1, 6, 8, 8], opset=17))


@pytest.mark.parametrize("transposed", [False, True], ids=["cl", "lc"])
def test_sequence_times_constant(tmp_path, transposed):
    """(1, 6, 80)·(80, 5): a glcnn MatMul; channels last (1, 80, 6)·(6, 7): a 1×1 Conv."""
    nodes, inits = sequence(transposed)
    k, n = (6, 7) if transposed else (80, 5)
    nodes.append(helper.make_node("MatMul", ["seq", "b"], ["y"]))
    ops = check(model(tmp_path, nodes, [1, 80, 7] if transposed else [1, 6, 5],
                      [*inits, weights("b", (k, n))]))
    assert ops.count("Conv") == 1 + transposed and ops.count("MatMul") == 1 - transposed


def test_sequence_times_sequence(tmp_path):
    """(1, 6, 80) · (1, 80, 6) stored channels last: the two layouts meet in one MatMul."""
    nodes, inits = sequence(False)
    nodes += [helper.make_node("Transpose", ["seq"], ["t"], perm=[0, 2, 1]),
              helper.make_node("MatMul", ["seq", "t"], ["y"])]
    check(model(tmp_path, nodes, [1, 6, 6], inits))


# --- LayerNormalization -----------------------------------------------------------------------
@pytest.mark.parametrize("transposed", [False, True], ids=["cl", "lc"])
def test_layer_normalization(tmp_path, transposed):
    nodes, inits = sequence(transposed)
    n = 6 if transposed else 80
    nodes.append(helper.make_node("LayerNormalization", ["seq", "g", "b"], ["y"], axis=-1,
                                  epsilon=1e-5))
    inits += [weights("g", (n,)), weights("b", (n,))]
    ops = check(model(tmp_path, nodes, [1, 80, 6] if transposed else [1, 6, 80], inits))
    assert ops.count("LayerNormalization") == 1


@pytest.mark.parametrize("transposed", [False, True], ids=["cl", "lc"])
def test_decomposed_layer_norm_fuses(tmp_path, transposed):
    """PP-OCR's SVTR LayerNorm as its opset-12 export writes it: one pass after loading."""
    nodes, inits = sequence(transposed)
    n = 6 if transposed else 80
    nodes += [helper.make_node("ReduceMean", ["seq"], ["mean"], axes=[-1]),
              helper.make_node("Sub", ["seq", "mean"], ["d"]),
              helper.make_node("Pow", ["d", "two"], ["sq"]),
              helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1]),
              helper.make_node("Add", ["var", "eps"], ["ve"]),
              helper.make_node("Sqrt", ["ve"], ["std"]),
              helper.make_node("Div", ["d", "std"], ["nd"]),
              helper.make_node("Mul", ["nd", "g"], ["sc"]),
              helper.make_node("Add", ["sc", "b"], ["y"])]
    inits += [const("two", 2.0, np.float32), const("eps", [1e-6], np.float32),
              weights("g", (n,)), weights("b", (n,))]
    ops = check(model(tmp_path, nodes, [1, 80, 6] if transposed else [1, 6, 80], inits,
                      opset=12))
    assert ops.count("LayerNormalization") == 1 and "ReduceMean" not in ops


# --- errors ---------------------------------------------------------------------------------
ERRORS = [  # (nodes, out shape, inits, opset, message)
    ([helper.make_node("LayerNormalization", ["c", "g"], ["y"], axis=1)], [1, 6, 8, 10],
     [weights("g", (6, 8, 10))], 17, r"axis=1 normalises \[6, 8, 10\] together"),
    ([helper.make_node("Softmax", ["c"], ["y"], axis=2)], [1, 6, 8, 10], [], 12,
     r"Softmax-12 normalises over all axes from 2"),
    ([helper.make_node("MatMul", ["c", "b"], ["y"])], [1, 6, 8, 4],
     [weights("b", (2, 10, 4))], 17, r"only a \(K, N\) matrix"),
]


@pytest.mark.parametrize(("nodes", "out", "inits", "opset", "message"), ERRORS,
                         ids=["layernorm-axes", "softmax12-axes", "matmul-3d-constant"])
def test_errors_name_the_node(tmp_path, nodes, out, inits, opset, message):
    with pytest.raises(UnsupportedOpError, match=message):
        glcnn.load(model(tmp_path, nodes, out, inits, opset=opset), cache=False)
