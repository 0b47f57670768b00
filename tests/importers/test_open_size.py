"""Models with open input sizes ([1, 3, "H", "W"], as PyTorch exports with dynamic_axes):
imported at a given size, specialised per size by glcnn.load, run by the CLI at the input's
own size; every output against onnxruntime on the same input."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import assert_close
from onnx import helper
from onnx_models import make_model, rand
from PIL import Image

import glcnn
from glcnn.importers import open_inputs

SIZES = [(24, 32), (40, 28)]


def upsampler(dims=(1, 3, "H", "W")):
    """Conv -> Relu -> Resize to twice the size, the sizes computed from Shape -> Gather ->
    Mul -> Concat (what F.interpolate(x, size=(2 * h, 2 * w)) exports)."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "W", "B"], ["conv"], pads=[1, 1, 1, 1]),
        n("Relu", ["conv"], ["relu"]),
        n("Shape", ["relu"], ["shape"]),
        n("Gather", ["shape", "hw_axes"], ["hw"], axis=0),
        n("Mul", ["hw", "two"], ["hw2"]),
        n("Slice", ["shape", "start", "end"], ["nc"]),
        n("Concat", ["nc", "hw2"], ["sizes"], axis=0),
        n("Resize", ["relu", "", "", "sizes"], ["y"], mode="linear"),
    ]
    weights = {"W": rand(5, 3, 3, 3), "B": rand(5, seed=1), "hw_axes": np.array([2, 3]),
               "two": np.array([2, 2]), "start": np.array([0]), "end": np.array([2])}
    return make_model(nodes, {"x": list(dims)}, {"y": [1, 5, "H2", "W2"]}, weights)


