"""Custom TF.js layer classes: glcnn.importers.tfjs.register_layer (glcnn/importers/tfjs_custom.py).

The model, written here as model.json + one shard: Input (5, 7, 3) NHWC -> Conv2D 12 (3×3
"same", bias) -> PixelShuffle2x (tf.depthToSpace, block 2, config empty) -> ChannelScale (a
weight "scale/gamma" per channel) -> MultiplyBeta (beta from its config). Its output is
compared with TF.js itself (node, the pinned npm package of tools/tfjs_fixtures, the three
classes registered with tf.serialization.registerClass) and with a float64 numpy reference
written in NHWC from TF's definitions. The README's example is run and checked by
tests/test_readme.py.
"""

import json
import os
import subprocess

import numpy as np
import pytest
from tfjs_cases import TOOLS, relative_error, tfjs_node_modules

import glcnn
from glcnn.importers import tfjs, tfjs_layers
from glcnn.importers.tfjs import Tensor

TOLERANCE = 1e-4  # max |glcnn − reference| / max |reference|, fp32, as test_tfjs_import.py
SIZE, CHANNELS, BETA = (5, 7), 3, 0.5


# --- the builders ------------------------------------------------------------------------------
def pixel_shuffle_2x(imp, call):
    """TF.js's depthToSpace(x, 2, "NHWC"): y[2h + i, 2w + j, c] = x[h, w, (2i + j)·C' + c],
    glcnn's DCR."""
    x = imp.act(call)
    return Tensor(imp.emit(call, "DepthToSpace", [x.name], {"blocksize": 2, "mode": "DCR"}), 4)


def channel_scale(imp, call):
    x = imp.act(call)
    gamma = imp.weight(call, "gamma", (imp.shape(x)[0],))
    return Tensor(imp.emit(call, "Mul", [x.name], weights={"B": gamma}), x.rank)


def multiply_beta(imp, call):
    x = imp.act(call)
    return Tensor(imp.emit(call, "Mul", [x.name], weights={"B": [call.config["beta"]]}), x.rank)


BUILDERS = {"PixelShuffle2x": (pixel_shuffle_2x, ("DepthToSpace",)),
            "ChannelScale": (channel_scale, ("Mul",)), "MultiplyBeta": (multiply_beta, ("Mul",))}


@pytest.fixture
def registered():
    """The three classes registered for one test."""
    for cls, (build, emits) in BUILDERS.items():
        tfjs.register_layer(cls, build, emits=emits)
    yield
    for cls in BUILDERS:
        tfjs.unregister_layer(cls)


# --- the model -----------------------------------------------------------------------------------
def model_weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {"conv/kernel": rng.standard_normal((3, 3, CHANNELS, 4 * CHANNELS), np.float32),
            "conv/bias": rng.standard_normal(4 * CHANNELS, np.float32),
            "scale/gamma": rng.standard_normal(CHANNELS, np.float32)}


def write_model(folder, classes=("PixelShuffle2x", "ChannelScale", "MultiplyBeta")):
    """model.json + shard in `folder` (a Sequential: conv, then a layer per class); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    layers = [{"class_name": "Conv2D", "config": {
        "name": "conv", "filters": 4 * CHANNELS, "kernel_size": [3, 3], "padding": "same",
        "activation": "linear", "batch_input_shape": [None, *SIZE, CHANNELS]}}]
    names = {"PixelShuffle2x": "shuffle", "ChannelScale": "scale", "MultiplyBeta": "beta"}
    for cls in classes:
        name = names.get(cls, cls.lower())
        config = {"name": name, "beta": BETA} if cls == "MultiplyBeta" else {"name": name}
        layers.append({"class_name": cls, "config": config})
    weights = model_weights()
    (folder / "group1-shard1of1.bin").write_bytes(b"".join(w.tobytes() for w in weights.values()))
    specs = [{"name": k, "shape": list(w.shape), "dtype": "float32"} for k, w in weights.items()]
    doc = {"format": "layers-model", "modelTopology": {"class_name": "Sequential", "config": {
        "name": "custom", "layers": layers}}, "weightsManifest": [
        {"paths": ["group1-shard1of1.bin"], "weights": specs}]}
    (folder / "model.json").write_text(json.dumps(doc))
    return folder / "model.json"


def conv_same(x, kernel, bias):
    """TF's Conv2D, 3×3, stride 1, "same", on (H, W, Ci) with an HWIO kernel, float64."""
    h, w, _ = x.shape
    padded = np.pad(x, ((1, 1), (1, 1), (0, 0)))
    return sum(padded[i:i + h, j:j + w] @ kernel[i, j] for i in range(3) for j in range(3)) + bias


