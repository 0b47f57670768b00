"""`glcnn diff`: correct models are within tolerance at every layer; a weight corrupted on the
GPU in one layer is named as the first divergence; the CLI's table, exit codes and images."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_all_close
from onnx import helper
from onnx_models import make_model, rand
from PIL import Image

import glcnn
from glcnn import cli
from glcnn.commands.diff import (
    TOLERANCE,
    NothingComparedError,
    compare,
    compare_all,
    diff,
    diff_pipeline,
    format_table,
)
from glcnn.commands.diff_png import GAP, HEADER, mosaic, normalise, write_pngs
from glcnn.commands.diff_refs import onnx_counterparts, onnxruntime_outputs
from glcnn.graph import Graph, Node, models, reference
from glcnn.graph.passes import optimize
from glcnn.viewer.bending import write_changed

ROOT = Path(__file__).resolve().parents[2]
AUTOENCODER = ROOT / "weights/autoencoder.npz"
COFFEE = ROOT / "demos/data/coffee_128.png"
# The ONNX model's glcnn layers after optimize, in order, with their fused parts.
ONNX_LAYERS = [("x", "Input"), ("enc_relu", "Conv+Relu"), ("pool", "MaxPool"),
               ("mid_relu", "Conv+Add+Relu"), ("head", "Conv+Sigmoid"),
               ("gap", "GlobalAveragePool"), ("logits", "Gemm")]


def residual_onnx():
    """Conv → Relu → MaxPool → Conv → BN → Add(pool) → Relu → Conv → Sigmoid → GAP →
    Flatten → Gemm (1, 5); tensor names with "::" as PyTorch exports write them."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "W1", "B1"], ["enc::conv"], pads=[1, 1, 1, 1]),
        n("Relu", ["enc::conv"], ["enc::relu"]),
        n("MaxPool", ["enc::relu"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["pool", "W2"], ["mid::conv"], pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["mid::conv", "scale", "bias", "mean", "var"], ["mid::bn"]),
        n("Add", ["mid::bn", "pool"], ["mid::add"]),
        n("Relu", ["mid::add"], ["mid::relu"]),
        n("Conv", ["mid::relu", "W3", "B3"], ["head::conv"]),
        n("Sigmoid", ["head::conv"], ["head"]),
        n("GlobalAveragePool", ["head"], ["gap"]),
        n("Flatten", ["gap"], ["flat"]),
        n("Gemm", ["flat", "fc_W", "fc_B"], ["logits"], transB=1),
    ]
    weights = {"W1": rand(6, 3, 3, 3), "B1": rand(6, seed=1), "W2": rand(6, 6, 3, 3, seed=2),
               "scale": rand(6, seed=3) + 1, "bias": rand(6, seed=4), "mean": rand(6, seed=5),
               "var": np.abs(rand(6, seed=6)) + 0.5, "W3": rand(5, 6, 1, 1, seed=7),
               "B3": rand(5, seed=8), "fc_W": rand(5, 5, seed=9), "fc_B": rand(5, seed=10)}
    return make_model(nodes, {"x": [1, 3, 10, 12]}, {"logits": [1, 5]}, weights)


@pytest.fixture(scope="module")
def onnx_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("onnx") / "residual.onnx"
    path.write_bytes(residual_onnx().SerializeToString())
    return path


@pytest.fixture(scope="module")
def ae_file(tmp_path_factory):
    """The autoencoder architecture, small, with seeded weights."""
    path = tmp_path_factory.mktemp("ae") / "ae.npz"
    glcnn.save(models.autoencoder(size=(16, 24)), path)
    return path


def x_onnx():
    return np.random.default_rng(0).standard_normal((1, 3, 10, 12)).astype(np.float32)


def x_ae():
    return np.random.default_rng(1).random((3, 16, 24), np.float32)


def corrupt(pipe, layer: str) -> None:
    """Add 0.5 to the weights in one texel row of `layer`'s filter texture, on the GPU only
    (the graph's numpy weights, which the reference reads, stay as they were)."""
    op = next(p.op for p in pipe.passes if p.op.node.name == layer)
    old = op.all_textures()["u_weights"]
    row = int(np.argwhere(np.any(old != 0, axis=(1, 2)))[0, 0])
    new = old.copy()
    new[row] = np.where(old[row] != 0, old[row] + 0.5, 0)
    assert write_changed(pipe.weight_texture(layer), old, new) > 0


