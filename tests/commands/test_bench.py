"""`glcnn bench`: timing structure, the torch Graph runner against glcnn.graph.reference, output
checks against onnxruntime and torch, the CLI and its errors. Speed is measured, never
asserted."""

import json
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
from helpers import scaled_error, single_op_graph
from onnx_models import flatten_gemm, normalise_and_excite

import glcnn
from glcnn.commands.bench import Settings, bench, measure, time_layers, time_pipeline
from glcnn.commands.bench_report import format_report
from glcnn.commands.torch_runner import TorchRunner
from glcnn.graph import Graph, Node, models, passes, reference
from glcnn.runtime.precision import TOLERANCE

pytestmark = pytest.mark.gl  # makes its own GL contexts

# The torch runner computes in float32 (oneDNN kernels), the reference in float64.
RUNNER_TOLERANCE = 1e-5
QUICK = Settings(runs=2, warmup=1, budget=1.0, load_times=False, settle=0)


def quiet(message):
    """A progress reporter that drops the lines."""


@pytest.fixture(scope="module")
def tiny_npz(tmp_path_factory):
    """One Conv+Relu: the cold-load probe JIT-compiles few shaders."""
    b = glcnn.Builder()
    y = b.conv(b.input("image", (3, 8, 12)), 4, 3, padding=1, activation="Relu", name="conv")
    path = tmp_path_factory.mktemp("bench") / "conv.npz"
    glcnn.save(b.build([y], {"conv.weight": np.full((4, 3, 3, 3), 0.1, np.float32),
                              "conv.bias": np.zeros(4, np.float32)}), path)
    return path


# --- timing -----------------------------------------------------------------------------------
def test_measure_counts_runs_and_stops_at_the_budget():
    calls = []
    assert len(measure(lambda: calls.append(1), Settings(5, 2, 10.0))) == 5
    assert len(calls) == 7  # warm-up calls are not timed
    slow = measure(lambda: time.sleep(0.03), Settings(runs=100, warmup=0, budget=0.05))
    assert len(slow) == 3  # the budget is spent, but a measurement has at least 3 runs


def test_time_pipeline_and_layers_structure(ctx):
    x = np.random.default_rng(0).random((1, 3, 8, 12)).astype(np.float32)
    with glcnn.Pipeline(models.autoencoder(size=(8, 12)), ctx) as pipe:
        timing = time_pipeline(pipe, {"image": x}, QUICK)
        layers = time_layers(pipe, {"image": x}, QUICK)
        names = [p.op.node.name for p in pipe.passes]
    for t in timing.values():
        assert t["runs"] == 2 and len(t["times_ms"]) == 2
        assert 0 < t["min_ms"] <= t["median_ms"] and t["fps"] > 0 and t["gflops"] > 0
    assert [r["layer"] for r in layers] == names == ["enc1", "enc2", "dec1", "dec2"]
    assert layers[1]["op"] == "Conv+Relu" and layers[1]["shape"] == [256, 2, 3]
    assert sum(r["share"] for r in layers) == pytest.approx(1.0)


def test_bench_report_without_references(ctx, tiny_npz):
    report = bench(tiny_npz, settings=QUICK, ctx=ctx, report_progress=quiet)
    assert report["inputs"] == {"image": [1, 3, 8, 12]} and report["mflops"] > 0
    assert report["machine"]["renderer"] == ctx.renderer and report["machine"]["cores"] >= 1
    assert set(report["glcnn"]["fp32"]) == {"strategy", "readback", "no_readback", "layers"}
    assert report["agreement"] == [] and report["ratios"] == {"fp32": {}}
    text = format_report(report)
    assert "glcnn fp32 no readback" in text and "Conv+Relu" in text
    json.dumps(report)


