"""Gradient parity with PyTorch autograd (float64) for the layers without weights and the small
heads: MaxPool, AveragePool, Concat, nearest / bilinear Resize (also read upscaled by an Add),
Flatten, Gemm. Every weight
gradient and every forward tensor's gradient, fp32 on the GPU, relative error ≤ 1e-4 (the
layer under test reads the output of a conv, so its input gradient is computed and compared);
and 10 SGD steps of a small classifier against PyTorch's losses and weights."""

import numpy as np
import pytest
import torch
from test_grads import check_gradients
from torch_graph import TorchGraph, relative_error

import glcnn
from glcnn import Builder
from glcnn.graph.fuse_resize import fuse_upsampled_adds, fuse_upsampled_convs
from glcnn.graph import reference as numpy_reference

pytestmark = pytest.mark.gl

# (op, channels, H, W, kernel, stride, pad, dilation, ceil_mode, count_include_pad)
POOLS = [
    ("MaxPool", 5, 9, 7, 2, 2, 0, 1, 0, 0),
    ("MaxPool", 6, 9, 9, 3, 2, 1, 1, 0, 0),
    ("MaxPool", 5, 7, 9, 3, 1, 1, 1, 0, 0),
    ("MaxPool", 3, 9, 7, 3, 2, 1, 2, 0, 0),
    ("MaxPool", 4, 8, 7, 3, 2, 0, 1, 1, 0),
    ("AveragePool", 5, 9, 7, 3, 2, 1, 1, 0, 0),
    ("AveragePool", 5, 9, 7, 3, 2, 1, 1, 0, 1),
    ("AveragePool", 6, 7, 7, 2, 1, 0, 1, 0, 0),
    ("AveragePool", 3, 8, 9, 3, 2, 1, 1, 1, 1),
    ("AveragePool", 4, 9, 9, 3, 1, 1, 1, 0, 0),
]


def pool_id(case) -> str:
    op, c, h, w, k, s, p, d, ceil, cip = case
    return (f"{'max' if op == 'MaxPool' else 'avg'}-c{c}-{h}x{w}-k{k}-s{s}-p{p}-d{d}"
            f"{'-ceil' if ceil else ''}{'-cip' if cip else ''}")


def pool_attrs(op, k, s, p, d, ceil, cip) -> dict:
    attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": [p] * 4, "ceil_mode": ceil}
    if op == "MaxPool":
        return attrs | {"dilations": [d, d]}
    return attrs | {"count_include_pad": cip}


@pytest.mark.parametrize("case", POOLS, ids=pool_id)
def test_pool_gradients_match_torch(case, ctx):
    op, c, h, w, k, s, p, d, ceil, cip = case
    b = Builder(seed=6)
    x = b.input("x", (c, h, w))
    a = b.conv(x, c, 1, name="pre")
    y = b._add(op, [a], "layer", pool_attrs(op, k, s, p, d, ceil, cip))
    y = b.conv(y, 3, 3, padding=1, name="post")
    errors = check_gradients(b.build([y]), ctx)
    assert {"d:pre", "d:layer", "pre.weight"} <= set(errors)


def test_max_pool_ties_go_to_the_first_maximum(ctx):
    """Relu zeros make windows whose maximum 0 appears several times: PyTorch gives the
    gradient to the first of them, in row-major tap order, and so must the GPU."""
    b = Builder(seed=7)
    x = b.input("x", (4, 9, 9))
    a = b.activation(b.conv(x, 4, 1, name="pre"), "Relu", name="relu")
    y = b._add("MaxPool", [a], "layer", {"kernel_shape": [3, 3], "strides": [1, 1],
                                         "pads": [1, 1, 1, 1]})
    graph = b.build([b.conv(y, 2, 3, padding=1, name="post")])
    graph.node("pre").weights["B"] = np.full(4, -0.5, np.float32)  # more zeros
    values = numpy_reference.run(graph, {"x": np.random.default_rng(0).standard_normal(
        (4, 9, 9))})
    windows = np.lib.stride_tricks.sliding_window_view(values["relu"], (3, 3), axis=(1, 2))
    tied = ((windows == 0).sum(axis=(-2, -1)) >= 2) & (windows.max(axis=(-2, -1)) == 0)
    assert tied.sum() >= 10, tied.sum()  # windows whose maximum, 0, is there several times
    check_gradients(graph, ctx)


def test_a_fused_residual_and_activation_on_a_pool(ctx):
    """A pool's epilogue: relu(pool(a) + r): r gets the gradient before the activation."""
    b = Builder(seed=14)
    x = b.input("x", (5, 7, 9))
    a, r = b.conv(x, 6, 1, name="pre"), b.conv(x, 6, 3, stride=2, padding=1, name="side")
    graph = b.build([b._add("AveragePool", [a, r], "layer", {
        "kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "residual": True,
        "activation": {"op": "Elu", "alpha": 0.5}})])
    errors = check_gradients(graph, ctx)
    assert {"d:side", "side.weight", "d:pre"} <= set(errors)


