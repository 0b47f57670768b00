"""Live training under Xvfb: the training window (glcnn.viewer.training) trains the 32²
autoencoder from scratch on synthetic frames; checked against numpy (glcnn.graph.reference):
the loss falls, the held-out PSNR rises above PSNR_MIN, and a filter zeroed with the `z` key
while it trains grows back. Then, paused, the `g` key shows gradients: the layer and filter
panels are checked texel by texel against PyTorch autograd (tests/train/torch_graph.py) on the
weights and batch of the last step. Its screenshots at step 0, at the end and with gradients
on become docs/train_step0.png, docs/train_after.png and docs/train_gradients.png.

The window runs in a process of its own (`python tests/viewer/test_training.py OUT_DIR`, the
`drive` function below), as the glfw window must exist before any headless EGL context
(DESIGN.md §5).
"""

import io
import json
import os
import shutil
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from glcnn.commands.train import training_graph
from glcnn.errors import GlcnnError
from glcnn.graph import models, reference
from glcnn.graph.builder import Builder
from glcnn.importers import load_graph
from glcnn.viewer import training, window
from glcnn.viewer.filters import FilterBank
from glcnn.viewer.labels import describe_no_gradient
from glcnn.viewer.panels import BOTTOM, GAP, LABEL_H, PANEL, STATUS_H, panel_box, panel_rect
from glcnn.viewer.sources import SyntheticSource
from glcnn.viewer.training import HELD_OUT, FramePool, Options, TrainingViewer
from glcnn.viewer.window import KEYS, WINDOW, key_name

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
# Paused after the last step, the keys pressed before each screenshot <name>.png:
GRADIENT_FRAMES = [((), "paused"),  # enc1's activations and filters
                   (("g",), "grad_enc1"),  # dL/d enc1, dL/d enc1.weight (RGB tiles)
                   (("]",), "grad_enc2"),  # dL/d enc2, dL/d enc2.weight (grey tiles)
                   (("[", "g"), "back")]  # enc1's activations and filters again
KEY_CONSTANTS = {"g": "KEY_G", "space": "KEY_SPACE", "[": "KEY_LEFT_BRACKET",
                 "]": "KEY_RIGHT_BRACKET", "h": "KEY_H"}
sys.path.insert(0, str(ROOT / "tests" / "train"))  # torch_graph: PyTorch's gradients


def press(viewer, name: str) -> None:
    """Key `name` through the window's key callback, as a keyboard sends it."""
    glfw = viewer.glfw
    key = getattr(glfw, KEY_CONSTANTS[name])
    scancode = glfw.get_key_scancode(key)
    assert key_name(glfw, key, scancode) == name, (name, key_name(glfw, key, scancode))
    viewer._on_key(viewer.window, key, scancode, glfw.PRESS, 0)


def record_labels() -> dict:
    """Panel index -> the label lines drawn last (window.label_lines and training's wrapped)."""
    drawn, real = {}, window.label_lines

    def label_lines(overlay, index, lines):
        drawn[index] = list(lines)
        real(overlay, index, lines)

    window.label_lines = training.label_lines = label_lines
    return drawn


def drive(out: Path) -> None:
    """Train in the window; write step0.png, after.png, trained.npz and run.json to `out`;
    then the GRADIENT_FRAMES (gradients.json, and before_last.npz and last_batch.npy: the
    weights and batch of the last step) and dead.png (drive_dead)."""
    graph = training_graph("autoencoder", from_scratch=True)
    options = Options(SETTINGS, STEPS, layer=SHOWN)
    norms, labels = [], record_labels()
    with TrainingViewer(graph, SyntheticSource(), options) as viewer:
        glfw = viewer.glfw
        batches, take = [], viewer.pool.batch

        def batch(n):  # kept: the gradients shown are the last batch's
            batches[:] = [take(n)]
            return batches[0]

        viewer.pool.batch = batch

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
        viewer.trainer.save(out / "before_last.npz")
        frame("after.png")
        np.save(out / "last_batch.npy", batches[0])
        norms.append(norm())
        viewer.trainer.save(out / "trained.npz")
        (out / "run.json").write_text(json.dumps({"losses": viewer.losses, "norms": norms}))
        press(viewer, "space")
        shown = {}
        for keys, name in GRADIENT_FRAMES:
            for key in keys:
                press(viewer, key)
            labels.clear()
            frame(f"{name}.png")
            shown[name] = {"labels": dict(labels), "layer": viewer.layer,
                           "diverging": viewer.diverging, "steps": viewer.trainer.steps}
        with redirect_stdout(io.StringIO()) as printed:
            press(viewer, "h")
        shown["help"] = printed.getvalue()
    shown["dead"] = drive_dead(out, labels)
    (out / "gradients.json").write_text(json.dumps(shown))