def assert_all_within(report, precision):
    rows, first = report
    assert first is None, format_table(report, precision)
    assert all(r.compared and r.max_rel <= TOLERANCE[precision] for r in rows)
    assert all(r.nonfinite == 0 for r in rows)


# --- correct models: every layer within tolerance ------------------------------------------
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_shipped_autoencoder_within_tolerance(ctx, precision):
    graph = glcnn.load_graph(AUTOENCODER)
    x = cli.read_input(COFFEE, graph.inputs["image"], (0, 1))
    report = diff(AUTOENCODER, x, against="numpy", precision=precision, ctx=ctx)
    assert_all_within(report, precision)
    assert [r.layer for r in report.rows] == ["image", "enc1", "enc2", "dec1", "dec2"]
    assert format_table(report, precision).endswith(
        f"all 4 layers within tolerance ({precision}: {TOLERANCE[precision]:g})")


@pytest.mark.parametrize("against", ["numpy", "onnxruntime"])
def test_onnx_model_within_tolerance(ctx, onnx_file, against):
    report = diff(onnx_file, x_onnx(), against=against, ctx=ctx)
    assert_all_within(report, "fp32")
    assert [(r.layer, r.op) for r in report.rows] == ONNX_LAYERS
    assert report.rows[-1].shape == (5, 1, 1)  # ONNX (1, 5) compared as glcnn's (5, 1, 1)


def test_onnx_names_map_with_double_colons(onnx_file):
    graph = optimize(glcnn.load_graph(onnx_file))
    names = onnx_counterparts(residual_onnx(), graph)
    assert names == {"enc_relu": "enc::relu", "pool": "pool", "mid_relu": "mid::relu",
                     "head": "head", "gap": "gap", "logits": "logits"}


def test_ambiguous_onnx_names_have_no_counterpart():
    n = helper.make_node
    model = make_model([n("Relu", ["x"], ["a::b"]), n("Sigmoid", ["a::b"], ["a_b"]),
                        n("Tanh", ["a_b"], ["y"])], {"x": [1, 2, 3, 3]}, {"y": [1, 2, 3, 3]})
    graph = glcnn.importers.onnx.OnnxImport(model, "m.onnx").run()
    assert onnx_counterparts(model, graph) == {"y": "y"}


def test_u8_calibrates_on_the_input_when_the_model_has_no_ranges(ctx, ae_file):
    assert "u8_ranges" not in glcnn.load_graph(ae_file).meta
    assert_all_within(diff(ae_file, x_ae(), "numpy", "u8", ctx=ctx), "u8")


# --- a corrupted layer is named ---------------------------------------------------------------
@pytest.mark.parametrize("precision,layer", [("fp32", "enc2"), ("fp16", "dec1")])
def test_corrupted_middle_layer_is_first_divergence(ctx, precision, layer):
    graph = models.autoencoder(size=(16, 24))
    weights = {k: v.copy() for k, v in graph.node(layer).weights.items()}
    with glcnn.Pipeline(graph, ctx, precision, keep="all") as pipe:
        corrupt(pipe, layer)
        rows, first = diff_pipeline(pipe, x_ae(), "numpy")
    assert first == layer
    names = [r.layer for r in rows]
    assert all(not r.exceeds for r in rows[:names.index(layer)])
    assert rows[names.index(layer)].max_rel > 10 * TOLERANCE[precision]
    for k, v in weights.items():  # the reference's source is untouched
        np.testing.assert_array_equal(graph.node(layer).weights[k], v)


def test_corrupted_onnx_layer_against_onnxruntime(ctx, onnx_file):
    with glcnn.Pipeline(optimize(glcnn.load_graph(onnx_file)), ctx, keep="all") as pipe:
        corrupt(pipe, "mid_relu")
        report = diff_pipeline(pipe, x_onnx(), "onnxruntime", onnx_file)
    assert report.first_divergence == "mid_relu"
    assert [r.exceeds for r in report.rows[:3]] == [False] * 3
    assert "first divergence: layer mid_relu (Conv+Add+Relu): scaled error" in \
        format_table(report, "fp32")