RESIZES = [  # (mode, coordinates, channels, H, W, {"scales" or "sizes": ...})
    ("nearest", "asymmetric", 5, 5, 7, {"scales": [2.0, 2.0]}),
    ("nearest", "asymmetric", 3, 9, 7, {"sizes": [5, 4]}),
    ("nearest", "asymmetric", 6, 5, 7, {"sizes": [8, 11]}),
    ("linear", "pytorch_half_pixel", 5, 5, 7, {"scales": [2.0, 2.0]}),
    ("linear", "pytorch_half_pixel", 3, 9, 7, {"sizes": [5, 11]}),
    ("linear", "align_corners", 5, 5, 7, {"sizes": [9, 13]}),
    ("linear", "align_corners", 4, 9, 9, {"sizes": [4, 5]}),
]


def resize_id(case) -> str:
    mode, coordinates, c, h, w, size = case
    (key, value), = size.items()
    return f"{mode}-{coordinates}-c{c}-{h}x{w}-{key}{'x'.join(str(v) for v in value)}"


@pytest.mark.parametrize("case", RESIZES, ids=resize_id)
def test_resize_gradients_match_torch(case, ctx):
    mode, coordinates, c, h, w, size = case
    b = Builder(seed=8)
    x = b.input("x", (c, h, w))
    a = b.conv(x, c, 3, padding=1, name="pre")
    attrs = {"mode": mode, "coordinate_transformation_mode": coordinates, **size}
    if mode == "nearest":
        attrs["nearest_mode"] = "floor"  # F.interpolate's "nearest"
    y = b._add("Resize", [a], "layer", attrs)
    errors = check_gradients(b.build([b.conv(y, 2, 3, padding=1, name="post")]), ctx)
    assert {"d:pre", "d:layer"} <= set(errors)


def test_upsample_gradients_match_torch(ctx):
    """Upsample (the pre-opset-10 Resize: asymmetric, floor) with a fused activation."""
    b = Builder(seed=13)
    x = b.input("x", (5, 4, 5))
    a = b.conv(x, 5, 3, padding=1, name="pre")
    y = b._add("Upsample", [a], "layer", {"scales": [3.0, 2.0], "activation": {"op": "Relu"}})
    check_gradients(b.build([b.conv(y, 2, 3, stride=2, name="post")]), ctx)


FLOOR_2X = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor", "scales": [2.0, 2.0]}


def test_gradients_through_an_upsampled_add_match_torch(ctx):
    """glcnn.graph.fuse_resize's Add(x, Resize(u)) in one pass: u's gradient is the Resize's."""
    b = Builder(seed=21)
    x = b.input("x", (4, 8, 10))
    low = b.conv(x, 6, 3, stride=2, padding=1, name="low")  # (6, 4, 5), read upscaled
    high = b.conv(x, 6, 1, name="high")
    up = b._add("Resize", [low], "up", FLOOR_2X)
    y = b.conv(b._add("Add", [high, up], "sum"), 2, 3, padding=1, name="post")
    graph = fuse_upsampled_adds(b.build([y]))
    assert graph.node("sum").attrs["upsample"]["op"] == "Resize"
    assert "up" not in {n.name for n in graph.nodes}
    errors = check_gradients(graph, ctx)
    assert {"d:low", "low.weight", "d:high", "high.weight"} <= set(errors)


def test_gradients_through_an_upsampled_conv_match_torch(ctx):
    """glcnn.graph.fuse_resize's Conv reading Resize(u) upscaled: the Trainer runs the Resize as
    a pass of its own again (backward.unfuse_upsamples), so the weight gradient reads the
    upscaled input and u's gradient is the Resize's; backward_graph alone refuses it."""
    b = Builder(seed=23)
    x = b.input("x", (4, 8, 10))
    low = b.conv(x, 8, 3, stride=2, padding=1, name="low")  # (8, 4, 5), read upscaled
    up = b._add("Resize", [low], "up", FLOOR_2X)
    y = b.conv(up, 3, 3, padding=1, name="post")
    graph = fuse_upsampled_convs(b.build([y]))
    assert graph.node("post").attrs["input_upsample"]["op"] == "Resize"
    assert "up" not in {n.name for n in graph.nodes}
    errors = check_gradients(graph, ctx)
    assert {"d:low", "low.weight", "post.weight", "d:post/input_upsample"} <= set(errors)
    with pytest.raises(glcnn.UnsupportedOpError, match="'post'.*fused input_upsample"):
        glcnn.train.backward.backward_graph(graph, "mse")


def concat_graph(axis: int):
    """Two convs concatenated along `axis` (channel counts not multiples of 4; along H or W
    different sizes), then a conv; on the channel axis also the graph input and a repeat."""
    b = Builder(seed=9)
    x = b.input("x", (3, 7, 9))
    if axis == 1:
        a, c = b.conv(x, 3, 1, name="a"), b.conv(x, 5, 3, padding=1, name="c")
        parts = [a, c, x, a]
    else:
        stride = (2, 1) if axis == 2 else (1, 2)
        a, c = b.conv(x, 5, 1, name="a"), b.conv(x, 5, 3, stride=stride, padding=1, name="c")
        parts = [c, a]
    y = b._add("Concat", parts, "layer", {"axis": axis, "activation": {"op": "Tanh"}})
    return b.build([b.conv(y, 2, 3, padding=1, name="post")])


