"""The TF.js graph-model importer against TF.js's own outputs (fp32).

Fixtures: tests/data/tfjs_graph/<case>/, GraphDefs written node by node by
tools/tfjs_fixtures/make_graph_fixtures.js, outputs computed by TF.js 4.22.0 (cpu backend)
on the model as tf.loadGraphModel reads it. The pretrained model test fetches nsfwjs and
TF.js from npm at test time (tests/tfjs_cases.py) and fails, never skips, without them.
"""

import json
import random
import re
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image
from real_models import PHOTOS, fetch
from tfjs_cases import (
    ROOT,
    copy_case,
    edit,
    mutate_json,
    nsfwjs_model,
    relative_error,
    run_graph,
    tfjs_predict,
)

import glcnn
from glcnn.commands import docs
from glcnn.graph.passes import optimize
from glcnn.importers import open_inputs, tfjs, tfjs_graph, tfjs_graph_ops
from glcnn.ops import build_ops

DATA = ROOT / "tests" / "data" / "tfjs_graph"
# max |glcnn − TF.js| / max |TF.js| for whole models in fp32, as for layers models.
# Measured on Mesa llvmpipe: ≤ 5e-7 on the fixtures, 1.2e-7 on nsfwjs.
TOLERANCE = 1e-4
CASES = ["convs", "elementwise", "spatial", "classifier", "open_size", "max_min", "views",
         "more_ops"]


def case(name: str) -> dict:
    folder = DATA / name
    spec = json.loads((folder / "case.json").read_text())
    spec["path"] = folder / "model.json"
    for key in ("inputs", "outputs"):
        spec[key] = {n: np.load(folder / f) for n, f in spec[key].items()}
    return spec


def load(name: str, **options):
    return tfjs.load(DATA / name / "model.json", **options)


def tf_node(doc: dict, name: str) -> dict:
    return next(n for n in doc["modelTopology"]["node"] if n["name"] == name)


def node(graph, name: str):
    return next(n for n in graph.nodes if n.name == name)


# --- TF.js's outputs --------------------------------------------------------------------------
@pytest.mark.parametrize("name", CASES)
def test_fixture_matches_tfjs(ctx, name):
    spec = case(name)
    size = next(iter(spec["inputs"].values())).shape[1:3]
    with glcnn.Pipeline(optimize(tfjs.load(spec["path"], input_size=size)), ctx) as pipe:
        ys = run_graph(pipe, spec["inputs"])
    assert set(ys) == set(spec["outputs"])
    for output, ref in spec["outputs"].items():
        err = relative_error(ys[output], ref)
        assert err <= TOLERANCE, f"{name}/{output}: relative error {err:.2e} > {TOLERANCE}"


def test_moves_that_keep_the_stored_order_are_no_pass():
    """views: (1, 24, 5) -> ExpandDims axis 1 -> (1, 1, 24, 5) -> Squeeze -> (1, 24, 5) keeps
    glcnn's (5, 1, 24) throughout (TF.js's values: test_fixture_matches_tfjs); the reshape of
    (1, 4, 6, 5) to (1, 24, 5) moves the same order into another tile shape, one Rearrange."""
    graph = load("views")
    assert [n.op for n in graph.nodes if n.inputs == ["x"]] == ["Conv", "Rearrange"]
    assert not any(n.name == "ex" or n.inputs == ["sq"] for n in graph.nodes)
    assert graph.node("sq").op == "Rearrange"  # the (1, 24, 5) reshape, named as the output


def test_open_size_loads_without_a_size_and_runs_at_the_inputs_size(ctx):
    spec = case("open_size")
    assert open_inputs(spec["path"]) == {"x": (1, "H", "W", 3)}
    with glcnn.load(spec["path"], ctx=ctx) as model:
        y = model.run(spec["inputs"]["x"])
    assert relative_error(y, spec["outputs"]["pool"]) <= TOLERANCE


