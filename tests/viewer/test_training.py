"""Live training under Xvfb: the training window (glcnn.viewer.training) trains the 32²
autoencoder from scratch on synthetic frames; checked against numpy (glcnn.graph.reference):
the loss falls, the held-out PSNR rises above PSNR_MIN, and a filter zeroed with the `z` key
while it trains grows back. Its screenshots at step 0 and at the end become
docs/train_step0.png and docs/train_after.png.

The window runs in a process of its own (`python tests/viewer/test_training.py OUT_DIR`, the
`drive` function below), as the glfw window must exist before any headless EGL context
(DESIGN.md §5).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from glcnn.commands.train import training_graph
from glcnn.errors import GlcnnError
from glcnn.graph import models, reference
from glcnn.importers import load_graph
from glcnn.viewer.panels import BOTTOM, GAP, LABEL_H, PANEL, STATUS_H
from glcnn.viewer.sources import SyntheticSource
from glcnn.viewer.training import HELD_OUT, FramePool, Options, TrainingViewer
from glcnn.viewer.window import WINDOW

pytestmark = pytest.mark.gl

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {"optimizer": "adam", "lr": 2e-3}
ZERO_AT, STEPS = 150, 300  # the `z` key after step ZERO_AT; STEPS in all
SHOWN = "enc1"  # the layer in the activation and filter panels
# The filter zeroed: output channel 0 (red) of the Sigmoid output layer. A ReLU layer's zeroed
# channel (filter and bias) stays dead: its pre-activation is exactly 0, where ReLU's gradient
# is 0 (as PyTorch's), so only the optimiser's momentum moves it a little.
LAYER, CHANNEL = "dec2", 0
PSNR_MIN = 22.0  # dB on the HELD_OUT synthetic frames after STEPS steps (measured: see README)


def drive(out: Path) -> None:
    """Train in the window; write step0.png, after.png, trained.npz and run.json to `out`."""
    graph = training_graph("autoencoder", from_scratch=True)
    options = Options(SETTINGS, STEPS, layer=SHOWN)
    norms = []
    with TrainingViewer(graph, SyntheticSource(), options) as viewer:
        glfw = viewer.glfw

        def frame(shot=None):
            viewer.step()
            if shot:
                viewer.screenshot(out / shot)
            glfw.swap_buffers(viewer.window)
            glfw.poll_events()

        def norm():
            w = viewer.trainer.weights(LAYER)
            return float(np.sqrt((w["W"][:, CHANNEL] ** 2).sum() + w["B"][CHANNEL] ** 2))

        frame("step0.png")
        while viewer.trainer.steps < ZERO_AT:
            frame()
        norms.append(norm())
        viewer.layer, viewer.channel = LAYER, CHANNEL
        viewer._on_key(viewer.window, glfw.KEY_Z, glfw.get_key_scancode(glfw.KEY_Z),
                       glfw.PRESS, 0)
        viewer.layer, viewer.channel = SHOWN, 0
        norms.append(norm())
        while viewer.trainer.steps < STEPS - 1:
            frame()
        frame("after.png")
        norms.append(norm())
        viewer.trainer.save(out / "trained.npz")
        (out / "run.json").write_text(json.dumps({"losses": viewer.losses, "norms": norms}))


@pytest.fixture(scope="module")
def run(display, tmp_path_factory):
    out = tmp_path_factory.mktemp("training")
    done = subprocess.run([sys.executable, __file__, str(out)], cwd=out, capture_output=True,
                          text=True, timeout=900, env={**os.environ, "DISPLAY": display})
    assert done.returncode == 0, done.stdout[-1000:] + done.stderr[-4000:]
    return out, json.loads((out / "run.json").read_text())


def held_out_psnr(graph) -> float:
    """PSNR of numpy's reconstructions of the HELD_OUT synthetic frames."""
    source, (name, shape) = SyntheticSource(), next(iter(graph.inputs.items()))
    pool = FramePool(source, shape, graph.meta)
    errors = []
    for i in HELD_OUT:
        x = pool.prepare(source.frame(i))
        y = reference.run(graph, {name: x})[graph.outputs[0]]
        errors.append(np.mean((np.asarray(y).reshape(x.shape) - x) ** 2))
    return float(10 * np.log10(1 / np.mean(errors)))


def test_training_window_loss_falls_and_held_out_psnr_rises(run):
    out, result = run
    losses = np.array(result["losses"])
    assert len(losses) == STEPS and np.isfinite(losses).all()
    first, last = losses[:10].mean(), losses[-30:].mean()
    assert last < 0.25 * first, (first, last)
    before = held_out_psnr(models.autoencoder(32))  # the init the window started from
    after = held_out_psnr(load_graph(out / "trained.npz"))
    assert after > PSNR_MIN and after > before + 6, (before, after)


def test_zeroed_filter_recovers_while_training(run):
    _, result = run
    before, zeroed, end = result["norms"]
    assert before > 0.1 and zeroed == 0.0, result["norms"]
    assert end > 0.3 * before, result["norms"]