@pytest.mark.parametrize("axis", [1, 2, 3], ids=["channels", "rows", "columns"])
def test_concat_gradients_match_torch(axis, ctx):
    errors = check_gradients(concat_graph(axis), ctx)
    assert {"d:a", "d:c", "d:layer", "a.weight", "c.weight"} <= set(errors)


def gemm(b, x, n, name, trans_b=1, bias=True, activation=None) -> str:
    """An nn.Linear as Gemm (B stored (N, K) with transB = 1, else (K, N))."""
    k = b.shapes[x][0]
    w = b._uniform((n, k), k)
    weights = {"B": w if trans_b else np.ascontiguousarray(w.T)}
    if bias:
        weights["C"] = b._uniform((n,), k)
    attrs = {"transB": trans_b} | ({"activation": {"op": activation}} if activation else {})
    return b._add("Gemm", [x], name, attrs, weights)


def classifier(size=9, classes=10, seed=10):
    """conv -> maxpool -> flatten -> gemm (sigmoid): the small head of the brief."""
    b = Builder(seed=seed)
    x = b.input("x", (3, size, size))
    h = b.conv(x, 6, 3, padding=1, activation="Relu", name="conv")
    h = b._add("MaxPool", [h], "pool", {"kernel_shape": [2, 2], "strides": [2, 2]})
    h = b._add("Flatten", [h], "flat", {"axis": 1})
    return b.build([gemm(b, h, classes, "fc", activation="Sigmoid")])


@pytest.mark.parametrize("loss", ["mse", "bce"])
def test_flatten_and_gemm_gradients_match_torch(loss, ctx):
    """Two Gemms (transB 1 and 0, one without bias) after a Flatten: dX, dW, dB of each."""
    b = Builder(seed=11)
    x = b.input("x", (3, 5, 7))
    h = b.conv(x, 5, 3, stride=2, padding=1, name="pre")
    h = b._add("Flatten", [h], "flat", {"axis": 1})
    h = gemm(b, h, 13, "fc1", trans_b=1, activation="Relu")
    y = gemm(b, h, 6, "fc2", trans_b=0, bias=False, activation="Sigmoid")
    errors = check_gradients(b.build([y]), ctx, loss, batch=2)
    assert {"fc1.weight", "fc1.bias", "fc2.weight", "d:flat", "d:pre", "d:fc1"} <= set(errors)


def test_the_classifier_gradients_and_a_reshape_of_a_vector(ctx):
    check_gradients(classifier(), ctx, "bce")
    b = Builder(seed=12)
    x = b.input("x", (4, 1, 1))
    h = b._add("Reshape", [b.conv(x, 6, 1, name="pre")], "flat", {"shape": [1, -1]})
    check_gradients(b.build([gemm(b, h, 3, "fc")]), ctx)


def test_ten_sgd_steps_of_a_classifier_match_torch(ctx):
    """conv -> maxpool -> flatten -> gemm, BCE on one-hot targets, batch 4, SGD with momentum:
    the per-step losses and the final weights within 1e-3 relative of PyTorch's."""
    graph = classifier()
    settings = dict(lr=0.5, momentum=0.9)
    trainer = glcnn.Trainer(graph, loss="bce", optimizer="sgd", ctx=ctx, **settings)
    reference = TorchGraph(graph)
    torch_opt = torch.optim.SGD(reference.params.values(), **settings)
    rng = np.random.default_rng(3)
    x = rng.random((4, 3, 9, 9)).astype(np.float32)
    target = np.eye(10, dtype=np.float32)[[1, 4, 4, 7]][:, :, None, None]
    losses = []
    for _ in range(10):
        got = trainer.step(x, target)
        torch_opt.zero_grad()
        want, _ = reference.loss(x, target, "bce")
        want.backward()
        torch_opt.step()
        losses.append((got, want.item()))
    assert losses[-1][1] < 0.5 * losses[0][1], losses  # it learns
    loss_errors = [abs(g - w) / abs(w) for g, w in losses]
    assert max(loss_errors) <= 1e-3, losses
    state = trainer.state_dict()
    errors = {k: relative_error(state[k], v.detach().numpy()) for k, v in reference.params.items()}
    assert max(errors.values()) <= 1e-3, errors
    # The trained graph (and its save) holds the Gemm's trained weights in its own layout.
    trained = trainer.trained_graph()
    want = numpy_reference.run(trained, {"x": x[0]})["fc"]
    assert np.abs(trainer.pipeline.run(x[0]) - want).max() < 1e-5
    assert graph.node("fc").weights["B"] is not trained.node("fc").weights["B"]
    trainer.release()