# --- against onnxruntime and torch ------------------------------------------------------------
@pytest.mark.parametrize("make", [flatten_gemm, normalise_and_excite])
def test_bench_against_onnxruntime_and_torch(ctx, tmp_path, make):
    path = tmp_path / "m.onnx"
    onnx.save(make(), str(path))
    report = bench(path, precisions=("fp32", "fp16"), against=("onnxruntime", "torch"),
                   settings=QUICK, ctx=ctx, report_progress=quiet)
    pairs = [(r["a"].split(" (")[0], r["b"].split(" (")[0]) for r in report["agreement"]]
    assert pairs == [("onnxruntime", "torch"), ("glcnn fp32", "onnxruntime"),
                     ("glcnn fp32", "torch"), ("glcnn fp16", "onnxruntime"),
                     ("glcnn fp16", "torch")]
    for row in report["agreement"]:  # the op tests' tolerances (scaled error)
        precision = row["a"].split()[-1] if row["a"].startswith("glcnn") else "fp32"
        assert row["ok"] and row["scaled"] <= TOLERANCE[precision], row
    assert set(report["ratios"]["fp16"]) == {"onnxruntime", "torch"}
    assert report["against"]["torch"]["runs"] == 2


def test_disagreeing_outputs_are_never_timed(ctx, tiny_npz, monkeypatch):
    monkeypatch.setitem(glcnn.commands.bench.AGREEMENT, "fp32", -1.0)  # any difference is too much
    with pytest.raises(glcnn.MismatchError, match="refusing to time a wrong computation"):
        bench(tiny_npz, against=("torch",), settings=QUICK, ctx=ctx, report_progress=quiet)
    report = bench(tiny_npz, precisions=("fp32", "fp16"), against=("torch",), settings=QUICK,
                   ctx=ctx, report_progress=quiet, strict=False)
    assert set(report["glcnn"]["fp32"]) == {"error"} and "readback" in report["glcnn"]["fp16"]
    assert "not timed" in format_report(report)


# --- the torch runner against the float64 reference -------------------------------------------
def conv_weights(w0, w1, k, bias=0, seed=1):
    """W of shape (w0, w1, k, k) (Conv: (Co, Cg, ..), ConvTranspose: (Ci, Co/group, ..)),
    and a bias B of `bias` values unless 0."""
    rng = np.random.default_rng(seed)
    w = {"W": rng.standard_normal((w0, w1, k, k)).astype(np.float32) * 0.3}
    return w | ({"B": rng.standard_normal(bias).astype(np.float32)} if bias else {})


def channel_weights(c, *keys, seed=2):
    rng = np.random.default_rng(seed)
    return {k: (rng.random(c) + 0.5).astype(np.float32) for k in keys}


