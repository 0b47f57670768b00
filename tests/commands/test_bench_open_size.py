"""`glcnn bench` on models whose input sizes are open: timed at `--input-size H W` or at the
`--input` array's size, its output checked against onnxruntime and torch at that size first."""

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx_models import make_model, rand

import glcnn
from glcnn.commands.bench import Settings, bench, bench_size

pytestmark = pytest.mark.gl  # makes its own GL contexts

QUICK = Settings(runs=2, warmup=1, budget=1.0, load_times=False, settle=0)


def quiet(message):
    """A progress reporter that drops the lines."""


def conv_relu(dims=(1, 3, "H", "W"), channels_last=False):
    """Conv 3 -> 4 (3×3, padding 1) -> Relu; channels last: Transposes around it."""
    n = helper.make_node
    nodes = [n("Conv", ["nchw" if channels_last else "x", "W", "B"], ["conv"],
               pads=[1, 1, 1, 1]),
             n("Relu", ["conv"], ["relu" if channels_last else "y"])]
    if channels_last:
        nodes = [n("Transpose", ["x"], ["nchw"], perm=[0, 3, 1, 2]), *nodes,
                 n("Transpose", ["relu"], ["y"], perm=[0, 2, 3, 1])]
    return make_model(nodes, {"x": list(dims)}, {"y": None},
                      {"W": rand(4, 3, 3, 3), "B": rand(4, seed=1)})


@pytest.fixture(scope="module")
def open_onnx(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench_open") / "open.onnx"
    onnx.save(conv_relu(), str(path))
    return path


def test_bench_size_comes_from_input_size_or_the_inputs(open_onnx, tmp_path):
    x = np.zeros((1, 3, 10, 14), np.float32)
    assert bench_size(open_onnx, input_size=(12, 20)) == (12, 20)
    assert bench_size(open_onnx, x) == bench_size(open_onnx, {"x": x[0]}) == (10, 14)
    nhwc = tmp_path / "nhwc.onnx"
    onnx.save(conv_relu(("N", "H", "W", 3), channels_last=True), str(nhwc))
    assert bench_size(nhwc, np.zeros((1, 10, 14, 3), np.float32)) == (10, 14)
    fixed = tmp_path / "fixed.onnx"
    onnx.save(conv_relu((1, 3, 8, 8)), str(fixed))
    assert bench_size(fixed, input_size=(12, 20)) is None  # fixed sizes ignore it
    with pytest.raises(glcnn.GlcnnError, match=r"--input-size H W, or --input NPY"):
        bench_size(open_onnx)
    with pytest.raises(glcnn.GlcnnError, match=r"expected \(H, W\)"):
        bench_size(open_onnx, input_size=(0, 8))


@pytest.mark.parametrize("given", ["input_size", "inputs"])
def test_bench_open_model_against_onnxruntime_and_torch(ctx, open_onnx, given):
    x = np.random.default_rng(0).random((1, 3, 12, 20), np.float32)
    options = {"input_size": (12, 20)} if given == "input_size" else {"inputs": x}
    report = bench(open_onnx, against=("onnxruntime", "torch"), settings=QUICK, ctx=ctx,
                   report_progress=quiet, **options)
    assert report["input_size"] == [12, 20] and report["inputs"] == {"x": [1, 3, 12, 20]}
    assert len(report["agreement"]) == 3 and all(a["ok"] for a in report["agreement"])
    assert report["glcnn"]["fp32"]["layers"][0]["shape"] == [4, 12, 20]
    json.dumps(report)


def test_bench_channels_last_open_model(ctx, tmp_path):
    path = tmp_path / "nhwc.onnx"
    onnx.save(conv_relu(("N", "H", "W", 3), channels_last=True), str(path))
    x = np.random.default_rng(1).random((1, 9, 13, 3), np.float32)
    report = bench(path, x, against=("onnxruntime",), settings=QUICK, ctx=ctx,
                   report_progress=quiet)
    assert report["input_size"] == [9, 13] and report["agreement"][0]["ok"]


def glcnn_main(*args):
    return subprocess.run([sys.executable, "-m", "glcnn.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=600)


def test_cli_bench_input_size_with_load_times(open_onnx, tmp_path):
    """--input-size reaches the timing, the torch reference and the load-time probes."""
    done = glcnn_main("bench", open_onnx, "--input-size", 12, 20, "--against", "torch",
                      "--runs", 2, "--warmup", 1, "--budget", 0.5, "--json", tmp_path / "b.json")
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "b.json").read_text())
    assert report["input_size"] == [12, 20] and report["inputs"] == {"x": [1, 3, 12, 20]}
    for kind in ("cold", "warm"):
        assert report["glcnn"]["fp32"]["load"][kind]["first_run_ms"] > 0


def test_cli_bench_input_array_sets_the_size(open_onnx, tmp_path):
    np.save(tmp_path / "x.npy", np.random.default_rng(2).random((1, 3, 7, 11), np.float32))
    done = glcnn_main("bench", open_onnx, "--input", tmp_path / "x.npy", "--against",
                      "onnxruntime", "--runs", 2, "--warmup", 1, "--budget", 0.5, "--json",
                      tmp_path / "b.json")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "b.json").read_text())["input_size"] == [7, 11]
