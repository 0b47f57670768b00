"""Whole PyTorch-exported models in u8 storage against onnxruntime, through
`glcnn.load(path, precision="u8", calibration=x)`, and the tensors u8 keeps in float.

Each model is calibrated on the very input it runs, so what is measured is 8-bit storage,
not how well samples cover an input (tests/runtime/test_precision.py covers that). Models whose
output is a (C, 1, 1) vector (MobileNetV2, ResNet) come out nearly exact that way: each
output channel's calibrated range is then that one value, widened by the margin.
"""

import numpy as np
import onnxruntime as ort
import pytest
import torch
from onnx_torch_models import (
    BilinearUNet,
    MobileNetV2,
    Pix2PixUNet,
    dcgan,
    espcn,
    export,
    fast_style,
    randomize_batchnorm,
    resnet,
)
from torch_models import Autoencoder

import glcnn
from glcnn.graph.passes import optimize
from glcnn.runtime.precision import float_tensors

# Relative max error max |glcnn − onnxruntime| / max |onnxruntime| allowed for a u8 model.
# Measured on Mesa llvmpipe (the ids below): fast_style 4.0e-2 (1.2e-1 with every tensor in
# 8 bits), pix2pix 1.8e-2, espcn 1.5e-2, DCGAN 7.3e-3, bilinear U-Net 4.7e-3, autoencoder
# 2.0e-3, ResNet and MobileNetV2 ≤ 4e-6 (vector outputs, see the module docstring).
U8_NETWORK_TOLERANCE = 5e-2

# id -> (module factory, NCHW input shape): small inputs, odd sizes and C % 4 != 0 on purpose.
MODELS = {
    "autoencoder-32x32": (Autoencoder, (1, 3, 32, 32)),
    "dcgan-1x1": (dcgan, (1, 16, 1, 1)),
    "mobilenet_v2-64x64": (MobileNetV2, (1, 3, 64, 64)),
    "fast_style-64x64": (fast_style, (1, 3, 64, 64)),
    "bilinear_unet-32x32": (BilinearUNet, (1, 3, 32, 32)),
    "pix2pix_unet-64x64": (Pix2PixUNet, (1, 3, 64, 64)),
    "espcn-c9-31x23": (espcn, (1, 1, 31, 23)),
    "resnet-c6-45x37": (lambda: resnet(c=6), (1, 3, 45, 37)),
}


def exported(tmp_path, model_id):
    """The seeded model `model_id` exported to ONNX, and a seeded input for it."""
    factory, shape = MODELS[model_id]
    torch.manual_seed(0)
    path = export(randomize_batchnorm(factory()), torch.randn(*shape),
                  tmp_path / f"{model_id}.onnx")
    return path, np.random.default_rng(1).standard_normal(shape).astype(np.float32)


def u8_error(ctx, path, x, strategy=None) -> float:
    """Relative max error of `path` loaded at u8, calibrated on `x`, against onnxruntime."""
    (ref,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"input": x})
    with glcnn.load(path, ctx, precision="u8", strategy=strategy, calibration=x) as pipe:
        y = pipe.run(x)
    return float(np.max(np.abs(y.reshape(ref.shape) - ref)) / np.max(np.abs(ref)))


@pytest.mark.parametrize("model_id", list(MODELS), ids=[f"{m}-u8" for m in MODELS])
def test_model_in_u8_matches_onnxruntime(ctx, tmp_path, model_id):
    error = u8_error(ctx, *exported(tmp_path, model_id))
    assert error <= U8_NETWORK_TOLERANCE, f"{model_id} u8: relative max error {error:.3g}"


def test_fast_style_in_u8_without_blocking(ctx, tmp_path):
    """The float tensors written by one-texel-per-fragment passes (blocked passes write them
    through float scratch targets)."""
    error = u8_error(ctx, *exported(tmp_path, "fast_style-64x64"), strategy="direct")
    assert error <= U8_NETWORK_TOLERANCE, f"fast_style direct u8: relative max error {error:.3g}"


def test_u8_without_calibration_asks_for_it(ctx, tmp_path):
    path, _ = exported(tmp_path, "espcn-c9-31x23")
    with pytest.raises(glcnn.GlcnnError, match=r"calibration=samples"):
        glcnn.load(path, ctx, precision="u8")


def test_load_calibrates_on_a_list_and_keeps_the_ranges(ctx, tmp_path):
    path, x = exported(tmp_path, "espcn-c9-31x23")
    with glcnn.load(path, ctx, precision="u8", calibration=[x, -x]) as pipe:
        ranges = pipe.graph.meta["u8_ranges"]
        glcnn.save(pipe.graph, tmp_path / "calibrated.npz")
    both = np.abs(x).max()
    assert ranges["input"][0][0] < -both and ranges["input"][1][0] > both  # both samples seen
    with glcnn.load(tmp_path / "calibrated.npz", ctx, precision="u8") as pipe:  # stored
        assert pipe.run(x).shape == (1, 1, 93, 69)


