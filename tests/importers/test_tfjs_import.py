"""The TF.js layers-model importer against TF.js's own outputs (fp32).

Fixtures: tests/data/tfjs/<case>/, written by tools/tfjs_fixtures/make_fixtures.js with
TF.js 4.22.0 (cpu backend). The pretrained model tests fetch @upscalerjs/default-model and
TF.js from npm at test time (tests/tfjs_cases.py) and fail, never skip, without them.
"""

import json
import random

import numpy as np
import pytest
from PIL import Image
from tfjs_cases import (
    DATA,
    ROOT,
    case,
    copy_case,
    edit,
    mutate_json,
    relative_error,
    run_graph,
    tfjs_predict,
    to_glcnn,
    upscaler_package,
)

import glcnn
from glcnn.graph.passes import optimize
from glcnn.importers import IMPORTERS, tfjs
from glcnn.importers.tfjs_weights import read_weights
from glcnn.ops import build_ops

# max |glcnn − TF.js| / max |TF.js| allowed for whole models in fp32 (the bound).
# Measured on Mesa llvmpipe: ≤ 4.1e-7 on the fixtures, 6.9e-7 on the upscaler.
TOLERANCE = 1e-4

CASES = ["autoencoder", "dcgan", "mobilenet", "skips", "activations", "quantized"]


def load(name: str, **options):
    return tfjs.load(DATA / name / "model.json", **options)


def layer(doc: dict, name: str) -> dict:
    """The config of layer `name` in a model.json document."""
    topology = doc["modelTopology"].get("model_config", doc["modelTopology"])
    return next(entry for entry in topology["config"]["layers"]
                if entry["config"]["name"] == name)


def node(graph, name: str):
    return next(n for n in graph.nodes if n.name == name)


# --- TF.js's outputs --------------------------------------------------------------------------
@pytest.mark.parametrize("name", CASES)
def test_fixture_matches_tfjs(ctx, name):
    spec = case(name)
    with glcnn.load(spec["dir"] / "model.json", ctx=ctx) as pipe:
        ys = run_graph(pipe, spec["inputs"])
    assert set(ys) == set(spec["outputs"])
    for output, ref in spec["outputs"].items():
        err = relative_error(ys[output], ref)
        assert err <= TOLERANCE, f"{name}/{output}: relative error {err:.2e} > {TOLERANCE}"


def test_channels_first_batchnorm_matches_the_correct_answer_not_tfjs_cpu(ctx):
    """tfjs issue #1106: TF.js's cpu (and wasm) backends get channels_first BatchNorm wrong.

    The correct answer is the channels_last twin with the same weights (TF.js computes
    channels_last BatchNorm right), transposed to NCHW. glcnn matches it, and differs from
    what the TF.js cpu backend returns for the channels_first model.
    """
    first, last = case("dcgan_channels_first"), case("dcgan")
    correct = last["outputs"]["g4"].transpose(0, 3, 1, 2)
    assert np.array_equal(first["outputs"]["g4"], correct)
    with glcnn.load(first["dir"] / "model.json", ctx=ctx) as pipe:
        y = run_graph(pipe, first["inputs"])["g4"]
    with glcnn.load(last["dir"] / "model.json", ctx=ctx) as pipe:
        y_last = run_graph(pipe, last["inputs"])["g4"].transpose(0, 3, 1, 2)
    assert relative_error(y, correct) <= TOLERANCE
    assert relative_error(y, y_last) <= TOLERANCE
    tfjs_cpu = np.load(first["dir"] / "output_tfjs_cpu.npy")
    assert np.abs(tfjs_cpu - correct).max() > 0.5  # the recorded cpu output is the wrong one
    assert np.abs(y - tfjs_cpu).max() > 0.5


def test_pipeline_run_takes_and_returns_nhwc(ctx):
    """Pipeline.run on a channels_last model: (1, H, W, C) in, (1, H', W', C') out.

    Needs Pipeline.upload / _own_layout to transpose when meta["layout"] == "NHWC".
    """
    spec = case("autoencoder")
    with glcnn.load(spec["dir"] / "model.json", ctx=ctx) as pipe:
        y = pipe.run(spec["inputs"]["enc1_input"])
    assert y.shape == (1, 16, 20, 3)
    assert relative_error(y, spec["outputs"]["dec2"]) <= TOLERANCE


# --- how the graph is built -------------------------------------------------------------------
def test_meta_records_the_models_own_layout_and_shapes():
    graph = load("autoencoder")
    assert graph.inputs == {"enc1_input": (3, 15, 17)} and graph.outputs == ["dec2"]
    assert graph.meta == {"source": "tfjs", "layout": "NHWC",
                          "onnx_input_shapes": {"enc1_input": [1, 15, 17, 3]},
                          "onnx_output_shapes": {"dec2": [1, 16, 20, 3]}}
    first = load("dcgan_channels_first").meta
    assert first["layout"] == "NCHW" and first["onnx_input_shapes"] == {"g1_input": [1, 8, 1, 1]}
    assert load("skips").meta["onnx_output_shapes"] == {"up3": [1, 12, 18, 5], "probs": [1, 3]}