def depth_to_space(x, b):
    """TF's depthToSpace on (H, W, C): y[h·b + i, w·b + j, c] = x[h, w, (i·b + j)·C' + c]."""
    h, w, c = x.shape
    return x.reshape(h, w, b, b, c // b ** 2).transpose(0, 2, 1, 3, 4).reshape(h * b, w * b, -1)


def numpy_reference(x: np.ndarray) -> np.ndarray:
    """The model on NHWC `x` (batch 1) in float64."""
    w = {k: v.astype(np.float64) for k, v in model_weights().items()}
    y = depth_to_space(conv_same(x[0].astype(np.float64), w["conv/kernel"], w["conv/bias"]), 2)
    return (y * w["scale/gamma"] * BETA)[None]


# The same classes in TF.js, registered as a TF.js user would; argv: tfjs_files.js, model
# folder, input .npy, output .npy.
TFJS_SCRIPT = r"""
const tf = require('@tensorflow/tfjs');
const [files, dir, input, output] = process.argv.slice(2);
const {readNpy, writeTensor, loadModelDir} = require(files);
const first = (inputs) => (Array.isArray(inputs) ? inputs[0] : inputs);

class PixelShuffle2x extends tf.layers.Layer {
  computeOutputShape(s) { return [s[0], s[1] * 2, s[2] * 2, s[3] / 4]; }
  call(inputs) { return tf.depthToSpace(first(inputs), 2, 'NHWC'); }
}
PixelShuffle2x.className = 'PixelShuffle2x';

class ChannelScale extends tf.layers.Layer {
  build(s) {
    this.gamma = this.addWeight('gamma', [s[s.length - 1]], 'float32', tf.initializers.ones());
    this.built = true;
  }
  call(inputs) { return tf.mul(first(inputs), this.gamma.read()); }
}
ChannelScale.className = 'ChannelScale';

class MultiplyBeta extends tf.layers.Layer {
  constructor(config) { super(config); this.beta = config.beta; }
  call(inputs) { return tf.mul(first(inputs), this.beta); }
  getConfig() { return {...super.getConfig(), beta: this.beta}; }
}
MultiplyBeta.className = 'MultiplyBeta';

async function main() {
  [PixelShuffle2x, ChannelScale, MultiplyBeta].forEach((c) => tf.serialization.registerClass(c));
  await tf.setBackend('cpu');
  const model = await loadModelDir(dir);
  await writeTensor(output, model.predict(readNpy(input)));
}
main().catch((err) => { console.error(err.stack || err); process.exit(1); });
"""


def tfjs_reference(model: str, x: np.ndarray, tmp_path) -> np.ndarray:
    """TF.js's (cpu backend) output of the model folder for NHWC `x`."""
    script, src, dst = tmp_path / "custom.js", tmp_path / "x.npy", tmp_path / "y.npy"
    script.write_text(TFJS_SCRIPT)
    np.save(src, x)
    env = {**os.environ, "NODE_PATH": str(tfjs_node_modules())}
    done = subprocess.run(["node", str(script), str(TOOLS / "tfjs_files.js"), str(model),
                           str(src), str(dst)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"TF.js failed:\n{done.stderr[-2000:]}"
    return np.load(dst)


def input_image() -> np.ndarray:
    return np.random.default_rng(3).random((1, *SIZE, CHANNELS), np.float32)


# --- outputs -------------------------------------------------------------------------------------
@pytest.mark.usefixtures("registered")
def test_custom_classes_match_tfjs_and_the_numpy_reference(ctx, tmp_path):
    path, x = write_model(tmp_path / "model"), input_image()
    with glcnn.load(path, ctx=ctx) as pipe:
        y = pipe.run(x)
    ref = tfjs_reference(path.parent, x, tmp_path)
    assert ref.shape == y.shape == (1, 2 * SIZE[0], 2 * SIZE[1], CHANNELS)
    for name, want in {"TF.js": ref, "numpy": numpy_reference(x)}.items():
        err = relative_error(y, want)
        assert err <= TOLERANCE, f"against {name}: relative error {err:.2e} > {TOLERANCE}"


@pytest.mark.usefixtures("registered")
def test_builders_emit_their_nodes_named_after_the_layers(tmp_path):
    graph = tfjs.load(write_model(tmp_path / "model"))
    assert [(n.op, n.name) for n in graph.nodes] == [
        ("Conv", "conv"), ("DepthToSpace", "shuffle"), ("Mul", "scale"), ("Mul", "beta")]
    np.testing.assert_array_equal(graph.node("scale").weights["B"], model_weights()["scale/gamma"])
    assert graph.meta["onnx_output_shapes"] == {"beta": [1, 10, 14, 3]}


# --- the one error ------------------------------------------------------------------------------
def test_every_unregistered_class_is_listed_at_once_with_the_hook(tmp_path):
    path = write_model(tmp_path / "model", ("PixelShuffle2x", "ChannelScale", "MultiplyBeta",
                                            "PixelShuffle2x"))
    doc = json.loads(path.read_text())
    doc["modelTopology"]["config"]["layers"][4]["config"]["name"] = "shuffle2"
    path.write_text(json.dumps(doc))
    with pytest.raises(glcnn.UnsupportedOpError) as error:
        tfjs.load(path)
    message = str(error.value)
    for part in ("model.json: 3 unsupported", "ChannelScale (layers: 'scale')",
                 "MultiplyBeta (layers: 'beta')", "PixelShuffle2x (layers: 'shuffle', 'shuffle2')",
                 "glcnn.importers.tfjs.register_layer(class_name, build, emits=",
                 "tf.serialization.registerClass"):
        assert part in message, f"{part!r} not in {message!r}"


def test_registered_classes_leave_the_list(tmp_path):
    path = write_model(tmp_path / "model")
    with tfjs.custom_layer("PixelShuffle2x", pixel_shuffle_2x, emits=("DepthToSpace",)):
        with pytest.raises(glcnn.UnsupportedOpError, match="2 unsupported") as error:
            tfjs.load(path)
    assert "PixelShuffle2x" not in str(error.value).split("Supported layers")[0]


def test_an_unknown_activation_alone_does_not_mention_the_hook(tmp_path):
    path = write_model(tmp_path / "model", ())
    doc = json.loads(path.read_text())
    doc["modelTopology"]["config"]["layers"][0]["config"]["activation"] = "gelu"
    path.write_text(json.dumps(doc))
    with pytest.raises(glcnn.UnsupportedOpError, match="activation 'gelu'") as error:
        tfjs.load(path)
    assert "register_layer" not in str(error.value)


# --- registration ---------------------------------------------------------------------------------
def test_registering_a_class_twice_is_refused_unless_replace():
    with tfjs.custom_layer("MultiplyBeta", multiply_beta, emits=("Mul",)):
        with pytest.raises(glcnn.GlcnnError, match="MultiplyBeta is already a custom layer.*"
                                                   "replace=True"):
            tfjs.register_layer("MultiplyBeta", channel_scale, emits=("Mul",))
        with tfjs.custom_layer("MultiplyBeta", channel_scale, emits=("Mul",), replace=True):
            assert tfjs_layers.CONVERTERS["MultiplyBeta"].build is channel_scale
        assert tfjs_layers.CONVERTERS["MultiplyBeta"].build is multiply_beta
    assert "MultiplyBeta" not in tfjs_layers.CONVERTERS and "MultiplyBeta" not in tfjs.CUSTOM


def test_a_builtin_class_is_refused_unless_replace_and_comes_back():
    builtin, emits = tfjs_layers.CONVERTERS["Dropout"], tfjs_layers.EMITS["Dropout"]
    with pytest.raises(glcnn.GlcnnError, match="Dropout is already a built-in TF.js layer"):
        tfjs.register_layer("Dropout", multiply_beta, emits=("Mul",))
    tfjs.register_layer("Dropout", multiply_beta, emits=("Mul",), replace=True)
    assert tfjs_layers.EMITS["Dropout"] == ("Mul",)
    tfjs.unregister_layer("Dropout")
    assert tfjs_layers.CONVERTERS["Dropout"] is builtin and tfjs_layers.EMITS["Dropout"] == emits


def test_unregister_forgets_the_class_and_refuses_unknown_names(tmp_path):
    tfjs.register_layer("MultiplyBeta", multiply_beta, emits=("Mul",))
    tfjs.unregister_layer("MultiplyBeta")
    assert "MultiplyBeta" not in tfjs_layers.CONVERTERS
    with pytest.raises(glcnn.GlcnnError, match="'MultiplyBeta' is not a registered custom"):
        tfjs.unregister_layer("MultiplyBeta")
    with pytest.raises(glcnn.GlcnnError, match="'Conv2D' is not a registered custom"):
        tfjs.unregister_layer("Conv2D")


@pytest.mark.parametrize("cls, build, emits, message", [
    ("Pixel Shuffle", multiply_beta, ("Mul",), "is not an identifier"),
    ("MultiplyBeta", None, ("Mul",), "is not callable"),
    ("MultiplyBeta", multiply_beta, "Mul", "must be a tuple of glcnn op types"),
    ("MultiplyBeta", multiply_beta, ("Mul", "Scale"), r"\['Scale'\], which are not glcnn ops"),
], ids=["class-not-identifier", "build-not-callable", "emits-a-string", "emits-unknown-op"])
def test_bad_registrations_are_refused(cls, build, emits, message):
    with pytest.raises(glcnn.GlcnnError, match=message):
        tfjs.register_layer(cls, build, emits=emits)
    assert cls not in tfjs_layers.CONVERTERS


# --- the builder's contract, checked when it runs ------------------------------------------
def emits_relu(imp, call):
    x = imp.act(call)
    return Tensor(imp.emit(call, "Relu", [x.name]), 4)


def returns_a_name(imp, call):
    return imp.emit(call, "Relu", [imp.act(call).name])


def reads_a_missing_key(imp, call):
    return Tensor(call.config["no_such_key"], 4)


@pytest.mark.parametrize("build, message", [
    (emits_relu, r"builder emits_relu emitted \['Relu'\], not in its emits=\('DepthToSpace',\)"),
    (returns_a_name, "builder returns_a_name returned 'shuffle'; it must return a "
                     "glcnn.importers.tfjs.Tensor"),
    (reads_a_missing_key, "builder reads_a_missing_key raised KeyError: 'no_such_key'"),
], ids=["undeclared-op", "not-a-tensor", "builder-bug"])
def test_a_builder_breaking_its_contract_is_named(tmp_path, build, message):
    path = write_model(tmp_path / "model", ("PixelShuffle2x",))
    emits = ("Relu",) if build is returns_a_name else ("DepthToSpace",)
    with tfjs.custom_layer("PixelShuffle2x", build, emits=emits):
        with pytest.raises(glcnn.GlcnnError, match=message) as error:
            tfjs.load(path)
    assert "layer 'shuffle' (PixelShuffle2x)" in str(error.value)


def test_a_custom_weight_of_the_wrong_shape_names_both_shapes(tmp_path):
    path = write_model(tmp_path / "model", ("PixelShuffle2x", "ChannelScale"))
    doc = json.loads(path.read_text())
    doc["weightsManifest"][0]["weights"][2]["shape"] = [1, 3]
    path.write_text(json.dumps(doc))
    with tfjs.custom_layer("PixelShuffle2x", pixel_shuffle_2x, emits=("DepthToSpace",)), \
            tfjs.custom_layer("ChannelScale", channel_scale, emits=("Mul",)):
        with pytest.raises(glcnn.WeightError,
                           match=r"'scale/gamma' has shape \[1, 3\].*need \[3\]"):
            tfjs.load(path)