def test_open_size_without_input_size_says_to_pass_it():
    with pytest.raises(glcnn.UnsupportedOpError, match=r"node 'x' \(Placeholder\).*input_size"):
        load("open_size")


# --- layout ---------------------------------------------------------------------------------
def test_meta_keeps_nhwc_inputs_and_outputs():
    graph = load("classifier")
    assert graph.meta["layout"] == "NHWC"
    assert graph.meta["onnx_input_shapes"] == {"x": [1, 8, 8, 3]}
    assert graph.meta["onnx_output_shapes"] == {"probs": [1, 7], "channel_sum": [1, 4, 4, 1]}
    assert graph.inputs == {"x": (3, 8, 8)} and graph.outputs == ["probs", "channel_sum"]


def test_same_padding_puts_the_odd_pad_at_the_end():
    # dw1: 3×3 stride 2 on 6×7: H pads 1 in total (0 before, 1 after), W 2 (1 and 1)
    assert node(load("convs"), "dw1").attrs["pads"] == [0, 1, 1, 1]
    assert node(load("convs"), "conv3/conv").attrs["pads"] == [1, 0, 0, 1]  # EXPLICIT


def test_filters_become_oihw_and_depthwise_filters_grouped():
    graph, doc = load("convs"), tfjs_graph.read_json(DATA / "convs" / "model.json")
    weights = tfjs_graph.read_weights(DATA / "convs" / "model.json", doc["weightsManifest"])
    conv1 = node(graph, "conv1")
    np.testing.assert_array_equal(conv1.weights["W"],
                                  weights["conv1/filter"].transpose(3, 2, 0, 1))
    dw1 = node(graph, "dw1")
    assert dw1.attrs["group"] == 8 and dw1.weights["W"].shape == (16, 1, 3, 3)
    # TF's output channel c·M + m reads filter[:, :, c, m]
    np.testing.assert_array_equal(dw1.weights["W"][2 * 3 + 1, 0],
                                  weights["dw1/filter"][:, :, 3, 1])


def test_shape_arithmetic_is_folded_and_reshapes_are_free():
    graph = load("classifier")
    ops = {n.op for n in graph.nodes}
    assert ops == {"Conv", "Relu", "ReduceMean", "ReduceMax", "ReduceSum", "Add", "Gemm",
                   "Softmax"}


# --- bad files --------------------------------------------------------------------------------
def test_every_unsupported_op_type_is_listed_at_once(tmp_path):
    path = copy_case("spatial", tmp_path, DATA)

    def change(doc):
        tf_node(doc, "transpose")["op"] = "SpaceToDepth"
        tf_node(doc, "pad")["op"] = "Cumsum"
        tf_node(doc, "mirror")["op"] = "Cumsum"
    edit(path, change)
    with pytest.raises(glcnn.UnsupportedOpError) as err:
        tfjs.load(path)
    message = str(err.value)
    assert "2 unsupported op type(s)" in message
    assert re.search(r"Cumsum \(nodes: '(pad|mirror)', '(pad|mirror)'\)", message)
    assert "SpaceToDepth (TF.js 4.22 runs no SpaceToDepth op) (nodes: 'transpose')" in message


@pytest.mark.parametrize("node_name, key, value, message", [
    ("mirror", "mode", {"s": "RURHRQ=="}, "mode 'EDGE': expected REFLECT or SYMMETRIC"),
    ("dw1", "data_format", {"s": "TkNIVw=="}, "data_format 'NCHW'"),
    ("conv2", "fused_ops", {"list": {"s": ["Qmlhc0FkZA==", "VGFuaA=="]}}, "fused_ops"),
    ("conv1", "padding", {"s": "RlVMTA=="}, "padding 'FULL'"),
], ids=["mirror-edge", "nchw", "fused-tanh", "padding"])
def test_unsupported_settings_are_refused_naming_the_node(tmp_path, node_name, key, value,
                                                          message):
    name = "spatial" if node_name == "mirror" else "convs"
    path = copy_case(name, tmp_path, DATA)
    edit(path, lambda doc: tf_node(doc, node_name)["attr"].__setitem__(key, value))
    with pytest.raises(glcnn.UnsupportedOpError, match=f"node '{node_name}'.*{message}"):
        tfjs.load(path)