def test_calibrate_takes_one_array_or_a_batch(ctx, tmp_path):
    path, x = exported(tmp_path, "espcn-c9-31x23")
    graph = optimize(glcnn.load_graph(path))
    one = glcnn.calibrate(graph, x[0], ctx)
    assert one == glcnn.calibrate(graph, [x], ctx)
    batch = glcnn.calibrate(graph, np.concatenate([x, 2 * x]), ctx)
    assert batch == glcnn.calibrate(graph, [x, 2 * x], ctx)


def test_instancenorm_input_and_statistics_stay_float(ctx, tmp_path):
    """An InstanceNorm's x, mean and variance (and their partial sums) get RGBA32F textures
    in u8; its output and everything else stay RGBA8. Blocked convs making such an x render
    into float scratch targets."""
    path, x = exported(tmp_path, "fast_style-64x64")
    with glcnn.load(path, ctx, precision="u8", calibration=x, keep="all",
                    strategy="blocked") as pipe:
        graph, dtypes = pipe.graph, {n: t.dtype for n, t in pipe.textures.items()}
        assert {dtype for _, dtype in pipe._scratch} == {"f4", "f1"}
    floats = float_tensors(graph)
    norms = [n for n in graph.nodes if n.op == "InstanceNormApply"]
    assert len(norms) == 9
    for node in norms:
        assert set(node.inputs[:3]) <= floats and node.name not in floats
    partial = [n.name for n in graph.nodes if n.op in ("InstanceNormMean", "InstanceNormVariance")
               and n.attrs["axes"] == [3]]
    assert partial and set(partial) <= floats  # the W passes of the split reductions
    assert {n for n, d in dtypes.items() if d == "f4"} == floats
    assert set(dtypes.values()) == {"f4", "f1"}


def test_float_tensors_are_normalisation_inputs_and_statistics():
    """GL-free: which tensors u8 keeps in float, on an InstanceNorm split into a W and an H
    pass, a one-pass InstanceNorm and an expanded Softmax."""
    from glcnn.graph import Graph, Node
    rng = np.random.default_rng(0)
    c = 40  # enough channels for expand_softmax

    def norm(name, x):
        return Node("InstanceNormalization", name, [x], {"epsilon": 1e-5},
                    {"scale": rng.random(c).astype(np.float32),
                     "B": rng.random(c).astype(np.float32)})

    w = {"W": rng.standard_normal((c, c, 1, 1)).astype(np.float32)}
    nodes = [Node("Conv", "conv", ["x"], {}, w), norm("big", "conv"),
             Node("MaxPool", "pool", ["big"], {"kernel_shape": [10, 10], "strides": [10, 10]}),
             norm("small", "pool"), Node("Softmax", "prob", ["small"], {"axis": 1})]
    graph = optimize(Graph({"x": (c, 40, 40)}, nodes, ["prob"]))
    ops = {n.name: n.op for n in graph.nodes}
    assert ops["big"] == "InstanceNormApply" and ops["small"] == "InstanceNormalization"
    assert ops["prob"] == "SoftmaxApply"
    stats = {n.name for n in graph.nodes if n.op in ("InstanceNormMean", "InstanceNormVariance",
                                                     "ReduceMean", "SoftmaxStats")}
    assert len(stats) == 5  # mean/w, mean, var/w, var; the softmax's (M, S)
    assert float_tensors(graph) == {"conv", "pool"} | stats


def test_summary_of_a_u8_pipeline(ctx):
    """summary() of a u8 pipeline raised KeyError('u8'): its table knew fp32 and fp16 only.
    enc1's output (64, 4, 6) is 16 slices in a 4x4 grid of 6x4 tiles: 384 texels, so its row
    holds 384 * 4 * (4 - 1) bytes = 4.5 KiB less at one byte a channel than at fp32."""
    from glcnn.graph import models
    graph = models.autoencoder((8, 12))
    glcnn.calibrate(graph, [np.random.default_rng(0).random((3, 8, 12), np.float32)], ctx)
    rows = {}
    for precision in ("fp32", "u8"):
        with glcnn.Pipeline(graph, ctx, precision=precision) as pipe:
            text = pipe.summary()
        assert f"MiB textures without reuse ({precision})" in text
        rows[precision] = float(next(line for line in text.splitlines()
                                     if line.startswith("enc1")).split()[-1])
    assert rows["fp32"] - rows["u8"] == pytest.approx(4.5, abs=0.11)  # rows print 0.1 KiB
