"""The ONNX importer: hand-built graphs and PyTorch exports against onnxruntime (fp32)."""

import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from helpers import assert_close
from onnx import helper
from onnx_models import (
    clip_from_inputs,
    conv_bn_relu,
    flatten_gemm,
    identity_dropout,
    make_model,
    normalise_and_excite,
    rand,
    single_node,
    variants,
)
from onnx_torch_models import MODELS, export, randomize_batchnorm

import glcnn

# Relative max error |glcnn − onnxruntime| / max |onnxruntime| allowed for whole networks.
NETWORK_TOLERANCE = 1e-4


def save(model, tmp_path, name="model.onnx"):
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def onnxruntime(path, feeds: dict) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def run_glcnn(ctx, path, feeds: dict) -> list[np.ndarray]:
    """Outputs in the ONNX shapes the importer recorded (e.g. (1, F), not (1, F, 1, 1))."""
    with glcnn.load(path, ctx=ctx) as pipe:
        # glcnn holds a (1, F) vector as (F, 1, 1); Pipeline.run takes that shape.
        result = pipe.run({k: v.reshape(*v.shape, 1, 1) if v.ndim == 2 else v
                           for k, v in feeds.items()})
        outputs, shapes = pipe.graph.outputs, pipe.graph.meta["onnx_output_shapes"]
    result = result if isinstance(result, dict) else {outputs[0]: result}
    return [result[name].reshape(shapes[name]) for name in outputs]


def compare(ctx, model, tmp_path, seed=0):
    """Run `model` in glcnn and onnxruntime on a seeded input; returns the glcnn graph."""
    path = save(model, tmp_path)
    feeds = {i.name: rand(*[d.dim_value for d in i.type.tensor_type.shape.dim], seed=seed,
                          scale=1.0) for i in model.graph.input}
    ours, theirs = run_glcnn(ctx, path, feeds), onnxruntime(path, feeds)
    assert len(ours) == len(theirs)
    for y, ref in zip(ours, theirs):
        assert_close(y, ref, "fp32", f"{model.graph.node[0].op_type}... vs onnxruntime")
    return glcnn.load_graph(path)


def ops(graph) -> list[str]:
    return [node.op for node in graph.nodes]


# --- constant folding and dropped nodes ------------------------------------------------------
def test_pytorch_flatten_arithmetic_folds_to_flatten_gemm(ctx, tmp_path):
    graph = compare(ctx, flatten_gemm(), tmp_path)
    assert ops(graph) == ["Conv", "Relu", "Flatten", "Gemm"]
    assert graph.meta["onnx_output_shapes"] == {"logits": [1, 5]}


def test_clip_bounds_from_constant_inputs_become_attributes(ctx, tmp_path):
    graph = compare(ctx, clip_from_inputs(), tmp_path)
    clips = [node.attrs for node in graph.nodes if node.op == "Clip"]
    assert clips == [{"min": -0.25, "max": 0.5}, {"max": pytest.approx(0.3)}]


def test_identity_and_dropout_are_dropped(ctx, tmp_path):
    graph = compare(ctx, identity_dropout(), tmp_path)
    assert ops(graph) == ["Conv", "Relu"] and graph.outputs == ["y"]
    assert graph.nodes[-1].name == "y"  # the output keeps its ONNX name


def test_output_that_is_an_input_is_copied(ctx, tmp_path):
    model = make_model([helper.make_node("Identity", ["x"], ["y"])], {"x": [1, 2, 3, 3]},
                       {"y": [1, 2, 3, 3]})
    graph = compare(ctx, model, tmp_path)
    assert graph.inputs == {"x": (2, 3, 3)} and graph.outputs == ["y"]


def test_batchnorm_after_conv_folds_into_one_pass(ctx, tmp_path):
    path = save(conv_bn_relu(), tmp_path)
    assert ops(glcnn.load_graph(path)) == ["Conv", "BatchNormalization", "Relu"]
    with glcnn.load(path, ctx=ctx) as pipe:
        assert len(pipe.passes) == 1
    compare(ctx, conv_bn_relu(), tmp_path)