def test_screenshots_show_training(run):
    out, _ = run
    images = [np.asarray(Image.open(out / name).convert("RGB")).astype(np.int16)
              for name in ("step0.png", "after.png")]
    for image in images:
        assert image.shape == (WINDOW[1], WINDOW[0], 3)
        for i in range(4):  # every panel labelled
            x0, top = GAP + i * (PANEL + GAP), WINDOW[1] - (BOTTOM + GAP + PANEL)
            assert (image[top - LABEL_H:top, x0:x0 + PANEL].min(axis=2) > 150).sum() > 100, i
        assert (image[WINDOW[1] - STATUS_H:].min(axis=2) > 100).sum() > 300
    top = WINDOW[1] - (BOTTOM + GAP + PANEL)
    output = [image[top:top + PANEL, GAP + PANEL + GAP:][:, :PANEL] for image in images]
    assert np.abs(output[0] - output[1]).mean() > 5  # the reconstruction changed
    for name, doc in (("step0.png", "train_step0.png"), ("after.png", "train_after.png")):
        shutil.copy(out / name, ROOT / "docs" / doc)


def test_bending_edits_the_training_weights(ctx):
    """Bender through TrainingWeights (what the window's keys use) changes what the Trainer
    trains and runs: state_dict, pipeline.weights and the forward pass (against numpy)."""
    from glcnn.train import Trainer
    from glcnn.viewer.bending import Bender
    from glcnn.viewer.training import TrainingWeights
    x = np.random.default_rng(0).random((2, 3, 8, 8), dtype=np.float32)
    with Trainer(models.autoencoder(8), optimizer="adam", lr=1e-2, ctx=ctx) as trainer:
        trainer.step(x, x)
        bender = Bender(TrainingWeights(trainer))
        before = trainer.weights("dec2")["W"]
        bender.zero("dec2", 1)
        state = trainer.state_dict()
        assert not state["dec2.weight"][:, 1].any() and state["dec2.bias"][1] == 0
        assert np.array_equal(trainer.pipeline.weights("dec2")["W"], state["dec2.weight"])
        assert np.array_equal(trainer.weights("enc1")["W"], state["enc1.weight"])
        assert np.array_equal(trainer.pipeline.weights("enc1")["W"], state["enc1.weight"])
        y = trainer.pipeline.run(x[0])
        expected = reference.run(trainer.trained_graph(), {"image": x[0]})["dec2"]
        np.testing.assert_allclose(np.asarray(y).reshape(expected.shape), expected, atol=1e-5)
        assert abs(float(np.asarray(y).reshape(expected.shape)[1].mean()) - 0.5) < 1e-6
        trainer.step(x, x)
        assert trainer.state_dict()["dec2.weight"][:, 1].any()  # training goes on from it
        bender.undo()  # back to the trained weights before the edit
        assert np.array_equal(trainer.state_dict()["dec2.weight"], before)


def test_from_scratch_is_the_builders_seeded_init():
    graph, built = training_graph("autoencoder", from_scratch=True), models.autoencoder(32)
    assert graph.inputs == built.inputs
    for node, same in zip(graph.nodes, built.nodes, strict=True):
        assert node.weights.keys() == same.weights.keys()
        for key, value in same.weights.items():
            assert np.array_equal(node.weights[key], value), (node.name, key)


def test_a_model_that_cannot_reconstruct_its_input_is_refused():
    with pytest.raises(GlcnnError, match="training reconstructs the input"):
        training_graph("dcgan_shapes")


def test_cli_trains_without_window_and_saves(tmp_path):
    saved = tmp_path / "ae.npz"
    done = subprocess.run([sys.executable, "-m", "glcnn.cli", "train", "autoencoder",
                           "--no-window", "--steps", "3", "--from-scratch", "--save", str(saved)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "3 steps in" in done.stderr and "held-out PSNR" in done.stderr
    graph = load_graph(saved)
    assert next(iter(graph.inputs.values())) == (3, 32, 32)
    init = models.autoencoder(32)
    assert not np.array_equal(graph.node("enc1").weights["W"], init.node("enc1").weights["W"])


def test_cli_view_train_screenshot(display, tmp_path):
    shot = tmp_path / "shot.png"
    done = subprocess.run([sys.executable, "-m", "glcnn.cli", "view", "autoencoder", "--train",
                           "--frames", "2", "--screenshot", str(shot)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "DISPLAY": display})
    assert done.returncode == 0, done.stderr
    assert "2 steps in" in done.stderr
    assert Image.open(shot).size == WINDOW


def test_cli_no_window_needs_a_stop(tmp_path):
    done = subprocess.run([sys.executable, "-m", "glcnn.cli", "train", "autoencoder",
                           "--no-window"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "--no-window needs --steps N or --seconds S" in done.stderr


if __name__ == "__main__":
    drive(Path(sys.argv[1]))
