"""glcnn against PyTorch itself: single ops (float64 torch) and whole reference models."""

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import PRECISIONS, assert_close, single_op_graph, storable
from torch import nn
from torch_models import Autoencoder, DCGANGenerator

import glcnn
from glcnn.graph import models

REPO = Path(__file__).resolve().parents[2]


def _t(x):
    return torch.from_numpy(np.asarray(x, np.float64))


def _glcnn_op(ctx, op, attrs, x, weights, precision):
    graph = single_op_graph(op, attrs, [x.shape], weights)
    with glcnn.Pipeline(graph, ctx, precision=precision) as pipe:
        return pipe.run(x)


def _random(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# --- single ops ---------------------------------------------------------------------------
CONVS = [  # id, in (C, H, W), W shape, torch kwargs, ONNX pads (top, left, bottom, right)
    ("c5-k3-s2-p1", (5, 9, 8), (7, 5, 3, 3), {"stride": 2}, (1, 1, 1, 1)),
    ("c6-g3-d2-p2", (6, 9, 9), (9, 2, 3, 3), {"groups": 3, "dilation": 2}, (2, 2, 2, 2)),
    ("c8-depthwise-k5-s2", (8, 11, 10), (8, 1, 5, 5), {"groups": 8, "stride": 2}, (2, 2, 2, 2)),
    ("c3-asym-pads-k3x2", (3, 7, 6), (5, 3, 3, 2), {"stride": (2, 1)}, (0, 1, 2, 1)),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("shape", "wshape", "kw", "pads"), [c[1:] for c in CONVS],
                         ids=[c[0] for c in CONVS])
def test_conv2d(ctx, shape, wshape, kw, pads, precision):
    rng = np.random.default_rng(0)
    x, w, b = storable(_random(rng, *shape), precision), _random(rng, *wshape), _random(
        rng, wshape[0])
    top, left, bottom, right = pads
    padded = F.pad(_t(x)[None], (left, right, top, bottom))  # F.pad: last axis first
    expected = F.conv2d(padded, _t(w), _t(b), **kw)[0].numpy()
    attrs = {"pads": list(pads), "group": kw.get("groups", 1),
             "strides": list(np.broadcast_to(kw.get("stride", 1), 2)),
             "dilations": list(np.broadcast_to(kw.get("dilation", 1), 2))}
    y = _glcnn_op(ctx, "Conv", attrs, x, {"W": w, "B": b}, precision)
    assert_close(y, expected, precision, f"Conv {shape} W{wshape} {kw} pads={pads}")


CONV_TRANSPOSES = [  # id, in (C, H, W), W shape, torch kwargs, extra crop (t, l, b, r)
    ("c7-k4-s2-p1", (7, 5, 6), (7, 5, 4, 4), {"stride": 2, "padding": 1}, (0, 0, 0, 0)),
    ("c4-g2-s3-op2", (4, 4, 5), (4, 3, 3, 3),
     {"stride": 3, "padding": 1, "output_padding": 2, "groups": 2}, (0, 0, 0, 0)),
    ("c5-d2-s2-op1-p2", (5, 5, 4), (5, 6, 3, 3),
     {"stride": 2, "padding": 2, "output_padding": 1, "dilation": 2}, (0, 0, 0, 0)),
    ("c3-asym-pads", (3, 4, 5), (3, 4, 3, 2), {"stride": 2}, (1, 0, 2, 1)),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("shape", "wshape", "kw", "crop"), [c[1:] for c in CONV_TRANSPOSES],
                         ids=[c[0] for c in CONV_TRANSPOSES])
def test_conv_transpose2d(ctx, shape, wshape, kw, crop, precision):
    """Asymmetric ONNX pads crop PyTorch's unpadded output, one side at a time."""
    rng = np.random.default_rng(1)
    x, w = storable(_random(rng, *shape), precision), _random(rng, *wshape)
    b = _random(rng, wshape[1] * kw.get("groups", 1))
    full = F.conv_transpose2d(_t(x)[None], _t(w), _t(b), **kw)[0].numpy()
    top, left, bottom, right = crop
    expected = full[:, top:full.shape[1] - bottom, left:full.shape[2] - right]
    pad = kw.get("padding", 0)
    attrs = {"pads": [pad + top, pad + left, pad + bottom, pad + right],
             "strides": [kw.get("stride", 1)] * 2, "dilations": [kw.get("dilation", 1)] * 2,
             "output_padding": [kw.get("output_padding", 0)] * 2, "group": kw.get("groups", 1)}
    y = _glcnn_op(ctx, "ConvTranspose", attrs, x, {"W": w, "B": b}, precision)
    assert_close(y, expected, precision, f"ConvTranspose {shape} W{wshape} {kw} crop={crop}")


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", [(5, 6, 7), (13, 3, 1)], ids=["c5-6x7", "c13-3x1"])
def test_batch_norm_eval(ctx, shape, precision):
    rng = np.random.default_rng(2)
    c = shape[0]
    x = storable(_random(rng, *shape), precision)
    params = {"scale": _random(rng, c), "B": _random(rng, c), "mean": _random(rng, c),
              "var": rng.uniform(0.1, 3, c).astype(np.float32)}
    expected = F.batch_norm(_t(x)[None], _t(params["mean"]), _t(params["var"]),
                            _t(params["scale"]), _t(params["B"]), training=False, eps=1e-3)
    y = _glcnn_op(ctx, "BatchNormalization", {"epsilon": 1e-3}, x, params, precision)
    assert_close(y, expected[0].numpy(), precision, f"BatchNormalization {shape}")


# --- whole models (their PyTorch twins live in train/torch_models.py) ---------------------
def _dcgan(seed=0):
    """Seeded weights (tutorial init) and BatchNorm statistics that are far from identity.

    The running statistics start as a real batch's (so activations stay O(1) and the Tanh
    output is not all near zero), then are scaled and shifted at random.
    """
    torch.manual_seed(seed)
    model = DCGANGenerator().double()
    with torch.no_grad():
        for i, layer in enumerate(model.main):
            if isinstance(layer, nn.ConvTranspose2d):
                layer.weight.normal_(0.0, 0.1 if i == 12 else 0.02)
            elif isinstance(layer, nn.BatchNorm2d):
                layer.weight.uniform_(0.5, 1.5)
                layer.bias.normal_(0.0, 0.2)
                layer.momentum = 1.0  # running stats := this batch's
        model.train()(torch.randn(16, 100, 1, 1, dtype=torch.float64))
        for layer in model.main:
            if isinstance(layer, nn.BatchNorm2d):
                std = layer.running_var.sqrt()
                layer.running_mean += 0.3 * std * torch.randn_like(std)
                layer.running_var *= torch.empty_like(std).uniform_(0.5, 2.0)
    return model.eval()


def _autoencoder(seed=0):
    torch.manual_seed(seed)
    model = Autoencoder().double()
    with torch.no_grad():
        for layer in model.children():
            fan_in = layer.weight[0].numel() if isinstance(layer, nn.Conv2d) else (
                layer.weight.shape[0] * layer.weight[0, 0].numel() / 4)  # stride 2: 1/4 taps
            layer.weight.normal_(0.0, float(np.sqrt(2.0 / fan_in)))
            layer.bias.normal_(0.0, 0.1)
    return model.eval()


def _state_dict(model):
    return {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}


def _compare_model(ctx, graph, model, xs, precision, what, strategy=None):
    with glcnn.Pipeline(graph, ctx, precision=precision, strategy=strategy) as pipe:
        what += f" ({pipe.strategy})"
        for i, x in enumerate(xs):
            x = storable(x, precision)
            with torch.no_grad():
                expected = model(_t(x)[None])[0].numpy()
            assert expected.std() > 0.1, f"{what}: the torch output is too flat to test with"
            assert_close(pipe.run(x), expected, precision, f"{what} input #{i}")


@pytest.fixture(scope="module")
def dcgan():
    model = _dcgan()
    return model, _state_dict(model)


@pytest.mark.parametrize("strategy", ["blocked", "direct"])
@pytest.mark.parametrize("precision", PRECISIONS)
def test_dcgan_generator(ctx, dcgan, precision, strategy):
    model, state = dcgan
    assert {k.split(".")[1] for k in state} == {"0", "1", "3", "4", "6", "7", "9", "10", "12"}
    graph = models.dcgan_generator(weights=state)
    assert len(graph.nodes) == 5  # BatchNorm and ReLU folded into the transposed convs
    zs = [np.random.default_rng(s).standard_normal((100, 1, 1)).astype(np.float32)
          for s in range(3)]
    _compare_model(ctx, graph, model, zs, precision, "DCGAN generator", strategy)


def test_dcgan_generator_unfused_matches_too(ctx, dcgan):
    model, state = dcgan
    graph = models.dcgan_generator(weights=state, fuse=False)
    assert len(graph.nodes) == 14
    z = np.random.default_rng(5).standard_normal((100, 1, 1)).astype(np.float32)
    _compare_model(ctx, graph, model, [z], "fp32", "DCGAN generator (unfused)")


@pytest.mark.parametrize("strategy", ["blocked", "direct"])
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("size", [(32, 32), (48, 64)], ids=["32x32", "48x64"])
def test_autoencoder(ctx, size, precision, strategy):
    model = _autoencoder()
    graph = models.autoencoder(size=size, weights=_state_dict(model))
    xs = [np.random.default_rng(s).random((3, *size), np.float32) for s in range(2)]
    _compare_model(ctx, graph, model, xs, precision, f"autoencoder {size}", strategy)


def test_autoencoder_shipped_model(ctx):
    """weights/autoencoder.npz (a trained glcnn graph) against torch with its weights."""
    graph = glcnn.load_graph(REPO / "weights" / "autoencoder.npz")
    names = {"W": "weight", "B": "bias"}
    state = {f"{n.name}.{names[k]}": torch.from_numpy(np.asarray(v, np.float64))
             for n in graph.nodes for k, v in n.weights.items()}
    model = Autoencoder().double()
    model.load_state_dict(state)
    x = np.random.default_rng(9).random((3, *graph.inputs["image"][1:]), np.float32)
    _compare_model(ctx, graph, model.eval(), [x], "fp32", "weights/autoencoder.npz")