def test_constant_sub_div_and_broadcast_mul(ctx, tmp_path):
    graph = compare(ctx, normalise_and_excite(), tmp_path)
    assert ops(graph)[:2] == ["Add", "Mul"]  # x − c as x + (−c), x / c as x · (1 / c)
    assert graph.nodes[-1].inputs[0] == "conv"  # Mul(gate, conv) reordered: conv broadcasts gate


def test_constant_varying_along_width_broadcasts_as_onnx(ctx, tmp_path):
    """ONNX broadcasting aligns trailing axes: a (W,) constant varies along W, not the
    channels (a glcnn-shaped (1, 1, W) constant, not a per-channel one)."""
    model = single_node("Add", (1, 4, 3, 4), weights={"b": rand(4)}, extra_inputs=["b"])
    graph = compare(ctx, model, tmp_path)
    assert graph.nodes[0].weights["B"].shape == (1, 1, 4)


@pytest.mark.parametrize("name", list(variants()))
def test_single_op_variants_match_onnxruntime(ctx, tmp_path, name):
    compare(ctx, variants()[name], tmp_path)


def test_names_are_kept_or_made_npz_safe(ctx, tmp_path):
    n = helper.make_node
    model = make_model([n("Conv", ["image", "W"], ["onnx::Relu_3"]),
                        n("Relu", ["onnx::Relu_3"], ["out:0"])],
                       {"image": [1, 3, 4, 4]}, {"out:0": None}, {"W": rand(4, 3, 1, 1)})
    graph = compare(ctx, model, tmp_path)
    assert list(graph.inputs) == ["image"] and graph.outputs == ["out:0"]
    assert [node.name for node in graph.nodes] == ["onnx_Relu_3", "out:0"]
    glcnn.save(graph, tmp_path / "copy.npz")
    assert ops(glcnn.load_graph(tmp_path / "copy.npz")) == ["Conv", "Relu"]


# --- errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize("content", [b"", b"not an onnx file \x00\xff" * 20],
                         ids=["empty", "garbage"])
def test_unreadable_file_names_the_file(tmp_path, content):
    path = tmp_path / "broken.onnx"
    path.write_bytes(content)
    with pytest.raises(glcnn.ModelFileError, match="broken.onnx"):
        glcnn.load_graph(path)


def test_truncated_file_names_the_file(tmp_path):
    data = flatten_gemm().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(glcnn.ModelFileError, match="cut.onnx"):
        glcnn.load_graph(path)


def test_every_unsupported_op_is_listed_at_once(tmp_path):
    n = helper.make_node
    nodes = [n("Hardmax", ["x"], ["a"], name="hardmax1"), n("Floor", ["a"], ["b"], name="floor1"),
             n("Hardmax", ["b"], ["c"], name="hardmax2"), n("Relu", ["c"], ["y"])]
    model = make_model(nodes, {"x": [1, 2, 3, 3]}, {"y": None})
    with pytest.raises(glcnn.UnsupportedOpError) as info:
        glcnn.load_graph(save(model, tmp_path))
    message = str(info.value)
    assert "2 unsupported ONNX op type(s)" in message
    assert "Hardmax (nodes: 'hardmax1', 'hardmax2')" in message
    assert "Floor (nodes: 'floor1')" in message


def test_batch_of_two_is_refused(tmp_path):
    with pytest.raises(glcnn.UnsupportedOpError, match=r"input 'x' has shape \[2, 3, 4, 4\] "
                                                       r"\(batch size 2\)"):
        glcnn.load_graph(save(single_node("Relu", (2, 3, 4, 4)), tmp_path))


def test_symbolic_batch_is_pinned_to_one(ctx, tmp_path):
    """torch.onnx.export(dynamic_axes={"input": {0: "batch"}}) writes a named batch axis."""
    model = make_model([helper.make_node("Conv", ["x", "W"], ["y"])], {"x": ["batch", 2, 4, 5]},
                       {"y": ["batch", 3, 4, 5]}, {"W": rand(3, 2, 1, 1)})
    assert glcnn.load_graph(save(model, tmp_path)).inputs == {"x": (2, 4, 5)}
    x = rand(1, 2, 4, 5, seed=1)
    assert_close(run_glcnn(ctx, tmp_path / "model.onnx", {"x": x})[0],
                 onnxruntime(tmp_path / "model.onnx", {"x": x})[0], "fp32", "symbolic batch")