def test_maximum_and_minimum_of_two_tensors_are_max_and_min():
    """max_min: Maximum / Minimum of two tensors are glcnn Max / Min (TF.js's values:
    test_fixture_matches_tfjs); of a tensor and a constant scalar they stay a Clip."""
    graph = load("max_min", input_size=(6, 12))
    assert node(graph, "max_tt").op == "Max" and node(graph, "max_tt").inputs == ["conv", "tanh"]
    assert node(graph, "min_tt").op == "Min" and node(graph, "min_tt").inputs == ["se", "max_tt"]
    elementwise = load("elementwise")
    assert node(elementwise, "max_c").op == "Clip" and node(elementwise, "min_c").op == "Clip"


def test_maximum_of_a_tensor_and_a_constant_tensor_is_refused(tmp_path):
    path = copy_case("elementwise", tmp_path, DATA)
    edit(path, lambda doc: tf_node(doc, "max_c").__setitem__("input", ["div_c", "divisor"]))
    with pytest.raises(glcnn.UnsupportedOpError, match=r"node 'max_c' \(Maximum\).*one value"):
        tfjs.load(path)


def test_a_reshape_to_another_element_count_is_refused(tmp_path):
    path = copy_case("classifier", tmp_path, DATA)
    edit(path, lambda doc: tf_node(doc, "to_vector").__setitem__("input", ["conv", "target"]))
    with pytest.raises(glcnn.UnsupportedOpError, match=r"node 'to_vector'.*cannot reshape "
                                                       r"\[1, 4, 4, 6\] \(96 elements\) to "
                                                       r"\[-1, 7\]"):
        tfjs.load(path)


def test_a_fold_only_op_on_a_runtime_tensor_is_refused(tmp_path):
    path = copy_case("classifier", tmp_path, DATA)
    edit(path, lambda doc: tf_node(doc, "target")["input"].__setitem__(1, "fc2"))
    with pytest.raises(glcnn.UnsupportedOpError, match=r"node 'target' \(Pack\).*constants"):
        tfjs.load(path)


def test_a_while_loop_is_refused_as_control_flow(tmp_path):
    """A loop is the only cycle a valid TF graph has: it is named as control flow, not as a
    malformed file (the human package's handtrack and faceboxes models)."""
    path = copy_case("classifier", tmp_path, DATA)

    def loop(doc):
        nodes = doc["modelTopology"]["node"]
        nodes.append({"name": "merge", "op": "Merge", "input": ["x", "next"], "attr": {}})
        nodes.append({"name": "next", "op": "NextIteration", "input": ["merge"], "attr": {}})
        tf_node(doc, "conv")["input"][0] = "merge"
    edit(path, loop)
    with pytest.raises(glcnn.UnsupportedOpError, match="control flow: Merge, NextIteration"):
        tfjs.load(path)


def test_missing_const_weight_names_the_node(tmp_path):
    path = copy_case("convs", tmp_path, DATA)
    edit(path, lambda doc: doc["weightsManifest"][0]["weights"][0].__setitem__("name", "gone"))
    with pytest.raises(glcnn.WeightError, match=r"node 'conv1/filter' \(Const\)"):
        tfjs.load(path)


@pytest.mark.parametrize("change, message", [
    (lambda doc: tf_node(doc, "conv1")["input"].append("nowhere"), "reads 'nowhere'"),
    (lambda doc: tf_node(doc, "image")["input"].append("head_a"), "cycle"),
    (lambda doc: doc["modelTopology"]["node"].append({"name": "conv1", "op": "Relu"}),
     "two nodes are named 'conv1'"),
], ids=["dangling-input", "cycle", "duplicate"])
def test_malformed_graphs_name_the_file(tmp_path, change, message):
    path = copy_case("convs", tmp_path, DATA)
    edit(path, change)
    with pytest.raises(glcnn.ModelFileError, match=f"model.json.*{message}"):
        tfjs.load(path)