def classifier():
    """Conv -> GlobalAveragePool -> x.view(x.size(0), -1) (Reshape built from Shape) -> Gemm."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "W", "B"], ["conv"], strides=[2, 2]),
        n("Relu", ["conv"], ["relu"]),
        n("GlobalAveragePool", ["relu"], ["pool"]),
        n("Shape", ["pool"], ["shape"]),
        n("Gather", ["shape", "zero"], ["batch"], axis=0),
        n("Unsqueeze", ["batch", "axes0"], ["batch1"]),
        n("Concat", ["batch1", "minus1"], ["target"], axis=0),
        n("Reshape", ["pool", "target"], ["flat"]),
        n("Gemm", ["flat", "fc_W", "fc_B"], ["logits"], transB=1),
    ]
    weights = {"W": rand(6, 3, 3, 3), "B": rand(6, seed=1), "zero": np.array(0),
               "axes0": np.array([0]), "minus1": np.array([-1]),
               "fc_W": rand(4, 6, seed=2), "fc_B": rand(4, seed=3)}
    return make_model(nodes, {"x": [-1, 3, -1, -1]}, {"logits": [-1, 4]}, weights)


MODELS = {"upsampler": upsampler, "classifier": classifier}


def save(model, tmp_path, name="model.onnx"):
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def reference(path, x):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def glcnn_cli(*args):
    exe = shutil.which("glcnn", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "glcnn.cli"]
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True)


def image(h, w, seed=0):
    return np.random.default_rng(seed).standard_normal((1, 3, h, w)).astype(np.float32)


# --- importing (GL-free) --------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_open_inputs_names_the_open_dims(name, tmp_path):
    assert open_inputs(save(MODELS[name](), tmp_path)) == {"x": (1, 3, "H", "W")}
    static = save(upsampler((1, 3, 8, 8)), tmp_path, "static.onnx")
    assert open_inputs(static) == {}


def test_import_at_a_size_folds_the_shape_arithmetic(tmp_path):
    graph = glcnn.load_graph(save(upsampler(), tmp_path), input_size=(24, 32))
    assert graph.inputs == {"x": (3, 24, 32)}
    assert [node.op for node in graph.nodes] == ["Conv", "Relu", "Resize"]
    assert graph.nodes[-1].attrs["sizes"] == [48, 64]
    assert graph.meta["onnx_output_shapes"] == {"y": [1, 5, 48, 64]}


def test_import_without_a_size_asks_for_one(tmp_path):
    with pytest.raises(glcnn.UnsupportedOpError, match=r"input_size=\(H, W\)"):
        glcnn.load_graph(save(upsampler(), tmp_path))


def test_a_size_too_small_for_the_model_is_named(tmp_path):
    """classifier()'s 3×3 stride-2 conv has no output pixel on a 1×1 input: a ShapeError
    naming the node, its shape and the size given (was a "malformed meta" error)."""
    with pytest.raises(glcnn.ShapeError, match=r"node .*\(Conv\) gives 'conv' the shape "
                       r"\[1, 6, 0, 0\]: a size ≤ 0 with input_size=\(1, 1\)"):
        glcnn.load_graph(save(classifier(), tmp_path), input_size=(1, 1))


def test_open_channels_are_refused(tmp_path):
    path = save(upsampler((1, "C", "H", "W")), tmp_path)
    with pytest.raises(glcnn.UnsupportedOpError, match="only the height and width"):
        open_inputs(path)
    with pytest.raises(glcnn.UnsupportedOpError, match="channels open"):
        glcnn.load_graph(path, input_size=(8, 8))


@pytest.mark.parametrize("size", [(0, 8), (8,), "8x8", (8, 8, 3)])
def test_bad_input_sizes_are_refused(size, tmp_path):
    with pytest.raises(glcnn.GlcnnError, match="expected \\(H, W\\)"):
        glcnn.load_graph(save(upsampler(), tmp_path), input_size=size)


# --- specialised per size (GL) ----------------------------------------------------------------
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", MODELS)
def test_runs_at_each_size_like_onnxruntime(ctx, name, precision, tmp_path):
    path = save(MODELS[name](), tmp_path)
    with glcnn.load(path, ctx=ctx, precision=precision) as model:
        assert isinstance(model, glcnn.OpenSizePipeline)
        for h, w in SIZES + SIZES[:1]:
            x = image(h, w)
            assert_close(model.run(x), reference(path, x), precision, f"{name} at {h}x{w}")
        assert model.sizes == [SIZES[1], SIZES[0]]  # least recently run first
        assert model.graph.inputs == {"x": (3, *SIZES[0])}


def test_second_size_compiles_fewer_programs(ctx, tmp_path):
    """On a fresh context (so nothing is cached): the second size reuses every program whose
    source does not depend on the size."""
    fresh = glcnn.Context()
    try:
        with glcnn.load(save(upsampler(), tmp_path), ctx=fresh) as model:
            counts = []
            for h, w in SIZES:
                before = fresh.compiles
                model.run(image(h, w))
                counts.append(fresh.compiles - before)
        print(f"programs compiled: {SIZES[0]} -> {counts[0]}, {SIZES[1]} -> {counts[1]}")
        assert 0 < counts[1] < counts[0], counts
    finally:
        fresh.gl.release()


def test_input_size_fixes_the_model(ctx, tmp_path):
    path = save(upsampler(), tmp_path)
    with glcnn.load(path, ctx=ctx, input_size=SIZES[1]) as model:
        assert isinstance(model, glcnn.Pipeline)
        x = image(*SIZES[1])
        assert_close(model.run(x), reference(path, x), "fp32", "input_size=")
        with pytest.raises(glcnn.ShapeError):
            model.run(image(*SIZES[0]))


def test_least_recently_run_size_is_released(ctx, tmp_path):
    with glcnn.load(save(upsampler(), tmp_path), ctx=ctx) as model:
        model.max_sizes = 2
        first = model.specialise((8, 8))
        model.run(image(9, 9))
        model.run(image(10, 10))
        assert model.sizes == [(9, 9), (10, 10)] and first.released


def test_weight_edits_reach_every_size(ctx, tmp_path):
    path = save(upsampler(), tmp_path)
    with glcnn.load(path, ctx=ctx) as model:
        model.run(image(*SIZES[0]))
        model.set_weights("relu", "B", np.zeros(5, np.float32))
        model.run(image(*SIZES[1]))
        for size in SIZES:
            np.testing.assert_array_equal(model.specialise(size).weights("relu")["B"], 0)


def test_methods_before_any_run_say_what_to_do(ctx, tmp_path):
    model = glcnn.load(save(upsampler(), tmp_path), ctx=ctx)
    for call in (lambda: model.texture("x"), lambda: model.read("y"), lambda: model.summary()):
        with pytest.raises(glcnn.GlcnnError, match=r"run\(x\) once.*input_size="):
            call()
    assert "H?, W?" in repr(model)
    model.release()
    with pytest.raises(glcnn.GlcnnError, match="released"):
        model.run(image(8, 8))


def test_u8_calibrates_once_for_every_size(ctx, tmp_path):
    path = save(upsampler(), tmp_path)
    samples = [image(*SIZES[0], seed=s) for s in range(3)]
    with glcnn.load(path, ctx=ctx, precision="u8", calibration=samples) as model:
        for h, w in SIZES:
            x = image(h, w, seed=9) * 0.5  # within the calibrated ranges
            assert_close(model.run(x), reference(path, x), "u8", f"u8 at {h}x{w}")
        ranges = [model.specialise(size).graph.meta["u8_ranges"] for size in SIZES]
        assert ranges[0] == ranges[1]


# --- the command line ---------------------------------------------------------------------------
@pytest.mark.gl
def test_cli_runs_npy_and_png_at_their_own_size(tmp_path):
    path = save(upsampler(), tmp_path)
    x = image(*SIZES[1])
    np.save(tmp_path / "x.npy", x)
    pixels = np.random.default_rng(1).integers(0, 256, (*SIZES[0], 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "x.png")
    from_png = (pixels.transpose(2, 0, 1)[None] / 255.0).astype(np.float32)
    for source, expected in [("x.npy", x), ("x.png", from_png)]:
        done = glcnn_cli("run", path, tmp_path / source, "-o", tmp_path / "y.npy")
        assert done.returncode == 0, done.stderr
        assert "resizing" not in done.stderr
        y, ref = np.load(tmp_path / "y.npy"), reference(path, expected)
        assert y.shape == ref.shape[1 if source.endswith(".png") else 0:]  # images: (C, H, W)
        assert_close(y.reshape(ref.shape), ref, "fp32", f"glcnn run {source}")


@pytest.mark.gl
def test_cli_input_size_resizes_the_image(tmp_path):
    path = save(upsampler(), tmp_path)
    Image.fromarray(np.zeros((30, 30, 3), np.uint8)).save(tmp_path / "x.png")
    done = glcnn_cli("run", path, tmp_path / "x.png", "--input-size", 12, 20,
                     "-o", tmp_path / "y.npy")
    assert done.returncode == 0, done.stderr
    assert "resizing" in done.stderr and np.load(tmp_path / "y.npy").shape == (5, 24, 40)


def test_cli_info_shows_open_dims_and_layers_at_a_size(tmp_path):
    path = save(upsampler(), tmp_path)
    done = glcnn_cli("info", path)
    assert done.returncode == 0, done.stderr
    assert "x (1, 3, H?, W?)" in done.stdout and "--input-size" in done.stdout
    done = glcnn_cli("info", path, "--input-size", 24, 32)
    assert done.returncode == 0, done.stderr
    assert "Resize" in done.stdout and "(5, 48, 64)" in done.stdout


def test_cli_open_channels_is_one_line_error(tmp_path):
    done = glcnn_cli("info", save(upsampler((1, "C", "H", "W")), tmp_path))
    assert done.returncode == 2 and "only the height and width" in done.stderr


# --- channels-last inputs (N, H, W, C), as tf2onnx writes Keras models ------------------------
def channels_last(dims=("N", "H", "W", 3), to_nchw=(0, 3, 1, 2)):
    """Transpose to NCHW -> Conv (stride 2) -> PRelu -> MaxPool -> Transpose back to NHWC."""
    n = helper.make_node
    nodes = [
        n("Transpose", ["x"], ["nchw"], perm=list(to_nchw)),
        n("Conv", ["nchw", "W", "B"], ["conv"], strides=[2, 2]),
        n("PRelu", ["conv", "slope"], ["prelu"]),
        n("MaxPool", ["prelu"], ["pool"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        n("Transpose", ["pool"], ["y"], perm=[0, 2, 3, 1]),
    ]
    weights = {"W": rand(4, 3, 3, 3), "B": rand(4, seed=1), "slope": rand(4, 1, 1, seed=2)}
    return make_model(nodes, {"x": list(dims)}, {"y": ["N", "H2", "W2", 4]}, weights)


def nhwc_image(h, w, seed=0):
    return np.random.default_rng(seed).standard_normal((1, h, w, 3)).astype(np.float32)


def test_channels_last_open_dims_are_h_and_w(tmp_path):
    assert open_inputs(save(channels_last(), tmp_path)) == {"x": (1, "H", "W", 3)}
    assert open_inputs(save(channels_last((1, 16, "W", 3)), tmp_path, "w.onnx")) == \
        {"x": (1, 16, "W", 3)}
    graph = glcnn.load_graph(save(channels_last(), tmp_path), input_size=(20, 30))
    assert graph.inputs == {"x": (20, 30, 3)}  # the ONNX (1, H, W, C) as it is stored
    assert graph.meta["onnx_output_shapes"] == {"y": [1, 5, 7, 4]}


def test_channels_last_needs_the_transpose_to_nchw(tmp_path):
    """Without a Transpose (0, 3, 1, 2) reading it, (N, ?, ?, 3) is an NCHW input with open
    channels."""
    path = save(channels_last(to_nchw=(0, 3, 2, 1)), tmp_path)
    with pytest.raises(glcnn.UnsupportedOpError, match=r"\(N, H, W, C\) read by a Transpose"):
        open_inputs(path)
    with pytest.raises(glcnn.UnsupportedOpError, match="channels open"):
        glcnn.load_graph(path, input_size=(8, 8))


def test_channels_last_runs_at_each_size_like_onnxruntime(ctx, tmp_path):
    path = save(channels_last(), tmp_path)
    with glcnn.load(path, ctx=ctx) as model:
        assert isinstance(model, glcnn.OpenSizePipeline)
        for h, w in SIZES + [(9, 13)]:
            x = nhwc_image(h, w)
            assert model.size_of(x) == model.size_of(x[0]) == (h, w)
            assert_close(model.run(x), reference(path, x), "fp32", f"NHWC at {h}x{w}")
        assert model.sizes == [*SIZES, (9, 13)]


@pytest.mark.gl
def test_cli_runs_channels_last_npy_at_its_own_size(tmp_path):
    path = save(channels_last(), tmp_path)
    x = nhwc_image(*SIZES[1])
    np.save(tmp_path / "x.npy", x)
    done = glcnn_cli("run", path, tmp_path / "x.npy", "-o", tmp_path / "y.npy")
    assert done.returncode == 0, done.stderr
    ref = reference(path, x)
    assert_close(np.load(tmp_path / "y.npy").reshape(ref.shape), ref, "fp32", "glcnn run NHWC")