def test_symbolic_height_is_refused(tmp_path):
    model = single_node("Relu", (1, 3, "height", 4))
    with pytest.raises(glcnn.UnsupportedOpError, match=r"dynamic shape \[1, 3, \?, 4\]"):
        glcnn.load_graph(save(model, tmp_path))


def test_same_padding_with_dilation_is_refused(tmp_path):
    model = single_node("Conv", (1, 3, 7, 6), {"auto_pad": "SAME_UPPER", "dilations": [2, 2]},
                        {"W": rand(4, 3, 3, 3)}, ["W"])
    with pytest.raises(glcnn.UnsupportedOpError, match="implementations disagree"):
        glcnn.load_graph(save(model, tmp_path))


def test_wrong_input_shape_names_both_shapes(ctx, tmp_path):
    path = save(single_node("Relu", (1, 3, 4, 4)), tmp_path)
    with glcnn.load(path, ctx=ctx) as pipe, pytest.raises(glcnn.ShapeError, match=r"\(3, 4, 4\)"):
        pipe.run(rand(1, 3, 5, 4))


def test_texture_larger_than_the_gl_limit_is_refused(ctx, tmp_path):
    height = ctx.max_texture_size + 1
    path = save(single_node("Relu", (1, 4, height, 2)), tmp_path)
    with pytest.raises(glcnn.TextureSizeError, match=str(height)):
        glcnn.load(path, ctx=ctx)