RUNNER_CASES = {
    "conv-asym-pads-s2": ("Conv", {"strides": [2, 1], "pads": [1, 0, 2, 1]}, [(5, 9, 8)],
                          conv_weights(6, 5, 3, bias=6)),
    "conv-groups-dilated": ("Conv", {"group": 2, "dilations": [2, 2], "pads": [2, 2, 2, 2]},
                            [(6, 7, 7)], conv_weights(4, 3, 3, bias=4)),
    "conv-depthwise-residual-leakyrelu": (
        "Conv", {"group": 5, "pads": [1, 1, 1, 1], "residual": True,
                 "activation": {"op": "LeakyRelu", "alpha": 0.1}},
        [(5, 6, 6), (5, 6, 6)], conv_weights(5, 1, 3, bias=5)),
    "conv-input-leakyrelu": (
        "Conv", {"pads": [1, 1, 1, 1], "input_activation": {"op": "LeakyRelu", "alpha": 0.2}},
        [(4, 5, 5)], conv_weights(4, 4, 3, bias=4)),
    "convtranspose-s2-outpad-asym": (
        "ConvTranspose", {"strides": [2, 2], "pads": [1, 0, 0, 1], "output_padding": [1, 1]},
        [(4, 5, 4)], conv_weights(4, 3, 4, bias=3)),
    "convtranspose-groups-hardsigmoid": (
        "ConvTranspose", {"strides": [2, 2], "pads": [1, 1, 1, 1], "group": 2,
                          "activation": {"op": "HardSigmoid", "alpha": 0.3, "beta": 0.4}},
        [(4, 3, 3)], conv_weights(4, 3, 4)),
    "batchnorm-prelu": ("BatchNormalization", {"activation": {"op": "PRelu"}}, [(6, 4, 5)],
                        channel_weights(6, "scale", "B", "mean", "var", "slope")),
    "instancenorm-clip": ("InstanceNormalization", {"activation": {"op": "Clip", "min": -0.5,
                                                                   "max": 0.5}},
                          [(5, 6, 7)], channel_weights(5, "scale", "B")),
    "maxpool-ceil": ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                 "ceil_mode": 1}, [(3, 8, 7)], {}),
    "avgpool-include-pad": ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 2],
                                            "pads": [1, 1, 1, 1], "count_include_pad": 1},
                            [(3, 7, 6)], {}),
    "upsample-nearest": ("Upsample", {"scales": [2, 3]}, [(3, 4, 5)], {}),
    "resize-linear-half-pixel": ("Resize", {"mode": "linear", "sizes": [7, 10]}, [(3, 4, 5)], {}),
    "resize-linear-align-corners": ("Resize", {"mode": "linear", "scales": [2.0, 2.0],
                                               "coordinate_transformation_mode": "align_corners"},
                                    [(2, 3, 4)], {}),
    "resize-nearest-exact": ("Resize", {"sizes": [9, 5], "nearest_mode": "round_prefer_ceil"},
                             [(2, 4, 3)], {}),
    "pad-reflect-crop": ("Pad", {"pads": [0, 0, 2, -1, 0, 0, 1, 2], "mode": "reflect"},
                         [(3, 5, 6)], {}),
    "pad-edge": ("Pad", {"pads": [0, 0, 1, 2, 0, 0, 3, 0], "mode": "edge"}, [(2, 4, 4)], {}),
    "pad-wrap": ("Pad", {"pads": [0, 0, 1, 1, 0, 0, 2, 2], "mode": "wrap"}, [(2, 4, 4)], {}),
    "pad-constant": ("Pad", {"pads": [0, 0, 1, 0, 0, 0, 0, 2], "value": 0.7}, [(2, 3, 3)], {}),
    "concat-odd-channels": ("Concat", {"axis": 1}, [(3, 4, 4), (2, 4, 4), (5, 4, 4)], {}),
    "slice": ("Slice", {"starts": [1, -4], "ends": [100, -1], "axes": [2, 3]}, [(3, 6, 7)], {}),
    "depth-to-space-dcr": ("DepthToSpace", {"blocksize": 2}, [(8, 3, 2)], {}),
    "depth-to-space-crd": ("DepthToSpace", {"blocksize": 2, "mode": "CRD"}, [(8, 3, 2)], {}),
    "add-channel-broadcast": ("Add", {}, [(5, 3, 4), (5, 1, 1)], {}),
    "mul-constant-elu": ("Mul", {"activation": {"op": "Elu", "alpha": 0.5}}, [(4, 3, 3)],
                         {"B": np.array([0.5, -1.0, 2.0, 3.0], np.float32)}),
    "softmax-channels": ("Softmax", {"axis": 1}, [(7, 3, 2)], {}),
    "global-average-pool": ("GlobalAveragePool", {}, [(5, 6, 7)], {}),
    "reducemax-w": ("ReduceMax", {"axes": [3]}, [(5, 6, 7)], {}),
    "flatten": ("Flatten", {"axis": 1}, [(3, 2, 2)], {}),
    "gemm-transb": ("Gemm", {"transB": 1, "alpha": 0.5, "beta": 2.0}, [(6, 1, 1)],
                    {"B": np.arange(30, dtype=np.float32).reshape(5, 6) / 30,
                     "C": np.arange(5, dtype=np.float32)}),
    "hardswish": ("HardSwish", {}, [(3, 4, 4)], {}),
}


def _check_runner(graph, seed=0):
    rng = np.random.default_rng(seed)
    xs = {name: rng.standard_normal(shape).astype(np.float32)
          for name, shape in graph.inputs.items()}
    ys = TorchRunner(graph)(xs)
    refs = reference.run(graph, xs)
    for name, y in ys.items():
        assert y.shape == refs[name].shape
        err = scaled_error(y, refs[name])
        assert err <= RUNNER_TOLERANCE, f"{name}: scaled error {err:.3g}"


@pytest.mark.parametrize("case", RUNNER_CASES)
def test_torch_runner_matches_reference(case):
    op, attrs, shapes, weights = RUNNER_CASES[case]
    _check_runner(single_op_graph(op, attrs, shapes, weights))