def drive_dead(out: Path, labels: dict) -> dict:
    """A model with a layer the loss does not depend on ("dead"), shown with `g` after one
    step: dead.png and the labels drawn."""
    b = Builder()
    x = b.input("image", (3, 8, 8))
    b.conv(x, 2, 3, padding=1, name="dead")
    h = b.conv(x, 4, 3, padding=1, activation="Relu", name="a")
    y = b.conv(h, 3, 3, padding=1, activation="Sigmoid", name="out")
    graph = b.build([y], meta={"input_range": [0, 1], "output_range": [0, 1]})
    with TrainingViewer(graph, SyntheticSource(), Options(SETTINGS, 1, layer="dead")) as viewer:
        viewer.step()
        press(viewer, "g")
        labels.clear()
        viewer.step()
        viewer.screenshot(out / "dead.png")
        return {"labels": dict(labels), "steps": viewer.trainer.steps}


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


def panel_texels(image, index: int, content) -> np.ndarray:
    """Panel `index`'s drawing of `content` = (width, height) texels at a whole
    magnification (panel_rect), one pixel per texel, top row first."""
    x0, y0, w, h = panel_rect(index, content)
    scale = w // content[0]
    assert scale >= 1 and (w, h) == (content[0] * scale, content[1] * scale), (index, content)
    top = WINDOW[1] - (y0 + h)
    return image[top:top + h, x0:x0 + w][scale // 2::scale, scale // 2::scale]


def diverging(grad: np.ndarray) -> np.ndarray:
    """display.glsl's mosaic of (C, H, W) `grad` in its diverging colours (blue < 0 < red,
    each channel scaled by its largest magnitude), 0..255, (rows·H, cols·W, 3)."""
    c, h, w = grad.shape
    cols = int(np.ceil(np.sqrt(c)))
    rows = -(-c // cols)
    t = grad / np.maximum(np.abs(grad).max(axis=(1, 2), keepdims=True), 1e-20)
    neg, pos = np.array([0.2, 0.3, 1.0]), np.array([1.0, 0.2, 0.1])
    t = t[..., None]
    colour = np.where(t < 0, 1 + (neg - 1) * -t, 1 + (pos - 1) * t)
    out = np.full((rows * h, cols * w, 3), 0.08)
    for i in range(c):
        r, q = divmod(i, cols)
        out[r * h:(r + 1) * h, q * w:(q + 1) * w] = colour[i]
    return out * 255


def filter_tiles(grad: np.ndarray, in_channel: int = 0) -> np.ndarray:
    """filter_grid.glsl's grid of weight gradient `grad` (Co, Cg, kh, kw): RGB from input
    channels 0-2 when Cg = 3, else grey from `in_channel`; each tile on its own (min, max);
    gutters grey-blue. 0..255, (grid height, grid width, 3)."""
    co, cg, kh, kw = grad.shape
    bank = FilterBank(kh, kw, cg, co)
    width, height = bank.grid_size()
    out = np.empty((height, width, 3))
    out[:] = np.array([0.3, 0.3, 0.34])
    shown = grad[:, 0:3] if bank.rgb else grad[:, [in_channel] * 3]
    for o in range(co):
        lo, hi = shown[o].min(), shown[o].max()
        unit = (shown[o] - lo) / (hi - lo) if hi - lo > 1e-20 else np.full_like(shown[o], 0.5)
        r, q = divmod(o, bank.cols)
        out[1 + r * (kh + 1):1 + r * (kh + 1) + kh, 1 + q * (kw + 1):1 + q * (kw + 1) + kw] = \
            unit.transpose(1, 2, 0)
    return out * 255


def torch_gradients(out: Path) -> tuple[dict, dict]:
    """PyTorch autograd's gradients of the last step: (dL/d tensor, dL/d weight) by name."""
    from torch_graph import TorchGraph
    reference_graph = TorchGraph(load_graph(out / "before_last.npz"))
    x = np.load(out / "last_batch.npy")
    loss, tensors = reference_graph.loss(x, x)
    loss.backward()
    return ({name: t.grad.numpy()[0] for name, t in tensors.items() if t.grad is not None},
            {name: p.grad.numpy() for name, p in reference_graph.params.items()})


def test_gradients_key_shows_pytorchs_gradients(run):
    """`g` in the paused window: the layer panel shows dL/d layer in diverging colours and
    the filters panel dL/d layer.weight, each tile on its own range, as PyTorch computes them
    (to 1 of 255 levels); `g` again brings back the activations, pixel for pixel."""
    out, _ = run
    shown = json.loads((out / "gradients.json").read_text())
    image = {name: np.asarray(Image.open(out / f"{name}.png").convert("RGB")).astype(float)
             for _, name in GRADIENT_FRAMES}
    tensors, weights = torch_gradients(out)
    assert {shown[n]["steps"] for _, n in GRADIENT_FRAMES} == {STEPS}  # paused: no step more
    for name, layer, in_channels in (("grad_enc1", "enc1", 3), ("grad_enc2", "enc2", 64)):
        assert shown[name]["layer"] == layer and shown[name]["diverging"]
        grad = tensors[layer]
        c, h, w = grad.shape
        cols = int(np.ceil(np.sqrt(c)))
        drawn = panel_texels(image[name], 2, (cols * w, -(-c // cols) * h))
        np.testing.assert_allclose(drawn, diverging(grad), atol=1, err_msg=f"dL/d {layer}")
        expected = filter_tiles(weights[f"{layer}.weight"])
        bank = FilterBank(4, 4, in_channels, len(weights[f"{layer}.weight"]))
        drawn = panel_texels(image[name], 3, bank.grid_size())
        np.testing.assert_allclose(drawn, expected, atol=1, err_msg=f"dL/d {layer}.weight")
        lines = shown[name]["labels"]
        assert lines["2"][0].startswith(f"dL/d {layer} (gradient)"), lines
        assert lines["2"][1].endswith("blue < 0 < red"), lines
        assert lines["3"][0] == f"filters' gradient: {layer}.weight ({bank.co} tiles)", lines
    paused, back = image["paused"], image["back"]
    assert not shown["paused"]["diverging"] and not shown["back"]["diverging"]
    assert shown["paused"]["labels"]["2"][0].startswith("layer enc1 [Conv]")
    assert shown["paused"]["labels"]["3"][0].startswith("filters enc1")
    for i in (2, 3):
        x0, y0, w, h = panel_box(i)
        box = slice(WINDOW[1] - (y0 + h), WINDOW[1] - y0), slice(x0, x0 + w)
        assert np.abs(image["grad_enc1"][box] - paused[box]).mean() > 10, i  # `g` changed it
        assert (back[box] == paused[box]).all(), i  # and `g` again brought it back
    assert "gradients: dL/d layer, filters' gradient" in shown["help"]
    shutil.copy(out / "grad_enc1.png", ROOT / "docs" / "train_gradients.png")


def test_gradients_of_a_layer_the_loss_does_not_depend_on_are_labelled(run):
    out, _ = run
    dead = json.loads((out / "gradients.json").read_text())["dead"]
    assert dead["steps"] == 2
    assert dead["labels"]["2"] == describe_no_gradient("dead")
    assert dead["labels"]["3"] == ["filters' gradient: dead.weight: none",
                                   "the loss does not depend on it"]
    image = np.asarray(Image.open(out / "dead.png").convert("RGB")).astype(int)
    for i in (2, 3):  # nothing drawn there: the cleared background
        x0, y0, w, h = panel_box(i)
        box = image[WINDOW[1] - (y0 + h):WINDOW[1] - y0, x0:x0 + w]
        assert (np.abs(box - box[0, 0]) <= 1).all() and box[0, 0, 0] < 40, i


def test_only_the_training_window_binds_g():
    assert "g" not in KEYS  # the plain viewer has no gradients to show
    keys = TrainingViewer.keys
    assert keys["g"][0] == "toggle_gradients" and all(hasattr(TrainingViewer, m)
                                                      for m, _, _ in keys.values())
    assert {k: v for k, v in keys.items() if k != "g"} == KEYS


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
