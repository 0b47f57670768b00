"""The backward graph (glcnn/train/backward.py), GL-free: its nodes, the weights it trains, and
the layers it refuses, each named."""

import numpy as np
import pytest

from glcnn import Builder, UnsupportedOpError, models
from glcnn.graph import reference
from glcnn.train.backward import backward_graph
from glcnn.train.weights import from_layout


def test_the_autoencoders_backward_graph():
    graph, params = backward_graph(models.autoencoder(16), "mse")
    ops = [n.op for n in graph.nodes]
    assert ops[:2] == ["LossSum", "LossGrad"]
    assert ops.count("ConvGradWeight") == 4 and ops.count("ConvGradBias") == 4
    # Each activation's gradient folded into the op computing the layer's output gradient,
    # which stays, unfused, for Trainer.gradient to draw on demand.
    assert ops.count("ActivationGrad") == 0
    assert [(n.name, n.op, n.attrs["output_grad"]["op"]) for n in graph.nodes
            if n.attrs.get("output_grad")] == [
        ("dz:dec2", "LossGrad", "Sigmoid"), ("dz:dec1", "Conv", "Relu"),
        ("dz:enc2", "Conv", "Relu"), ("dz:enc1", "ConvTranspose", "Relu")]
    assert graph.meta["on_demand"] == ["grad:dec2", "dx:dec2", "dx:dec1", "dx:enc2"]
    # Input gradients: dec2 (ConvTranspose) -> Conv, ..., enc2 (Conv) -> ConvTranspose; none
    # for enc1, whose input is the image.
    assert [n.name for n in graph.nodes if n.name.startswith("dx:")] == [
        "dx:dec2", "dx:dec1", "dx:enc2"]
    assert graph.node("dx:dec2").op == "Conv" and graph.node("dx:enc2").op == "ConvTranspose"
    assert [p.torch_name for p in params] == [
        "enc1.weight", "enc1.bias", "enc2.weight", "enc2.bias", "dec1.weight", "dec1.bias",
        "dec2.weight", "dec2.bias"]
    assert set(graph.meta["gradients"]) == {"enc1", "enc2", "dec1", "dec2"}


def test_weight_gradients_come_back_in_pytorch_layouts():
    """The reference weight gradient, laid out as the GPU holds it and read back with
    from_layout, is the reference gradient itself (grouped ConvTranspose: the awkward view)."""
    from glcnn.ops import build_ops
    from glcnn.train.reference import conv_grad_weight
    b = Builder(seed=1)
    x = b.input("x", (4, 5, 5))
    a = b.conv(x, 4, 1, name="pre")
    forward = b.build([b.conv_transpose(a, 6, 3, stride=2, padding=1, groups=2, name="up")])
    graph, params = backward_graph(forward, "mse")
    rng = np.random.default_rng(0)
    values = reference.run(forward, {"x": rng.standard_normal((4, 5, 5))})
    values["target"] = rng.random(values["up"].shape)
    out = reference.run(graph, {n: values[n] for n in graph.inputs})
    op = build_ops(forward)[0][1]
    got = from_layout(op, "W", out["grad:up.weight"].transpose(1, 2, 0))
    want = conv_grad_weight(values["pre"], out["grad:up"], (4, 3, 3, 3), "ConvTranspose",
                            (2, 2), (1, 1, 1, 1), (1, 1), 2)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def _graph(layer):
    b = Builder()
    x = b.input("x", (4, 8, 8))
    h = b.conv(x, 4, 3, padding=1, name="c1")
    return b, layer(b, h)


@pytest.mark.parametrize("layer,message", [
    (lambda b, h: b.batchnorm(h, name="bn1"),
     r"layer 'bn1' \(BatchNormalization\): training supports Conv"),
    (lambda b, h: b._add("Gemm", [b._add("Flatten", [h], "f")], "fc", {"alpha": 2.0, "transB": 1},
                         {"B": np.ones((3, 256), np.float32), "C": np.zeros(3, np.float32)}),
     r"layer 'fc' \(Gemm\): training needs alpha = beta = 1"),
    (lambda b, h: b.activation(h, "HardSwish", name="hs"), r"layer 'hs' \(HardSwish\)"),
    (lambda b, h: b.activation(h, "LeakyRelu", name="lr", alpha=-0.5), r"'lr'.*alpha=-0.5"),
    (lambda b, h: b.conv(h, 4, 3, padding=1, activation="HardSigmoid", name="c2"),
     r"layer 'c2' \(Conv\+HardSigmoid\).*activation 'HardSigmoid'"),
])
def test_layers_it_cannot_train_are_named(layer, message):
    b, y = _graph(layer)
    with pytest.raises(UnsupportedOpError, match=message):
        backward_graph(b.build([y]), "mse")


