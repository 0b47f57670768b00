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
    assert ops.count("ActivationGrad") == 4
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
    (lambda b, h: b._add("MaxPool", [h], "pool1", {"kernel_shape": [2, 2]}),
     r"layer 'pool1' \(MaxPool\): training supports Conv"),
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