def test_torch_runner_runs_glcnns_multi_pass_forms():
    """InstanceNorm and Softmax as glcnn.graph.passes.expand_reductions splits them."""
    x = "x0"
    nodes = [Node("InstanceNormalization", "norm", [x], {}, channel_weights(6, "scale", "B")),
             Node("Relu", "relu", ["norm"]), Node("Conv", "wide", ["relu"], {},
                                                   conv_weights(300, 6, 1, bias=300)),
             Node("Softmax", "y", ["wide"], {"axis": 1})]
    graph = passes.optimize(Graph({x: (6, 40, 36)}, nodes, ["y"]))
    ops = {n.op for n in graph.nodes}
    assert {"InstanceNormMean", "InstanceNormVariance", "SoftmaxStats"} <= ops, ops
    _check_runner(graph)


def test_torch_runner_names_an_unmappable_layer():
    graph = single_op_graph("Resize", {"scales": [2, 2], "coordinate_transformation_mode":
                                       "tf_half_pixel_for_nn"}, [(2, 3, 3)], name="up")
    with pytest.raises(glcnn.UnsupportedOpError, match="layer 'up' .*Resize"):
        TorchRunner(graph)


def test_torch_failure_names_the_layer():
    """ONNX wraps any pad; torch's circular padding wraps at most once."""
    graph = single_op_graph("Pad", {"pads": [0, 0, 5, 0, 0, 0, 0, 0], "mode": "wrap"},
                            [(2, 3, 3)], name="pad")
    with pytest.raises(glcnn.GlcnnError, match="torch failed on layer 'pad' \\(Pad\\)"):
        TorchRunner(graph)({"x0": np.zeros((2, 3, 3), np.float32)})


# --- the command ------------------------------------------------------------------------------
def glcnn_main(*args):
    """`glcnn` in a fresh Python, reporting on stdout whether torch was imported."""
    code = ("import sys; from glcnn.cli import main; status = main(sys.argv[1:]); "
            "print('torch imported:', 'torch' in sys.modules); sys.exit(status)")
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True)


def test_cli_bench_writes_json(tiny_npz, tmp_path):
    done = glcnn_main("bench", tiny_npz, "--runs", "2", "--warmup", "1", "--json",
                      tmp_path / "b.json")
    assert done.returncode == 0, done.stderr
    assert "torch imported: False" in done.stdout and "glcnn fp32" in done.stdout
    report = json.loads((tmp_path / "b.json").read_text())
    assert {"model", "inputs", "mflops", "settings", "machine", "agreement", "glcnn",
            "against", "ratios"} <= set(report)
    assert {"date", "cpu", "cores", "renderer", "gl_version", "numpy", "moderngl",
            "onnxruntime", "torch", "glcnn", "load_average"} <= set(report["machine"])
    fp32 = report["glcnn"]["fp32"]
    assert fp32["readback"]["runs"] == 2 and [r["layer"] for r in fp32["layers"]] == ["conv"]
    for kind in ("cold", "warm"):
        assert fp32["load"][kind]["total_ms"] >= fp32["load"][kind]["first_run_ms"] > 0


@pytest.mark.parametrize("case", ["missing-model", "unknown-against", "onnxruntime-on-npz",
                                  "input-not-npy"])
def test_cli_bench_errors_are_one_line_exit_2(case, tiny_npz, tmp_path):
    args = {"missing-model": (tmp_path / "nope.onnx",),
            "unknown-against": (tiny_npz, "--against", "torch,tensorflow"),
            "onnxruntime-on-npz": (tiny_npz, "--against", "onnxruntime"),
            "input-not-npy": (tiny_npz, "--input", tmp_path / "x.png")}[case]
    done = glcnn_main("bench", *args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("glcnn bench: error:"), done.stderr
    expected = {"missing-model": "nope.onnx", "unknown-against": "'tensorflow'",
                "onnxruntime-on-npz": "conv.npz", "input-not-npy": "x.png"}[case]
    assert expected in lines[0]


def test_missing_torch_is_named_with_its_install_command(monkeypatch):
    import importlib.util

    from glcnn.commands.bench_refs import check_against
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(glcnn.GlcnnError, match=r"pip install torch==2\.13\.0"):
        check_against(("torch",), "m.onnx")