def test_same_padding_puts_the_odd_pad_at_the_bottom_right():
    graph = load("autoencoder")  # 15×17 input, k4 s2: total pad 3 → 1 before, 2 after
    assert node(graph, "enc1/linear").attrs["pads"] == [1, 1, 2, 2]
    assert node(graph, "dec1/linear").attrs["pads"] == [1, 1, 1, 1]  # k4 s2: crop (k − s)
    up3 = node(load("skips"), "up3")  # ConvTranspose k3 s2 "same": out = 2·in, crop 0 and 1
    assert (up3.attrs["pads"], up3.attrs["output_padding"]) == ([0, 0, 1, 1], [0, 0])


def test_separable_conv_is_a_depthwise_then_a_pointwise_conv():
    graph = load("mobilenet")
    depthwise, pointwise = node(graph, "sep1/depthwise"), node(graph, "sep1/linear")
    assert depthwise.attrs["group"] == 16 and depthwise.weights["W"].shape == (16, 1, 3, 3)
    assert pointwise.inputs == ["sep1/depthwise"] and pointwise.weights["W"].shape[2:] == (1, 1)
    assert node(graph, "dw2").attrs == {"min": 0.0, "max": 6.0}  # relu6 as Clip
    assert node(graph, "dw2/linear").weights["W"].shape == (32, 1, 3, 3)  # multiplier 2


def test_flatten_of_nhwc_permutes_the_dense_kernel_rows(tmp_path):
    """TF flattens (H, W, C), glcnn (C, H, W): the Dense rows move, the activations do not."""
    graph = load("skips")
    assert not [n.name for n in graph.nodes if n.name.endswith("/tf_order")]
    assert node(graph, "flat").op == "Flatten"
    kernel = manifest_weights(DATA / "skips" / "model.json")["fc1/kernel"]
    h, w, c = 6, 9, 6  # the ELU map that is flattened
    expected = kernel.reshape(h, w, c, -1).transpose(2, 0, 1, 3).reshape(h * w * c, -1)
    assert np.array_equal(node(graph, "fc1/linear").weights["B"], expected)


def rewrite_weights(path, weights: dict) -> None:
    """Replace the shards of `path` by one float32 shard holding `weights` in dict order."""
    doc = json.loads(path.read_text())
    for shard in path.parent.glob("*.bin"):
        shard.unlink()
    (path.parent / "all.bin").write_bytes(b"".join(w.astype("<f4").tobytes()
                                                   for w in weights.values()))
    doc["weightsManifest"] = [{"paths": ["all.bin"], "weights": [
        {"name": n, "shape": list(w.shape), "dtype": "float32"} for n, w in weights.items()]}]
    path.write_text(json.dumps(doc))


def manifest_weights(path) -> dict:
    return read_weights(path, json.loads(path.read_text())["weightsManifest"])


def test_weights_are_matched_by_name_not_position(tmp_path):
    path = copy_case("dcgan", tmp_path)
    weights = manifest_weights(path)
    names = list(weights)
    assert names.index("bn1/moving_mean") > names.index("g4/kernel")  # TF.js saves stats last
    rewrite_weights(path, {n: weights[n] for n in reversed(names)})
    original, shuffled = load("dcgan"), tfjs.load(path)
    for a, b in zip(original.nodes, shuffled.nodes):
        assert a.weights.keys() == b.weights.keys()
        assert all(np.array_equal(a.weights[k], b.weights[k]) for k in a.weights), a.name


def test_quantized_weights_decode_as_q_times_scale_plus_min():
    path = DATA / "quantized" / "model.json"
    group = json.loads(path.read_text())["weightsManifest"][0]
    entry = group["weights"][0]
    assert entry["name"] == "enc1/kernel" and entry["quantization"]["dtype"] == "uint8"
    raw = np.frombuffer((path.parent / group["paths"][0]).read_bytes(), np.uint8, 4 * 4 * 3 * 8)
    q = entry["quantization"]
    kernel = (raw * q["scale"] + q["min"]).astype(np.float32).reshape(4, 4, 3, 8)
    assert np.array_equal(node(load("quantized"), "enc1/linear").weights["W"],
                          kernel.transpose(3, 2, 0, 1))
    dtypes = {w["name"]: w.get("quantization", {}).get("dtype", w["dtype"])
              for w in group["weights"]}
    assert set(dtypes.values()) == {"uint8", "uint16", "float16", "float32"}