def test_short_shard_names_the_weight(tmp_path):
    path = copy_case("convs", tmp_path, DATA)
    shard = path.parent / "group1-shard1of1.bin"
    shard.write_bytes(shard.read_bytes()[:100])
    with pytest.raises(glcnn.ModelFileError, match="truncated or missing"):
        tfjs.load(path)


@pytest.mark.parametrize("name", ["convs", "classifier"])
def test_hostile_model_json_raises_only_glcnn_errors(tmp_path, name):
    path = copy_case(name, tmp_path, DATA)
    original = json.loads(path.read_text())
    for seed in range(40):
        doc = json.loads(json.dumps(original))
        changes = mutate_json(doc, random.Random(seed))
        path.write_text(json.dumps(doc))
        try:
            build_ops(optimize(tfjs.load(path, input_size=(8, 8))))
        except glcnn.GlcnnError:
            pass
        except Exception as exc:  # the test: this never happens
            pytest.fail(f"{name} seed {seed} {changes}: {type(exc).__name__}: {exc}")


# --- the README's table ---------------------------------------------------------------------
def test_readme_table_is_the_converter_table():
    readme = (ROOT / "README.md").read_text()
    assert docs.tfjs_graph_table() in readme
    listed = set(re.findall(r"`(\w+)`", readme.split("<!-- tfjs-graph-table -->")[1]
                            .split("<!-- /tfjs-graph-table -->")[0]))
    assert set(tfjs_graph_ops.CONVERTERS) | set(tfjs_graph_ops.FOLDS) <= listed


# --- a real pretrained graph model from npm ---------------------------------------------------
NSFW_CLASSES = ["Drawing", "Hentai", "Neutral", "Porn", "Sexy"]


@pytest.fixture(scope="module")
def nsfwjs():
    """nsfwjs 4.4.0's MobileNetV2 "mid" graph model, and the astronaut photo as nsfwjs feeds
    it: RGB / 255, 224×224 (NHWC)."""
    photo = Image.open(fetch(PHOTOS)["skimage/data/astronaut.png"]).convert("RGB")
    x = np.asarray(photo.resize((224, 224), Image.Resampling.BILINEAR), np.float32) / 255
    return nsfwjs_model() / "model.json", x[None]


def test_nsfwjs_matches_tfjs_through_glcnn_load(ctx, nsfwjs, tmp_path):
    model, x = nsfwjs
    graph = tfjs.load(model)
    assert {n.op for n in graph.nodes} == {"Conv", "Clip", "Add", "Mul", "Sub", "AveragePool",
                                           "Gemm", "Softmax"}
    with glcnn.load(model, ctx=ctx) as pipe:
        y = pipe.run(x)
    ref = tfjs_predict(model.parent, x, tmp_path, script="run_graph_model.js")
    assert y.shape == ref.shape == (1, 5)
    assert relative_error(y, ref) <= TOLERANCE
    assert NSFW_CLASSES[int(np.argmax(y))] == "Neutral"


def test_nsfwjs_through_glcnn_run_with_no_size_hint(nsfwjs, tmp_path):
    model, x = nsfwjs
    np.save(tmp_path / "in.npy", x)
    result = subprocess.run([sys.executable, "-m", "glcnn.cli", "run", str(model),
                             str(tmp_path / "in.npy"), "-o", str(tmp_path / "out.npy")],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    ref = tfjs_predict(model.parent, x, tmp_path, script="run_graph_model.js")
    assert relative_error(np.load(tmp_path / "out.npy"), ref) <= TOLERANCE