# --- GL-free parts ---------------------------------------------------------------------------
def test_compare_counts_nonfinite_and_flags_them():
    y = np.array([[[1.0, np.nan], [np.inf, 2.0]]])
    row = compare("l", "Conv", y, np.ones((1, 2, 2)), 1e-5)
    assert row.nonfinite == 2 and row.max_rel == np.inf and row.exceeds
    assert (row.lo, row.hi) == (1.0, 2.0)
    same_nan = compare("l", "Conv", y, y, 1e-5)
    assert same_nan.max_abs == 0 and not same_nan.exceeds


def test_verdict_counts_nonfinite_values():
    y = np.array([[[1.0, np.nan], [np.inf, 2.0]]])
    report = compare_all([("l", "Conv")], {"l": y}, {"l": np.ones((1, 2, 2))}, 1e-5)
    assert format_table(report, "fp32").endswith(
        "first divergence: layer l (Conv): scaled error inf > 1e-05 (2 NaN/Inf values)")


def test_compare_scales_by_reference_magnitude():
    ref = np.full((2, 1, 1), 100.0)
    row = compare("l", "Conv", ref + 0.5, ref, 1e-5)
    assert row.max_abs == 0.5 and row.max_rel == pytest.approx(0.005)


def test_compare_all_names_only_the_first_and_skips_missing_references():
    ones = np.ones((1, 2, 2))
    outputs = {"a": ones, "b": ones + 1, "c": ones + 2, "d": ones}
    refs = {"a": ones, "b": ones, "c": ones}
    order = [("a", "Input"), ("b", "Conv"), ("c", "Relu"), ("d", "Conv")]
    report = compare_all(order, outputs, refs, 1e-5)
    assert report.first_divergence == "b"
    assert [r.exceeds for r in report.rows] == [False, True, True, False]
    assert not report.rows[-1].compared
    assert "first divergence: layer b (Conv): scaled error 1 > 1e-05" in \
        format_table(report, "fp32")


def test_compare_all_without_any_reference_fails():
    """Only the input row has a reference: nothing was compared, which must not pass."""
    ones = np.ones((1, 2, 2))
    order = [("x", "Input")] + [(f"l{i}", "Conv") for i in range(7)]
    outputs = {name: ones for name, _ in order}
    with pytest.raises(NothingComparedError, match=r"nothing compared: none of the 7 layers "
                       r"\(l0, l1, l2, l3, l4, \.\.\. \(2 more\)\) has a reference"):
        compare_all(order, outputs, {"x": ones}, 1e-5)


def test_png_without_compared_layers_fails(tmp_path):
    ones = np.ones((1, 2, 2))
    rows = [compare("x", "Input", ones, ones, 1e-5), compare("l", "Conv", ones, None, 1e-5)]
    with pytest.raises(NothingComparedError, match="no images written"):
        write_pngs(tmp_path, rows, {"x": ones, "l": ones}, {"x": ones})


def test_assert_all_close_fails_on_nothing_to_compare():
    with pytest.raises(AssertionError, match="nothing compared"):
        assert_all_close({"a": np.ones(2)}, {}, "fp32", "empty")
    with pytest.raises(AssertionError, match=r"no tensor \['b'\]"):
        assert_all_close({"a": np.ones(2)}, {"b": np.ones(2)}, "fp32", "disjoint")
    assert assert_all_close({"a": np.ones(2)}, {"a": np.ones(2)}, "fp32", "same") == 0


def test_shape_mismatch_names_the_layer():
    with pytest.raises(glcnn.GlcnnError, match="layer 'l'.*(1, 2, 2).*(2, 2, 1)"):
        compare("l", "Conv", np.ones((1, 2, 2)), np.ones((2, 2, 1)), 1e-5)


def test_missing_onnxruntime_is_a_clear_error(monkeypatch, onnx_file):
    from glcnn.commands.diff_refs import default_against
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    assert default_against(onnx_file) == "numpy"
    graph = optimize(glcnn.load_graph(onnx_file))
    with pytest.raises(glcnn.GlcnnError, match="needs the onnxruntime package"):
        onnxruntime_outputs(onnx_file, graph, {"x": x_onnx()[0]})


