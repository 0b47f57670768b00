"""Gradient parity with PyTorch autograd (float64) for every backward op, per gradient tensor:
weights, biases and the input gradient of the layer under test (it reads the output of a 1×1
conv, so that gradient is computed), fp32 on the GPU, relative error ≤ 1e-4."""

import numpy as np
import pytest
from torch_graph import TorchGraph, relative_error

import glcnn
from glcnn import Builder

pytestmark = pytest.mark.gl
TOLERANCE = 1e-4

# (kind, in channels, out channels, kernel, stride, padding, dilation, groups, H, W,
#  activation, loss)
CASES = [
    ("Conv", 5, 6, 3, 1, 1, 1, 1, 9, 7, "Relu", "mse"),
    ("Conv", 5, 6, 3, 2, 1, 1, 1, 9, 7, None, "mse"),
    ("Conv", 3, 8, 4, 2, 1, 1, 1, 11, 13, "LeakyRelu", "l1"),
    ("Conv", 6, 5, 3, 1, 2, 2, 1, 9, 9, "Elu", "mse"),
    ("Conv", 4, 6, 3, 2, 1, 1, 2, 9, 7, "Tanh", "mse"),
    ("Conv", 8, 8, 3, 1, 1, 1, 2, 7, 7, "Relu", "mse"),
    ("Conv", 6, 6, 3, 2, 1, 1, 6, 9, 11, "Relu", "mse"),
    ("Conv", 5, 5, 5, 1, 2, 1, 5, 7, 9, "Sigmoid", "bce"),
    ("ConvTranspose", 5, 6, 3, 1, 1, 1, 1, 7, 9, "Relu", "mse"),
    ("ConvTranspose", 6, 3, 4, 2, 1, 1, 1, 5, 7, "Sigmoid", "bce"),
    ("ConvTranspose", 5, 4, 3, 2, 0, 2, 1, 5, 5, "Tanh", "mse"),
    ("ConvTranspose", 4, 6, 3, 2, 1, 1, 2, 5, 7, "LeakyRelu", "l1"),
    ("ConvTranspose", 6, 6, 3, 2, 1, 1, 6, 5, 5, None, "mse"),
    ("ConvTranspose", 8, 8, 4, 2, 1, 1, 2, 6, 6, "Elu", "mse"),
]


def case_id(case) -> str:
    kind, ci, co, k, s, p, d, g, h, w, act, loss = case
    return (f"{'convT' if kind == 'ConvTranspose' else 'conv'}-c{ci}-o{co}-k{k}-s{s}-p{p}-d{d}"
            f"-g{g}-{h}x{w}-{act or 'linear'}-{loss}")


def layer_graph(kind, ci, co, k, s, p, d, g, h, w, act, output_padding=0):
    b = Builder(seed=3)
    x = b.input("x", (ci, h, w))
    a = b.conv(x, ci, 1, name="pre")
    if kind == "Conv":
        y = b.conv(a, co, k, stride=s, padding=p, dilation=d, groups=g, activation=act,
                   name="layer")
    else:
        y = b.conv_transpose(a, co, k, stride=s, padding=p, dilation=d, groups=g,
                             output_padding=output_padding, activation=act, name="layer")
    return b.build([y])


def check_gradients(graph, ctx, loss="mse", batch=1, seed=0):
    """Train one step with lr 0 and compare every weight gradient and every forward tensor's
    gradient (of the last sample) with PyTorch's."""
    trainer = glcnn.Trainer(graph, loss=loss, optimizer="sgd", lr=0.0, ctx=ctx)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, *graph.inputs["x"])).astype(np.float32)
    target = rng.random((batch, *trainer.shapes["target"])).astype(np.float32)
    value = trainer.step(x, target)
    reference = TorchGraph(graph)
    torch_loss, tensors = reference.loss(x, target, loss)
    torch_loss.backward()
    errors = {name: relative_error(got, reference.params[name].grad.numpy())
              for name, got in trainer.gradients().items()}
    for tensor in trainer.backward.meta["gradients"]:
        errors[f"d:{tensor}"] = relative_error(trainer.gradient(tensor),
                                               tensors[tensor].grad.numpy()[-1])
    errors["loss"] = abs(value - torch_loss.item()) / abs(torch_loss.item())
    trainer.release()
    bad = {k: v for k, v in errors.items() if not v <= TOLERANCE}
    assert not bad, f"relative errors over {TOLERANCE}: {bad} (all: {errors})"
    return errors


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_conv_gradients_match_torch(case, ctx):
    kind, ci, co, k, s, p, d, g, h, w, act, loss = case
    errors = check_gradients(layer_graph(kind, ci, co, k, s, p, d, g, h, w, act), ctx, loss)
    assert {"layer.weight", "layer.bias", "pre.weight", "d:pre", "d:layer"} <= set(errors)