def test_input_size_fills_open_height_and_width(tmp_path):
    path = copy_case("autoencoder", tmp_path)
    edit(path, lambda doc: layer(doc, "enc1")["config"].update(
        batch_input_shape=[None, None, None, 3]))
    with pytest.raises(glcnn.UnsupportedOpError, match="input_size=.H, W."):
        tfjs.load(path)
    graph = tfjs.load(path, input_size=(15, 17))
    assert graph.inputs == {"enc1_input": (3, 15, 17)}
    assert node(graph, "enc1/linear").attrs["pads"] == [1, 1, 2, 2]


def test_json_suffix_is_registered():
    assert IMPORTERS[".json"] is tfjs.load
    assert glcnn.load_graph(DATA / "mobilenet" / "model.json").outputs == ["logits"]


# --- bad files ----------------------------------------------------------------------------------
@pytest.mark.parametrize("content, message", [
    ("not json {", "not a readable JSON model file"),
    ("[1, 2]", "no 'modelTopology'"),
    ('{"format": "graph-model", "modelTopology": {"node": []}}', "graph model"),
    ('{"modelTopology": {"class_name": "Bidirectional", "config": {}}}', "Sequential or"),
], ids=["not-json", "no-topology", "graph-model", "not-a-model-class"])
def test_unreadable_model_file_names_the_file(tmp_path, content, message):
    path = tmp_path / "broken.json"
    path.write_text(content)
    with pytest.raises(glcnn.ModelFileError, match=f"broken.json.*{message}"):
        tfjs.load(path)


def test_missing_shard_names_the_file(tmp_path):
    path = copy_case("autoencoder", tmp_path)
    (path.parent / "group1-shard1of1.bin").unlink()
    with pytest.raises(glcnn.ModelFileError, match="group1-shard1of1.bin cannot be read"):
        tfjs.load(path)


def test_short_shard_names_the_weight_and_both_sizes(tmp_path):
    path = copy_case("autoencoder", tmp_path)
    shard = path.parent / "group1-shard1of1.bin"
    shard.write_bytes(shard.read_bytes()[:-4])
    with pytest.raises(glcnn.ModelFileError,
                       match=r"weight 'dec2/bias' \[3\] needs bytes \d+\.\.\d+ .* hold \d+ bytes"):
        tfjs.load(path)


def test_weight_shape_mismatch_names_layer_weight_and_both_shapes(tmp_path):
    path = copy_case("autoencoder", tmp_path)
    edit(path, lambda doc: layer(doc, "enc2")["config"].update(filters=12))
    with pytest.raises(glcnn.WeightError, match=r"layer 'enc2' \(Conv2D\): weight 'enc2/kernel' "
                       r"has shape \[4, 4, 8, 16\] .* need \[4, 4, 8, 12\]"):
        tfjs.load(path)


def test_missing_weight_names_the_layer_and_its_weights(tmp_path):
    path = copy_case("autoencoder", tmp_path)
    edit(path, lambda doc: doc["weightsManifest"][0]["weights"][1].update(name="enc1/offset"))
    with pytest.raises(glcnn.WeightError, match=r"layer 'enc1' \(Conv2D\): weight 'enc1/bias' "
                       r"is not in .*\['enc1/kernel', 'enc1/offset'\]"):
        tfjs.load(path)


def test_every_unsupported_layer_and_activation_is_listed_at_once(tmp_path):
    path = copy_case("autoencoder", tmp_path)

    def change(doc):
        layers = doc["modelTopology"]["config"]["layers"]
        layer(doc, "dec1")["class_name"] = "LSTM"
        layer(doc, "enc2")["config"]["activation"] = "gelu"
        layers.insert(2, {"class_name": "Lambda", "config": {"name": "lam"}})
    edit(path, change)
    with pytest.raises(glcnn.UnsupportedOpError) as error:
        tfjs.load(path)
    for part in ("3 unsupported", "LSTM (layers: 'dec1')", "Lambda (layers: 'lam')",
                 "activation 'gelu' (layers: 'enc2')"):
        assert part in str(error.value)


@pytest.mark.parametrize("name, key, value, message", [
    ("autoencoder", "data_format", "channels_first", "data formats"),
    ("mobilenet", "dilation_rate", [2, 2], "ignores it while Keras applies it"),
], ids=["mixed-data-formats", "dilated-depthwise"])
def test_unsupported_settings_are_refused(tmp_path, name, key, value, message):
    path = copy_case(name, tmp_path)
    target = {"autoencoder": "dec2", "mobilenet": "dw1"}[name]
    edit(path, lambda doc: layer(doc, target)["config"].update({key: value}))
    with pytest.raises((glcnn.UnsupportedOpError, glcnn.WeightError), match=message):
        tfjs.load(path)