# --- per-layer .npy files (TF.js outputs) ---------------------------------------------------
def nhwc_model(path):
    """conv (Conv+Relu) → pool → gap (a vector), marked channels-last like a TF.js model."""
    nodes = [Node("Conv", "conv", ["input"], {"pads": [1, 1, 1, 1], "activation": {"op": "Relu"}},
                  {"W": rand(5, 3, 3, 3), "B": rand(5, seed=1)}),
             Node("MaxPool", "pool", ["conv"], {"kernel_shape": [2, 2], "strides": [2, 2]}),
             Node("GlobalAveragePool", "gap", ["pool"])]
    graph = Graph({"input": (3, 6, 8)}, nodes, ["gap"], {"layout": "NHWC"})
    glcnn.save(graph, path)
    return graph


def test_tfjs_outputs_channels_last(ctx, tmp_path):
    graph = nhwc_model(tmp_path / "m.npz")
    x = np.random.default_rng(2).standard_normal((3, 6, 8)).astype(np.float32)
    ref = reference.run(graph, {"input": x})
    np.save(tmp_path / "conv.npy", ref["conv"].transpose(1, 2, 0)[None])  # (1, H, W, C)
    np.save(tmp_path / "pool.npy", ref["pool"].transpose(1, 2, 0))  # (H, W, C)
    rows, first = diff(tmp_path / "m.npz", x, "tfjs-outputs", ctx=ctx, tfjs_dir=tmp_path)
    assert first is None
    assert [(r.layer, r.compared) for r in rows] == [
        ("input", True), ("conv", True), ("pool", True), ("gap", False)]
    np.save(tmp_path / "pool.npy", ref["pool"])  # channels-first: wrong for an NHWC model
    with pytest.raises(glcnn.GlcnnError, match="pool.npy has shape"):
        diff(tmp_path / "m.npz", x, "tfjs-outputs", ctx=ctx, tfjs_dir=tmp_path)


def test_tfjs_folder_matching_no_layer_fails(ctx, tmp_path):
    graph = nhwc_model(tmp_path / "m.npz")
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    x = np.zeros(graph.inputs["input"], np.float32)
    for held in ([], ["conv2d_1.npy", "max_pooling2d.npy"]):
        for name in held:
            np.save(outputs / name, np.zeros((6, 8, 5)))
        with pytest.raises(NothingComparedError) as raised:
            diff(tmp_path / "m.npz", x, "tfjs-outputs", ctx=ctx, tfjs_dir=outputs)
        message = str(raised.value)
        assert message.startswith(f"nothing compared: no file in {outputs} matches a layer")
        assert "looked for conv.npy, pool.npy, gap.npy;" in message
        assert message.endswith(f"holds {len(held)} .npy files"
                                + (" (conv2d_1.npy, max_pooling2d.npy)" if held else ""))


@pytest.mark.parametrize("case", ["pipeline", "graph"])
def test_diff_of_a_pipeline_or_graph_says_what_it_takes(ctx, case):
    graph = models.autoencoder(size=(16, 24))
    with glcnn.Pipeline(graph, ctx, keep="all") as pipe:
        model, message = {"pipeline": (pipe, "for a compiled Pipeline .*"
                                            "glcnn.commands.diff.diff_pipeline"),
                          "graph": (graph, "a model file \\(str or path\\), not Graph")}[case]
        with pytest.raises(glcnn.GlcnnError, match=message):
            diff(model, x_ae(), "numpy")


def test_diff_pipeline_of_a_path_says_what_it_takes(ae_file):
    with pytest.raises(glcnn.GlcnnError, match="takes a compiled Pipeline, not PosixPath"):
        diff_pipeline(ae_file, x_ae())


