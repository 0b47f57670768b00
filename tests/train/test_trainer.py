"""glcnn.Trainer against PyTorch from the same init: 20 steps of SGD with momentum and of Adam
on a small conv / convT autoencoder, batch 4, per-step loss and final weights within 1e-3
relative; the API around it (state_dict, save, pipeline, errors)."""

import numpy as np
import pytest
import torch
from torch_graph import TorchGraph, relative_error

import glcnn
from glcnn import Builder

pytestmark = pytest.mark.gl
TOLERANCE = 1e-3
STEPS = 20


def autoencoder(size=16, channels=(8, 16), act="Relu"):
    """glcnn.models.autoencoder's shape, narrower: 3 -> 8 -> 16 at 1/4 resolution -> 8 -> 3."""
    b = Builder(seed=0)
    x = b.input("image", (3, size, size))
    h = b.conv(x, channels[0], 4, stride=2, padding=1, activation=act, name="enc1")
    h = b.conv(h, channels[1], 4, stride=2, padding=1, activation=act, name="enc2")
    h = b.conv_transpose(h, channels[0], 4, stride=2, padding=1, activation=act, name="dec1")
    y = b.conv_transpose(h, 3, 4, stride=2, padding=1, activation="Sigmoid", name="dec2")
    return b.build([y], meta={"input_range": [0, 1], "output_range": [0, 1]})


OPTIMIZERS = {
    "sgd-momentum": ("sgd", dict(lr=0.05, momentum=0.9), torch.optim.SGD),
    "sgd-nesterov-wd": ("sgd", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=1e-2),
                        torch.optim.SGD),
    "adam": ("adam", dict(lr=1e-3), torch.optim.Adam),
    "adam-wd": ("adam", dict(lr=2e-3, betas=(0.8, 0.99), eps=1e-6, weight_decay=1e-2),
                torch.optim.Adam),
    "adamw": ("adamw", dict(lr=1e-3, weight_decay=0.1), torch.optim.AdamW),
}


CASES = [(name, "mse") for name in OPTIMIZERS] + [("sgd-momentum", "bce"), ("adam", "bce")]


@pytest.mark.parametrize("name,loss", CASES, ids=[f"{n}-{loss}" for n, loss in CASES])
def test_twenty_steps_match_torch(name, loss, ctx):
    optimizer, settings, torch_optimizer = OPTIMIZERS[name]
    graph = autoencoder()
    trainer = glcnn.Trainer(graph, loss=loss, optimizer=optimizer, ctx=ctx, **settings)
    reference = TorchGraph(graph)
    torch_opt = torch_optimizer(reference.params.values(), **settings)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(STEPS):
        x = rng.random((4, 3, 16, 16)).astype(np.float32)
        got = trainer.step(x, x)
        torch_opt.zero_grad()
        want, values = reference.loss(x, x, loss)
        want.backward()
        torch_opt.step()
        losses.append((got, want.item()))
    loss_errors = [abs(g - w) / abs(w) for g, w in losses]
    assert max(loss_errors) <= TOLERANCE, losses
    state = trainer.state_dict()
    errors = {k: relative_error(state[k], v.detach().numpy()) for k, v in reference.params.items()}
    assert max(errors.values()) <= TOLERANCE, errors
    # The pipeline's weights are the training weights after any step, with no other call.
    names = {"weight": "W", "bias": "B"}
    errors = {k: relative_error(trainer.pipeline.weights(k.split(".")[0])[names[k.split(".")[1]]],
                                v.detach().numpy()) for k, v in reference.params.items()}
    assert max(errors.values()) <= TOLERANCE, errors
    # Every tensor's gradient in the last step (its last sample), some drawn on demand by an
    # unfused pass reading the weights that step had (backward.py _fuse_activation_grads).
    errors = {t: relative_error(trainer.gradient(t), values[t].grad.numpy()[-1])
              for t in trainer.backward.meta["gradients"]}
    assert max(errors.values()) <= TOLERANCE, errors
    trainer.release()


def test_state_dict_pipeline_and_save(ctx, tmp_path):
    graph = autoencoder(8)
    trainer = glcnn.Trainer(graph, optimizer="adam", lr=1e-2, ctx=ctx)
    x = np.random.default_rng(2).random((3, 8, 8)).astype(np.float32)
    for _ in range(3):
        trainer.step(x, x)
    state = trainer.state_dict()
    assert {k: v.shape for k, v in state.items()} == {
        "enc1.weight": (8, 3, 4, 4), "enc1.bias": (8,), "enc2.weight": (16, 8, 4, 4),
        "enc2.bias": (16,), "dec1.weight": (16, 8, 4, 4), "dec1.bias": (8,),
        "dec2.weight": (8, 3, 4, 4), "dec2.bias": (3,)}
    assert not np.array_equal(state["enc1.weight"], graph.node("enc1").weights["W"])
    # The pipeline runs on the trained weights: the reference on a graph holding them agrees.
    from glcnn.graph import reference
    trained = trainer.trained_graph()
    want = reference.run(trained, {"image": x})["dec2"]
    assert np.abs(trainer.pipeline.run(x) - want).max() < 1e-5
    path = tmp_path / "model.npz"
    trainer.save(path)
    with glcnn.load(path, ctx=ctx, cache=False) as loaded:
        assert np.abs(loaded.run(x) - want).max() < 1e-5
    assert graph.node("enc1").weights["W"] is not trained.node("enc1").weights["W"]
    trainer.release()