def test_missing_initializer_is_named(tmp_path):
    node = helper.make_node("Conv", ["x", "W_missing"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", 1, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(glcnn.GlcnnError, match="W_missing"):
        glcnn.load_graph(save(model, tmp_path))


def test_missing_onnx_package_says_what_to_install(tmp_path, monkeypatch):
    path = save(single_node("Relu", (1, 3, 4, 4)), tmp_path)
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(glcnn.ModelFileError, match="pip install onnx"):
        glcnn.load_graph(path)


# --- the glcnn command --------------------------------------------------------------------------
def test_cli_run_reproduces_onnxruntime(tmp_path):
    path = save(conv_bn_relu(), tmp_path)
    x = rand(1, 3, 9, 8, seed=5, scale=1.0)
    np.save(tmp_path / "x.npy", x)
    done = subprocess.run([sys.executable, "-m", "glcnn.cli", "run", path, tmp_path / "x.npy",
                           "-o", tmp_path / "y.npy"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert_close(np.load(tmp_path / "y.npy"), onnxruntime(path, {"x": x})[0], "fp32", "cli")


def test_cli_run_png_to_png(tmp_path):
    from PIL import Image
    model = single_node("Conv", (1, 3, 6, 5), {"pads": [1, 1, 1, 1]}, {"W": rand(3, 3, 3, 3)},
                        ["W"])
    path = save(model, tmp_path)
    pixels = np.random.default_rng(2).integers(0, 256, (6, 5, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "in.png")
    done = subprocess.run([sys.executable, "-m", "glcnn.cli", "run", path, tmp_path / "in.png",
                           "-o", tmp_path / "out.png"], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    x = (pixels.transpose(2, 0, 1)[None] / 255.0).astype(np.float32)
    y = onnxruntime(path, {"x": x})[0][0].transpose(1, 2, 0)
    expected = np.round(np.clip(y, 0, 1) * 255)
    out = np.asarray(Image.open(tmp_path / "out.png"), np.float64)
    assert out.shape == (6, 5, 3) and np.abs(out - expected).max() <= 1


def test_cli_unsupported_model_is_one_line_exit_2(tmp_path):
    path = save(single_node("Hardmax", (1, 3, 4, 4)), tmp_path)
    np.save(tmp_path / "x.npy", rand(1, 3, 4, 4))
    done = subprocess.run([sys.executable, "-m", "glcnn.cli", "run", path, tmp_path / "x.npy"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "Hardmax" in done.stderr


# --- real architectures exported from PyTorch -------------------------------------------------
@pytest.mark.parametrize("name", list(MODELS))
def test_pytorch_architecture_matches_onnxruntime(ctx, tmp_path, name):
    factory, shape, kwargs = MODELS[name]
    torch.manual_seed(0)
    module = randomize_batchnorm(factory())
    path = export(module, torch.randn(*shape), tmp_path / f"{name}.onnx", **kwargs)
    x = rand(*shape, seed=1, scale=1.0)
    (y,), (ref,) = run_glcnn(ctx, path, {"input": x}), onnxruntime(path, {"input": x})
    assert y.shape == ref.shape
    error = float(np.max(np.abs(y - ref)) / np.max(np.abs(ref)))
    assert error <= NETWORK_TOLERANCE, f"{name}: relative max error {error:.3g}"


def test_classifier_output_keeps_onnx_shape(tmp_path, ctx):
    """A (1, F) ONNX output comes back as (1, F), not as glcnn's (F, 1, 1) vector."""
    from onnx import TensorProto, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((5, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "w"], ["logits"], transB=1),
             helper.make_node("Softmax", ["logits"], ["p"], axis=1)]
    graph = helper.make_graph(
        nodes, "cls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 5])], [w])
    path = tmp_path / "cls.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    with glcnn.load(path, ctx) as model:
        y = model.run(x)
    expected = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
    assert y.shape == (1, 5)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


def _missing_initializer_model():
    node = helper.make_node("Conv", ["x", "W_missing"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", 1, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("case", ["truncated", "not-onnx", "unsupported-op", "missing-initializer",
                                  "wrong-shape", "wrong-dtype", "too-large"])
def test_cli_bad_files_and_inputs_are_one_line_exit_2(case, tmp_path, ctx):
    """Each bad model or input: one line on stderr naming the problem, exit status 2."""
    good = save(single_node("Relu", (1, 3, 4, 4)), tmp_path)
    x = rand(1, 3, 4, 4)
    if case == "truncated":
        data = flatten_gemm().SerializeToString()
        (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 2])
        model, expect = tmp_path / "cut.onnx", "cut.onnx"
    elif case == "not-onnx":
        (tmp_path / "text.onnx").write_text("hello, not a model")
        model, expect = tmp_path / "text.onnx", "text.onnx"
    elif case == "unsupported-op":
        model, expect = save(single_node("Hardmax", (1, 3, 4, 4)), tmp_path, "hardmax.onnx"), \
            "Hardmax"
    elif case == "missing-initializer":
        model, expect = save(_missing_initializer_model(), tmp_path, "mi.onnx"), "W_missing"
    elif case == "wrong-shape":
        model, expect, x = good, "(3, 4, 4)", rand(1, 3, 5, 4)
    elif case == "wrong-dtype":
        model, expect, x = good, "dtype", np.array([["a"] * 4] * 4)
    else:
        big = ctx.max_texture_size + 1
        model, expect = save(single_node("Relu", (1, 4, big, 2)), tmp_path, "big.onnx"), str(big)
    np.save(tmp_path / "x.npy", x)
    done = subprocess.run([sys.executable, "-m", "glcnn.cli", "run", model, tmp_path / "x.npy"],
                          capture_output=True, text=True, check=False)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert expect in lines[0], lines[0]


def test_cli_info_parameter_total_matches_onnx(tmp_path):
    """`glcnn info` counts the same parameters as the ONNX file's initializers."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 4, 1), torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten(), torch.nn.Linear(4, 5)).eval()
    path = tmp_path / "net.onnx"
    torch.onnx.export(net, torch.zeros(1, 3, 16, 16), str(path), dynamo=False)
    expected = sum(int(np.prod(t.dims)) for t in onnx.load(str(path)).graph.initializer)
    done = subprocess.run([sys.executable, "-m", "glcnn.cli", "info", path],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert f"{expected:,} params" in done.stdout, done.stdout
