"""Large ONNX weights read as views of the file (glcnn/importers/onnx_wire.py): the same
arrays as onnx's own reader, the same outputs as onnxruntime, and onnx's reader whenever the
file is anything but the plain case."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import assert_close
from onnx import helper, numpy_helper
from onnx_models import make_model, rand

import glcnn
from glcnn.errors import WeightError
from glcnn.importers import onnx_wire
from glcnn.importers.onnx import read_model, read_split
from glcnn.importers.onnx_fold import INFER_DATA_LIMIT

BIG = INFER_DATA_LIMIT + 1  # elements: the smallest initializer read apart


def conv_model(dtype_extra=np.float64):
    """Conv with a large float32 W (read apart), a small bias (kept in protobuf), and an
    unused large `dtype_extra` initializer (read apart: its bytes must match too)."""
    w = rand(64, 24, 3, 3, seed=5)  # 13824 elements
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["y"], pads=[1, 1, 1, 1])]
    extra = (np.arange(BIG) * 0.37 - 999).astype(dtype_extra)
    return make_model(nodes, {"x": [1, 24, 6, 5]}, {"y": [1, 64, 6, 5]},
                      {"W": w, "B": rand(64, seed=6), "extra": extra})


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32, np.float32])
def test_views_equal_onnx_arrays_and_model_keeps_metadata(tmp_path, dtype):
    path = tmp_path / "m.onnx"
    onnx.save(conv_model(dtype), str(path))
    full = read_model(path)
    model, weights = read_split(path)
    assert sorted(weights) == ["W", "extra"]
    for tensor in full.graph.initializer:
        expected = numpy_helper.to_array(tensor)
        if tensor.name in weights:
            got = weights[tensor.name]
            assert got.dtype == expected.dtype and not got.flags.writeable
            np.testing.assert_array_equal(got, expected)
        stripped = next(t for t in model.graph.initializer if t.name == tensor.name)
        assert list(stripped.dims) == list(tensor.dims)
        assert stripped.data_type == tensor.data_type
        assert bool(stripped.raw_data) == (tensor.name not in weights)
    assert [n.op_type for n in model.graph.node] == ["Conv"]


def test_split_model_runs_like_onnxruntime(ctx, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(conv_model(), str(path))
    x = rand(1, 24, 6, 5, seed=7, scale=1.0)
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0][0]
    with glcnn.load(path, ctx=ctx) as pipe:
        assert_close(pipe.run(x[0]), expected, "fp32", "conv with weights read apart")


def test_external_data_is_read_by_onnx(ctx, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(conv_model(), str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights.bin", size_threshold=1024)
    assert (tmp_path / "weights.bin").exists()
    model, weights = read_split(path)
    assert weights == {}  # the walker left the file to onnx, which loaded weights.bin
    w = next(t for t in model.graph.initializer if t.name == "W")
    np.testing.assert_array_equal(numpy_helper.to_array(w), rand(64, 24, 3, 3, seed=5))
    x = rand(1, 24, 6, 5, seed=7, scale=1.0)
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0][0]
    with glcnn.load(path, ctx=ctx) as pipe:
        assert_close(pipe.run(x[0]), expected, "fp32", "conv with weights read apart")


@pytest.mark.parametrize("data", [b"", b"\xff" * 20, b"\x3a\x10abc", b"\x3a\x05\x2a\x80"])
def test_malformed_bytes_fall_back(data):
    assert onnx_wire.split(data, 0) is None


def test_truncated_weights_fall_back_to_onnx_error(tmp_path):
    path = tmp_path / "m.onnx"
    data = conv_model().SerializeToString()
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(glcnn.errors.ModelFileError, match="m.onnx"):
        glcnn.load(path)


def test_raw_data_of_the_wrong_length_is_left_to_onnx():
    tensor = numpy_helper.from_array(rand(BIG), "w")
    tensor.raw_data = tensor.raw_data[:-4]
    model = make_model([], {"x": [1, 1]}, {"x": [1, 1]})
    model.graph.initializer.append(tensor)
    assert onnx_wire.split(model.SerializeToString(), INFER_DATA_LIMIT) is None


def test_nan_in_a_read_only_weight_is_refused(ctx, tmp_path):
    model = conv_model()
    w = numpy_helper.to_array(model.graph.initializer[0]).copy()
    w[3, 2, 1, 0] = np.nan
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(w, "W"))
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    with pytest.raises(WeightError, match="NaN or Inf"):
        glcnn.load(path, ctx=ctx)


def test_writable_weight_is_checked_again_after_a_change(ctx):
    """Only read-only arrays are remembered as finite: NaN written into a writable weight
    after one build is caught by the next."""
    from glcnn.graph import Graph, Node
    from glcnn.ops import build_ops
    w = rand(8, 4, 3, 3)
    graph = Graph({"x": (4, 5, 5)}, [Node("Conv", "y", ["x"], {"pads": [1, 1, 1, 1]},
                                          {"W": w})], ["y"])
    build_ops(graph)
    w[0, 0, 0, 0] = np.inf
    with pytest.raises(WeightError, match="NaN or Inf"):
        build_ops(graph)