def test_output_padding_and_a_batch_average(ctx):
    graph = layer_graph("ConvTranspose", 4, 5, 3, 2, 1, 1, 1, 5, 6, "Relu", output_padding=1)
    check_gradients(graph, ctx, batch=3)


@pytest.mark.parametrize("op", ["Relu", "LeakyRelu", "Sigmoid", "Tanh", "Elu"])
def test_standalone_activations_and_add(op, ctx):
    """A residual block of standalone layers: x -> conv -> act -> conv, + the conv's input
    (a tensor with two readers: its gradient is the sum of both)."""
    b = Builder(seed=4)
    x = b.input("x", (6, 7, 9))
    a = b.conv(x, 6, 3, padding=1, name="pre")
    h = b.activation(b.conv(a, 6, 3, padding=1, name="c1"), op, name="act",
                     **({"alpha": 0.2} if op in ("LeakyRelu", "Elu") else {}))
    h = b.conv(h, 6, 3, padding=1, name="c2")
    y = b.add(h, a, name="sum")
    check_gradients(b.build([y]), ctx)


@pytest.mark.parametrize(("residual", "act"), [(True, "Relu"), ("after", "Relu"),
                                               ("after", "Sigmoid"), ("after", "Tanh")])
def test_a_fused_residual_conv(ctx, residual, act):
    """act(conv + r), and act(conv) + r (the residual added after the activation, as
    glcnn.graph.passes fuses YOLO's bottlenecks): the activation's derivative is read from
    its output, the sum less r."""
    b = Builder(seed=5)
    x = b.input("x", (4, 6, 6))
    a = b.conv(x, 4, 1, name="pre")
    graph = b.build([b.conv(a, 4, 3, padding=1, name="layer")])
    layer = graph.node("layer")
    layer.inputs.append("pre")
    layer.attrs |= {"residual": residual, "activation": {"op": act}}
    check_gradients(graph, ctx)


def test_sums_over_4096_terms_are_cut_into_chunks(ctx):
    """A 70×70 image: the weight and bias gradients and the loss sum 4900 terms per texel,
    drawn as two chunks added by blending."""
    check_gradients(layer_graph("Conv", 3, 4, 3, 1, 1, 1, 1, 70, 70, "Sigmoid"), ctx, "bce")


@pytest.mark.parametrize("stride,folded", [(1, True), (2, False)])
def test_transposed_bias_gradients_over_chunks(ctx, stride, folded):
    """A ConvTranspose on 70×70: its weight gradient's pass sums the bias gradient too where
    each chunk of x rows reaches at most 4096 dZ terms (stride 1, pad 1), else the bias keeps
    its own pass (stride 2: 4× the terms)."""
    from glcnn.ops import build_ops
    from glcnn.train.backward import backward_graph
    from glcnn.train.grad_ops import ConvGradWeight
    graph = layer_graph("ConvTranspose", 3, 4, 3, stride, 1, 1, 1, 70, 70, "Tanh")
    ops, _ = build_ops(backward_graph(graph, "mse")[0])
    weight = next(op for op in ops if isinstance(op, ConvGradWeight)
                  and op.node.name == "grad:layer.weight")
    assert weight.sums_bias() == folded
    check_gradients(graph, ctx, batch=2)


@pytest.mark.parametrize("kind", ["Conv", "ConvTranspose"])
def test_layers_without_a_bias(ctx, kind):
    """No bias to train: no bias gradient, in a pass or in the weight gradient's rows."""
    b = Builder(seed=4)
    a = b.conv(b.input("x", (5, 9, 8)), 8, 1, bias=False, name="pre")
    make = b.conv if kind == "Conv" else b.conv_transpose
    graph = b.build([make(a, 6, 3, stride=2, padding=1, bias=False, activation="Relu",
                          name="layer")])
    errors = check_gradients(graph, ctx)
    assert not any(name.endswith(".bias") for name in errors)