def test_prelu_alpha_varying_over_width_is_refused(tmp_path):
    path = copy_case("skips", tmp_path)
    edit(path, lambda doc: layer(doc, "prelu")["config"].update(shared_axes=[1]))
    weights = manifest_weights(path)
    weights["prelu/alpha"] = np.ones((1, 9, 6), np.float32)  # per column: (H, W, C) = (6, 9, 6)
    rewrite_weights(path, weights)
    with pytest.raises(glcnn.UnsupportedOpError, match=r"alpha of shape \[1, 9, 6\] varies"):
        tfjs.load(path)


def test_affine_quantization_without_min_is_refused(tmp_path):
    path = copy_case("quantized", tmp_path)
    edit(path, lambda doc: doc["weightsManifest"][0]["weights"][0]["quantization"].pop("min"))
    with pytest.raises(glcnn.WeightError, match="'enc1/kernel' is uint8-quantized without"):
        tfjs.load(path)


@pytest.mark.parametrize("name", CASES)
def test_hostile_model_json_raises_only_glcnn_errors(tmp_path, name):
    """Seeded random values (wrong types, huge sizes, deletions) anywhere in model.json: a
    Graph or a GlcnnError, never another exception."""
    path = copy_case(name, tmp_path)
    original = json.loads(path.read_text())
    for seed in range(40):
        doc = json.loads(json.dumps(original))
        changes = mutate_json(doc, random.Random(seed))
        path.write_text(json.dumps(doc))
        try:
            build_ops(optimize(tfjs.load(path)))
        except glcnn.GlcnnError:
            pass
        except Exception as exc:  # the test: this never happens
            pytest.fail(f"{name} seed {seed} {changes}: {type(exc).__name__}: {exc}")


# --- a real pretrained model from npm --------------------------------------------------------
@pytest.fixture(scope="module")
def upscaler():
    """The @upscalerjs/default-model package (RDN ×2 super-resolution), fetched from npm."""
    return upscaler_package()


def psnr(y, ref) -> float:
    error = np.clip(np.asarray(y, np.float64), 0, 255) - ref
    return float(10 * np.log10(255.0 ** 2 / np.mean(error ** 2)))


def test_upscalerjs_default_model_matches_tfjs_and_beats_bilinear(ctx, upscaler, tmp_path):
    """The repo's 128×96 photo, downscaled 2× (bicubic), upscaled back: glcnn equals TF.js
    and is closer to the original than bilinear upscaling (measured 27.10 vs 26.59 dB)."""
    model = upscaler / "models" / "model.json"
    graph = tfjs.load(model, input_size=(48, 64))
    assert {n.op for n in graph.nodes} == {"Conv", "Relu", "Concat", "Add", "Resize"}
    photo = Image.open(ROOT / "demos" / "data" / "coffee_128.png").convert("RGB")
    small = photo.resize((64, 48), Image.BICUBIC)
    x = np.asarray(small, np.float32)[None]  # NHWC in [0, 255], as the package documents
    with glcnn.Pipeline(optimize(graph), ctx) as pipe:
        y = run_graph(pipe, {"LR": x})["SR"]
    assert relative_error(y, tfjs_predict(model.parent, x, tmp_path)) <= TOLERANCE
    original = np.asarray(photo, np.float64)[None]
    bilinear = np.asarray(small.resize(photo.size, Image.BILINEAR), np.float64)[None]
    ours, theirs = psnr(y, original), psnr(bilinear, original)
    assert ours > theirs + 0.25, f"PSNR {ours:.2f} dB vs bilinear {theirs:.2f} dB"


def test_upscalerjs_default_model_reproduces_the_packages_sample(ctx, upscaler):
    """The package ships an input (assets/fixture.png) and its ×2 result: glcnn, run on a
    64×64 crop, gives the same 8-bit pixels (±1) away from the crop's borders."""
    image = Image.open(upscaler / "assets" / "fixture.png").convert("RGB")
    result = Image.open(upscaler / "assets" / "samples" / "2x" / "result.png").convert("RGB")
    crop = np.asarray(image, np.float32)[32:96, 32:96]
    graph = tfjs.load(upscaler / "models" / "model.json", input_size=(64, 64))
    with glcnn.Pipeline(optimize(graph), ctx) as pipe:
        y = pipe.run(to_glcnn(crop[None], "NHWC")).transpose(1, 2, 0)
    margin = 24  # > the receptive field's reach of about 20 output pixels
    ours = np.clip(np.round(y), 0, 255)[margin:-margin, margin:-margin]
    theirs = np.asarray(result, np.float64)[64 + margin:192 - margin, 64 + margin:192 - margin]
    assert np.abs(ours - theirs).max() <= 1