# --- images -------------------------------------------------------------------------------------
def test_png_three_panels_per_layer(ctx, tmp_path):
    graph = models.autoencoder(size=(16, 24))
    with glcnn.Pipeline(graph, ctx, keep="all") as pipe:
        corrupt(pipe, "enc2")
        rows, _ = diff_pipeline(pipe, x_ae(), "numpy", png_dir=tmp_path)
    ref = reference.run(graph, {"image": x_ae()})
    pngs = sorted(tmp_path.glob("*.png"))
    assert [p.name for p in pngs] == ["01_enc1.png", "02_enc2.png", "03_dec1.png",
                                      "04_dec2.png"]
    for path, row in zip(pngs, rows[1:]):
        panel = mosaic(normalise(ref[row.layer])[0])
        ph, pw = panel.shape[:2]
        image = np.asarray(Image.open(path).convert("RGB"))
        assert image.shape == (ph + HEADER, 3 * pw + 2 * GAP, 3), path.name
        middle = image[HEADER:, pw + GAP:2 * pw + GAP]
        np.testing.assert_array_equal(middle, panel, err_msg=path.name)
    index = (tmp_path / "index.tsv").read_text().splitlines()
    diff_max = {line.split("\t")[1]: float(line.split("\t")[-1]) for line in index[1:]}
    assert diff_max["enc1"] < 1e-5 < diff_max["enc2"]


# --- the command ---------------------------------------------------------------------------------
def glcnn_cli(*args):
    exe = shutil.which("glcnn", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "glcnn.cli"]
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True)


def test_cli_all_within_tolerance_exits_0(ae_file, tmp_path):
    np.save(tmp_path / "x.npy", x_ae()[None])
    done = glcnn_cli("diff", ae_file, tmp_path / "x.npy", "--against", "numpy")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].split()[:4] == ["layer", "op", "shape", "max"]
    assert [line.split()[0] for line in lines[2:7]] == ["image", "enc1", "enc2", "dec1", "dec2"]
    assert lines[-1] == "all 4 layers within tolerance (fp32: 1e-05)"


def test_cli_divergence_exits_1_and_writes_pngs(ae_file, tmp_path):
    """Per-layer files as a TF.js dump would give them; enc2's is wrong."""
    graph = glcnn.load_graph(ae_file)
    ref = reference.run(graph, {"image": x_ae()})
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    np.save(outputs / "enc1.npy", ref["enc1"])
    np.save(outputs / "enc2.npy", ref["enc2"] * 1.1)
    np.save(tmp_path / "x.npy", x_ae())
    done = glcnn_cli("diff", ae_file, tmp_path / "x.npy", "--against", "tfjs-outputs",
                     outputs, "--png", tmp_path / "png")
    assert done.returncode == 1, done.stderr
    assert "first divergence: layer enc2 (Conv+Relu): scaled error" in done.stdout
    assert sorted(p.name for p in (tmp_path / "png").glob("*.png")) == \
        ["01_enc1.png", "02_enc2.png"]


def test_cli_nothing_compared_exits_1_naming_the_expected_files(ae_file, tmp_path):
    """A folder where no file matches a layer used to print "all 0 layers within tolerance"
    and exit 0."""
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    np.save(outputs / "conv2d.npy", np.zeros((64, 8, 12)))
    np.save(tmp_path / "x.npy", x_ae())
    done = glcnn_cli("diff", ae_file, tmp_path / "x.npy", "--against", "tfjs-outputs", outputs)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"glcnn diff: error: nothing compared: no file in {outputs} matches a layer of the "
        "model; looked for enc1.npy, enc2.npy, dec1.npy, dec2.npy; the folder holds 1 .npy "
        "files (conv2d.npy)"]
    assert "within tolerance" not in done.stdout


@pytest.mark.parametrize("args,message", [
    (["--against", "torch"], "--against takes onnxruntime, numpy or tfjs-outputs DIR"),
    (["--against", "tfjs-outputs"], "--against takes"),
    (["--against", "tfjs-outputs", "/nonexistent"], "needs a folder of per-layer .npy"),
    (["--against", "onnxruntime"], "needs an .onnx model"),
])
def test_cli_errors_exit_2(capsys, ae_file, args, message):
    assert cli.main(["diff", str(ae_file), "x.npy", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("glcnn diff: error: ") and message in err
    assert len(err.strip().splitlines()) == 1


def test_cli_missing_model_exits_2(capsys, tmp_path):
    assert cli.main(["diff", str(tmp_path / "none.onnx"), "x.npy", "--against", "numpy"]) == 2
    assert "no such model file" in capsys.readouterr().err