def test_reference_evaluators_agree_with_torch_and_the_gpu(ctx):
    """glcnn.train.reference (the backward ops' numpy reference) evaluates the backward graph:
    its weight gradients are PyTorch's, and every backward tensor the GPU computed is its."""
    from glcnn.graph import reference
    from glcnn.train.weights import from_layout
    graph = layer_graph("ConvTranspose", 4, 6, 3, 2, 1, 1, 2, 5, 7, "Tanh")
    trainer = glcnn.Trainer(graph, optimizer="sgd", lr=0.0, ctx=ctx)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(graph.inputs["x"]).astype(np.float32)
    target = rng.random(trainer.shapes["target"]).astype(np.float32)
    trainer.step(x, target)
    forward = reference.run(graph, {"x": x}) | {"target": target}
    values = reference.run(trainer.backward, {n: forward[n] for n in trainer.backward.inputs})
    torch_ref = TorchGraph(graph)
    torch_ref.loss(x[None], target[None])[0].backward()
    for param in trainer.params:
        got = from_layout(trainer._forward_op(param.layer), param.key,
                          values[param.grad].transpose(1, 2, 0))
        want = torch_ref.params[param.torch_name].grad.numpy()
        assert relative_error(got, want) < 1e-6  # float32 layouts
    for node in trainer.backward.nodes:
        assert relative_error(trainer._read(node.name), values[node.name]) <= TOLERANCE, node
    trainer.release()


# The "output_grad" epilogue (glcnn/train/backward.py folds each ActivationGrad into the op
# computing the gradient it reads): the op's result times f'(y) of the forward output y, its
# last input, against the numpy reference and PyTorch's derivative; blocked and direct.
OUTPUT_GRADS = [("Relu", None), ("LeakyRelu", 0.2), ("Sigmoid", None), ("Tanh", None),
                ("Elu", 0.7)]


@pytest.mark.parametrize("strategy", ["blocked", "direct"])
@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
@pytest.mark.parametrize("act,alpha", OUTPUT_GRADS, ids=[a for a, _ in OUTPUT_GRADS])
def test_output_grad_epilogue(ctx, op, act, alpha, strategy):
    import torch
    from helpers import check_op, random_inputs
    attrs = {"strides": [2, 2], "pads": [1, 1, 1, 1], "filters_transposed": True,
             "output_grad": {"op": act} | ({"alpha": alpha} if alpha else {})}
    if op == "ConvTranspose":
        attrs["output_padding"] = [1, 1]
    rng = np.random.default_rng(3)
    w = rng.standard_normal((12, 8, 4, 4) if op == "Conv" else (8, 12, 4, 4)).astype(np.float32)
    x_shape = (8, 16, 18) if op == "Conv" else (8, 7, 9)
    out_shape = (12, 8, 9) if op == "Conv" else (12, 15, 19)
    dy, y = random_inputs([x_shape, out_shape], 5)
    if act in ("Sigmoid",):
        y = 1 / (1 + np.exp(-y))  # outputs the activation can give
    elif act == "Tanh":
        y = np.tanh(y)
    check_op(ctx, op, attrs, [x_shape, out_shape], {"W": w}, inputs=[dy, y], strategy=strategy)
    # The derivative itself: PyTorch's, at an input z with f(z) = y.
    from glcnn.graph.reference_ops import activation_grad
    z = torch.tensor(rng.standard_normal((4, 5, 6)), requires_grad=True)
    f = {"Relu": torch.relu, "Sigmoid": torch.sigmoid, "Tanh": torch.tanh,
         "LeakyRelu": lambda v: torch.nn.functional.leaky_relu(v, alpha or 0.0),
         "Elu": lambda v: torch.nn.functional.elu(v, alpha or 0.0)}[act]
    out = f(z)
    g = torch.tensor(rng.standard_normal((4, 5, 6)))
    out.backward(g)
    want = z.grad.numpy()
    assert np.abs(activation_grad(act, g.numpy(), out.detach().numpy(), alpha) - want).max() < 1e-12


@pytest.mark.parametrize("attrs,message", [
    ({"output_grad": {"op": "Softplus"}}, "output_grad .*expected one of Relu"),
    ({"output_grad": {"op": "Relu"}, "activation": {"op": "Relu"}}, "no activation, residual"),
    ({"output_grad": {"op": "Elu", "alpha": -1.0}}, "alpha=-1.0 must be > 0"),
])
def test_output_grad_refused(attrs, message):
    from glcnn.graph import Node
    from glcnn.ops import make_op
    node = Node("Conv", "dz:y", ["g", "y"], attrs, {"W": np.ones((4, 4, 1, 1), np.float32)})
    with pytest.raises(glcnn.UnsupportedOpError, match=message):
        make_op(node, [(4, 3, 3), (4, 3, 3)])


def test_output_grad_needs_the_forward_outputs_shape():
    from glcnn.graph import Node
    from glcnn.ops import make_op
    node = Node("Conv", "dz:y", ["g", "y"], {"output_grad": {"op": "Relu"}},
                {"W": np.ones((4, 4, 1, 1), np.float32)})
    with pytest.raises(glcnn.GlcnnError, match=r"forward output has shape \(4, 2, 3\), "
                                                r"expected \(4, 3, 3\)"):
        make_op(node, [(4, 3, 3), (4, 2, 3)])