def test_a_fused_input_activation_is_refused():
    b, y = _graph(lambda b, h: b.conv(h, 4, 3, padding=1, name="c2"))
    graph = b.build([y])
    graph.node("c2").attrs["input_activation"] = {"op": "Relu"}
    with pytest.raises(UnsupportedOpError, match="'c2'.*fused input_activation"):
        backward_graph(graph, "mse")


def _heads_graph():
    """Every layer of phase 2 once: concat, pools, resize, flatten, two Gemms."""
    b = Builder(seed=2)
    x = b.input("x", (3, 7, 9))
    a = b.conv(x, 5, 3, padding=1, name="a")
    c = b._add("Concat", [a, x], "cat", {"axis": 1})
    h = b._add("MaxPool", [c], "mp", {"kernel_shape": [3, 3], "strides": [2, 2],
                                      "pads": [1, 1, 1, 1]})
    h = b._add("Resize", [h], "up", {"mode": "linear", "sizes": [7, 9],
                                     "coordinate_transformation_mode": "align_corners"})
    h = b._add("AveragePool", [h], "ap", {"kernel_shape": [2, 2], "strides": [2, 2]})
    h = b._add("Flatten", [h], "flat")
    rng = np.random.default_rng(0)
    h = b._add("Gemm", [h], "fc1", {"transB": 1, "activation": {"op": "Relu"}},
               {"B": rng.standard_normal((6, 96)).astype(np.float32) / 10,
                "C": np.full(6, 0.1, np.float32)})
    y = b._add("Gemm", [h], "fc2", {}, {"B": rng.standard_normal((6, 4)).astype(np.float32)})
    return b.build([y])


def test_the_backward_graph_of_pools_resize_concat_and_gemm():
    graph, params = backward_graph(_heads_graph(), "mse")
    made = {n.name: n.op for n in graph.nodes}
    assert made["dx:fc2"] == made["dx:fc1"] == "GemmGradInput"
    assert graph.node("dx:fc2").inputs[1] == "weights:fc2" and "weights:fc2" in graph.inputs
    assert made["grad:fc1.weight"] == "GemmGradWeight" and made["grad:fc1.bias"] == "ConvGradBias"
    assert made["dx:flat"] == "Rearrange" and made["dx:ap"] == made["dx:mp"] == "PoolGrad"
    assert made["dx:up"] == "ResizeGrad" and made["dx:cat:0"] == "Slice"
    assert "dx:cat:1" not in made  # the graph input gets no gradient
    assert [p.torch_name for p in params] == ["a.weight", "a.bias", "fc1.weight", "fc1.bias",
                                              "fc2.weight"]


def test_the_numpy_reference_of_the_new_gradients_is_torchs():
    """glcnn.train.reference evaluates the backward graph: every tensor's gradient and every
    weight gradient (read back through from_layout) is PyTorch autograd's."""
    from torch_graph import TorchGraph, relative_error

    from glcnn.layout import pack_matrix
    from glcnn.ops import build_ops
    from glcnn.train.backward import from_layout
    forward = _heads_graph()
    graph, params = backward_graph(forward, "mse")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 7, 9))
    values = reference.run(forward, {"x": x}) | {"target": rng.random((4, 1, 1))}
    for layer in ("fc1", "fc2"):  # the Gemms' weight layouts, as the GPU's textures hold them
        b = forward.node(layer).weights["B"]
        matrix = b if forward.node(layer).attrs.get("transB") else b.T
        values[f"weights:{layer}"] = pack_matrix(matrix).transpose(2, 0, 1)
    out = reference.run(graph, {n: values[n] for n in graph.inputs})
    torch_graph = TorchGraph(forward)
    torch_loss, tensors = torch_graph.loss(x[None], values["target"][None])
    torch_loss.backward()
    for tensor, grad in graph.meta["gradients"].items():
        assert relative_error(out[grad], tensors[tensor].grad.numpy()[0]) < 1e-9, tensor
    ops = dict(zip((n.name for n in forward.nodes), build_ops(forward)[0]))
    for p in params:
        got = from_layout(ops[p.layer], p.key, out[p.grad].transpose(1, 2, 0))
        assert relative_error(got, torch_graph.params[p.torch_name].grad.numpy()) < 1e-6, p