def test_unsupported_layers_and_settings_are_refused_by_name(ctx):
    b = Builder()
    x = b.input("x", (3, 8, 8))
    h = b.conv(x, 4, 3, padding=1, name="c1")
    y = b.batchnorm(h, name="bn1")
    with pytest.raises(glcnn.UnsupportedOpError, match="'bn1'.*BatchNormalization"):
        glcnn.Trainer(b.build([y]), ctx=ctx)
    # A squeeze-excitation gate folded into the conv after it by optimize: no backward yet.
    from glcnn.graph.fuse_gate import fuse_input_gates
    b = Builder()
    x = b.input("x", (8, 6, 6))
    g = b.conv(x, 8, 6, activation="Sigmoid", name="fc")  # (8, 1, 1)
    gated = fuse_input_gates(b.build([b.conv(b.mul(x, g), 4, 1, name="out")]))
    assert gated.node("out").attrs.get("input_gate")
    with pytest.raises(glcnn.UnsupportedOpError, match="'out'.*fused input_gate"):
        glcnn.Trainer(gated, ctx=ctx)
    graph = autoencoder(8)
    with pytest.raises(glcnn.GlcnnError, match="optimizer 'rmsprop' unknown"):
        glcnn.Trainer(graph, optimizer="rmsprop", ctx=ctx)
    with pytest.raises(glcnn.GlcnnError, match="loss 'huber' unknown"):
        glcnn.Trainer(graph, loss="huber", ctx=ctx)
    with pytest.raises(glcnn.GlcnnError, match="expected numbers"):
        glcnn.Trainer(graph, lr="fast", ctx=ctx)
    with pytest.raises(glcnn.GlcnnError, match=r"betas=\(0.9, 1.5\) in \[0, 1\)"):
        glcnn.Trainer(graph, optimizer="adam", betas=(0.9, 1.5), ctx=ctx)
    with pytest.raises(glcnn.GlcnnError, match="nesterov"):
        glcnn.Trainer(graph, nesterov=True, ctx=ctx)
    trainer = glcnn.Trainer(graph, ctx=ctx)
    with pytest.raises(glcnn.ShapeError, match="expected"):
        trainer.step(np.zeros((3, 8, 8)), np.zeros((3, 4, 4)))
    with pytest.raises(glcnn.ShapeError, match="NaN"):
        trainer.step(np.full((3, 8, 8), np.nan), np.zeros((3, 8, 8)))
    with pytest.raises(glcnn.GlcnnError, match="no gradient of 'image'"):
        trainer.gradient("image")
    trainer.release()


def test_gradient_textures_hold_torch_gradients(ctx):
    """What the training window draws with `g`: a tensor's gradient texture (atlas layout)
    and a weight's (its filter layout, interleaved from the lane-blocked targets) hold
    PyTorch's gradients."""
    from glcnn.layout import unpack
    from glcnn.train.weights import from_layout

    graph = autoencoder(12, channels=(8, 12))
    trainer = glcnn.Trainer(graph, optimizer="sgd", lr=0.0, ctx=ctx)
    reference = TorchGraph(graph)
    x = np.random.default_rng(3).random((3, 12, 12)).astype(np.float32)
    trainer.step(x, x)
    want, values = reference.loss(x[None], x[None])
    want.backward()
    tex = trainer.gradient_texture("enc1.weight")
    height, width, _ = trainer.pipeline.weight_layout("enc1")
    layout = np.frombuffer(tex.read(), np.float32).reshape(tex.height, tex.width, 4)
    got = from_layout(trainer._forward_op("enc1"), "W", layout[:height, :width])
    assert relative_error(got, reference.params["enc1.weight"].grad.numpy()) < 1e-5
    grad = trainer.gradient_texture("enc2")
    data = np.frombuffer(grad.read(), np.float32).reshape(grad.height, grad.width, 4)
    assert relative_error(unpack(data, trainer.pipeline.shapes["enc2"]),
                          values["enc2"].grad.numpy()[0]) < 1e-5
    with pytest.raises(glcnn.GlcnnError, match="no gradient of 'nope'.*'enc1.weight'"):
        trainer.gradient_texture("nope")
    trainer.release()
