"""Transpose of (1, C, H, W) by every permutation of C, H, W against glcnn.graph.reference
(fp32, fp16, u8), its errors, and the ONNX converter against onnxruntime."""

import itertools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import assert_close, check_op, single_op_graph
from onnx import helper

import glcnn
from glcnn.graph import Node, reference
from glcnn.ops import make_op

PERMS = [[0, *p] for p in itertools.permutations((1, 2, 3))]
PERM_IDS = ["perm" + "".join(map(str, p)) for p in PERMS]
SHAPES = [(3, 5, 7), (5, 6, 3), (6, 1, 9), (1, 4, 4), (13, 2, 5)]
SHAPE_IDS = ["c" + "x".join(map(str, s)) for s in SHAPES]


def check_u8(ctx, perm, shape):
    """u8, calibrated on the evaluated sample; the reference reads the input as stored."""
    graph = single_op_graph("Transpose", {"perm": perm}, [shape])
    feeds = [{"x0": np.random.default_rng(0).standard_normal(shape).astype(np.float32) * 3}]
    glcnn.calibrate(graph, feeds, ctx)
    with glcnn.Pipeline(graph, ctx, precision="u8", keep="all") as pipe:
        y, stored = pipe.run(feeds[0]), pipe.read("x0")
    return assert_close(y, reference.run(graph, {"x0": stored})["y"], "u8",
                        f"Transpose perm={perm} {shape} u8")


@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("perm", PERMS, ids=PERM_IDS)
def test_transpose(ctx, perm, shape, precision):
    if precision == "u8":
        check_u8(ctx, perm, shape)
    else:
        check_op(ctx, "Transpose", {"perm": perm}, [shape], None, precision)


def test_transpose_is_exact(ctx):
    """A gather: every value moves unchanged."""
    x = np.random.default_rng(1).standard_normal((6, 5, 7)).astype(np.float32)
    for perm in PERMS:
        graph = single_op_graph("Transpose", {"perm": perm}, [x.shape])
        with glcnn.Pipeline(graph, ctx) as pipe:
            np.testing.assert_array_equal(pipe.run(x), x[None].transpose(perm)[0], str(perm))


@pytest.mark.parametrize("perm", [[1, 0, 2, 3], [3, 2, 1, 0], [0, 1, 2], [0, 1, 1, 2], None],
                         ids=["batch-moved", "reversed", "too-short", "repeated", "missing"])
def test_bad_perm_names_the_layer(perm):
    attrs = {} if perm is None else {"perm": perm}
    node = Node("Transpose", "layer_under_test", ["x0"], attrs, {})
    with pytest.raises(glcnn.UnsupportedOpError, match="keeping the batch axis 0 first") as info:
        make_op(node, [(3, 4, 4)])
    assert "'layer_under_test'" in str(info.value)


def _model(perm, shape, name="t"):
    node = helper.make_node("Transpose", ["x"], ["y"], name=name,
                            **({} if perm is None else {"perm": perm}))
    info = helper.make_tensor_value_info
    graph = helper.make_graph([node], "transpose", [info("x", onnx.TensorProto.FLOAT, shape)],
                              [info("y", onnx.TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("perm", PERMS, ids=PERM_IDS)
def test_onnx_transpose_matches_onnxruntime(ctx, tmp_path, perm):
    path = tmp_path / "t.onnx"
    onnx.save(_model(perm, [1, 5, 3, 6]), str(path))
    x = np.random.default_rng(2).standard_normal((1, 5, 3, 6)).astype(np.float32)
    (theirs,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})
    with glcnn.load(path, ctx=ctx) as pipe:
        ours = pipe.run(x[0])
    np.testing.assert_array_equal(ours, theirs[0])


@pytest.mark.parametrize(("perm", "shape", "message"), [
    ([1, 0, 2, 3], [1, 3, 4, 4],
     "'t' \\(Transpose\\) has shape \\[3, 1, 4, 4\\] \\(batch size 3\\)"),
    (None, [1, 3, 4, 4], "has shape \\[4, 4, 3, 1\\] \\(batch size 4\\)"),
    ([1, 0], [1, 6], "has shape \\[6, 1\\] \\(batch size 6\\)"),
    ([0, 1, 2, 2], [1, 3, 4, 4], "perm=\\[0, 1, 2, 2\\] is not a permutation"),
], ids=["batch-moved", "default-reverses", "rank-2", "not-a-permutation"])
def test_onnx_bad_transpose_names_the_node(tmp_path, perm, shape, message):
    path = tmp_path / "t.onnx"
    onnx.save(_model(perm, shape), str(path))
    with pytest.raises(glcnn.UnsupportedOpError, match=message):
        glcnn.load_graph(path)
