"""bench/bench_real.py's pure parts on made-up numbers: layer kinds, their aggregation into
GFLOP/s, the geometric mean and the markdown report. Nothing is timed or fetched here."""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_real as br  # noqa: E402


@pytest.mark.parametrize(("op", "w_shape", "group", "kind"), [
    ("Conv", (32, 1, 3, 3), 32, "depthwise conv"),
    ("Conv", (64, 1, 5, 5), 32, "depthwise conv"),  # channel multiplier 2, 5×5
    ("Conv", (64, 24, 1, 1), 1, "1×1 conv"),
    ("Conv", (12, 36, 3, 3), 1, "dense 3×3 conv"),
    ("Conv", (64, 64, 5, 5), 1, "other conv"),
    ("Conv", (32, 16, 3, 3), 2, "other conv"),  # grouped, not depthwise
    ("ConvTranspose", (64, 32, 4, 4), 1, "other conv"),
    ("Add", None, 1, "everything else"),
    ("Gemm", (1000, 1280), 1, "everything else"),
])
def test_kind_of(op, w_shape, group, kind):
    assert br.kind_of(op, w_shape, group) == kind


ROWS = [{"kind": "1×1 conv", "mflops": 30.0, "median_ms": 1.0},
        {"kind": "1×1 conv", "mflops": 10.0, "median_ms": 1.0},
        {"kind": "depthwise conv", "mflops": 2.0, "median_ms": 0.5},
        {"kind": "everything else", "mflops": 0.0, "median_ms": 0.25}]


def test_aggregate_kinds_sums_mflops_and_ms_per_kind_in_order():
    kinds = br.aggregate_kinds(ROWS)
    assert list(kinds) == ["depthwise conv", "1×1 conv", "everything else"]  # none: left out
    assert kinds["1×1 conv"] == {"layers": 2, "mflops": 40.0, "ms": 2.0, "gflops": 20.0}
    assert kinds["depthwise conv"]["gflops"] == 4.0
    assert kinds["everything else"]["gflops"] == 0.0


def test_geomean():
    assert br.geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert br.geomean([2.0, 8.0, 4.0]) == pytest.approx(4.0)
    assert math.isnan(br.geomean([]))


def _glcnn(ms: float, layers: list, load: bool = True) -> dict:
    g = {"readback": {"median_ms": ms}, "layers": layers}
    if load:
        g["load"] = {"cold": {"total_ms": 1234.0}, "warm": {"total_ms": 250.0}}
    return {"fp32": g}


def _layer(name: str, mflops: float, ms: float) -> dict:
    return {"layer": name, "op": "Conv", "mflops": mflops, "median_ms": ms}


RESULTS = {
    "mtcnn-rnet": {"mflops": 3.0, "against": {"onnxruntime": {"median_ms": 0.5}},
                   "glcnn": _glcnn(2.0, [_layer("a", 3.0, 1.0), _layer("b", 1.0, 0.5)]),
                   "kinds": {"a": "dense 3×3 conv", "b": "1×1 conv"},
                   "machine": {"rasterizer_threads": 0}},
    "mtcnn-onet": {"mflops": 26.0, "against": {"onnxruntime": {"median_ms": 1.0}},
                   "glcnn": _glcnn(8.0, [_layer("c", 26.0, 2.0)]),
                   "kinds": {"c": "dense 3×3 conv"}, "machine": {"rasterizer_threads": None}},
    "yolox": {"error": "GlcnnError: made up"},
    "esrgan-slim-x2": {"mflops": 7297.0, "glcnn": _glcnn(100.0, [_layer("d", 60.0, 1.0),
                                                                 _layer("?", 1.0, 1.0)]),
                       "kinds": {"d": "depthwise conv"}, "machine": {"rasterizer_threads": 3},
                       "tfjs": {"tfjs": "4.22.0", "node": "v20.0.0",
                                "wasm": {"median_ms": 250.0, "threads": 1, "simd": True}}},
}
INFO = {"date": "2026-01-01T00:00:00+00:00", "cpu": "CPU X", "cores": 2, "renderer": "llvmpipe",
        "gl_version": "4.5", "python": "3.11", "numpy": "2", "onnxruntime": "1.2",
        "glcnn": "0.1.0 (abc)", "load_average": "0.10 0.20 0.30", "load_average_end": "1.00"}


def test_layer_rows_take_each_models_kinds_and_skip_errors():
    rows = br.layer_rows(RESULTS)
    assert [(r["layer"], r["kind"]) for r in rows] == [
        ("a", "dense 3×3 conv"), ("b", "1×1 conv"), ("c", "dense 3×3 conv"),
        ("d", "depthwise conv"), ("?", "everything else")]


def test_markdown_report():
    text = br.markdown(INFO, RESULTS, ["fp32"], "python bench/bench_real.py", 12.0)
    assert "Command: `python bench/bench_real.py` (2026-01-01T00:00:00+00:00, 12 s)" in text
    assert "CPU X, 2 cores; llvmpipe (4.5)" in text and "0.10 0.20 0.30 at the start" in text
    assert "| MTCNN R-Net | 24×24 | 3 | 2.00 | calling thread | 0.50 | 4.00 | 1234 | 250 |" in text
    assert "| MTCNN O-Net | 48×48 | 26 | 8.00 | default | 1.00 | 8.00 | 1234 | 250 |" in text
    assert "| YOLOX (ddddocr det) | 416×416 | GlcnnError: made up |" in text
    # sqrt(4 · 8): the model in error is left out of the mean
    assert "glcnn / onnxruntime over 2 ONNX models: **5.66**" in text
    assert "| esrgan-slim ×2 | 128×128 | 7297 | 100 | 3 | 250 | 0.40 | 1234 | 250 |" in text
    assert "wasm backend: SIMD True, 1 thread(s)" in text
    assert "(ratio ≤ 0.5) on 1 of 1 TF.js models; geometric mean glcnn / TF.js wasm 0.40" in text
    assert "| depthwise conv | 1 | 60 | 1.0 | 60.0 |" in text
    assert "| dense 3×3 conv | 2 | 29 | 3.0 | 9.7 |" in text
    assert "| 1×1 conv | 1 | 1 | 0.5 | 2.0 |" in text
    assert "| everything else | 1 | 1 | 1.0 | 1.0 |" in text
    assert "other conv |" not in text  # no such layer


def test_tfjs_cpu_column_only_in_the_tfjs_table():
    results = {**RESULTS, "esrgan-slim-x2": {**RESULTS["esrgan-slim-x2"], "tfjs": {
        **RESULTS["esrgan-slim-x2"]["tfjs"], "cpu": {"median_ms": 17460.0}}}}
    onnx, _ = br.model_table(results, "onnx", ["fp32"], "onnxruntime")
    tfjs, ratios = br.model_table(results, "tfjs", ["fp32"], "wasm")
    assert "TF.js cpu" not in onnx and ratios == [0.4]
    assert ("| esrgan-slim ×2 | 128×128 | 7297 | 100 | 3 | 250 | 0.40 | 17460 | 1234 | 250 |"
            in tfjs)
