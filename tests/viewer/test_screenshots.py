"""The labelled viewer under Xvfb, one model of each kind, checked against numpy; the
screenshots it takes become docs/viewer_autoencoder.png, viewer_dcgan.png, viewer_classifier.png.

Each runs `glcnn view MODEL --frames FRAMES --screenshot F` in a subprocess, as a user would
(enough frames for the line plot of model time to show a line).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

import glcnn
from glcnn.graph import reference
from glcnn.graph.graph import Graph, Node
from glcnn.importers.npz import save
from glcnn.viewer.filters import bank_of
from glcnn.viewer.latent import LatentWalk
from glcnn.viewer.panels import BOTTOM, GAP, LABEL_H, PANEL, PANEL_BG, STATUS_H, TOP_K, panel_box
from glcnn.viewer.sources import SyntheticSource
from glcnn.viewer.window import WINDOW, panel_rect

ROOT = Path(__file__).resolve().parents[2]
FRAMES = 12
LAST = FRAMES - 1  # the frame saved: its source frame and latent step
COLOURS = {"red": (1, 0, 0), "green": (0, 1, 0), "blue": (0, 0, 1), "yellow": (1, 1, 0),
           "cyan": (0, 1, 1), "magenta": (1, 0, 1), "white": (1, 1, 1), "black": (0, 0, 0)}


def shoot(display, tmp_path, model, *args):
    """Run the viewer for FRAMES frames; the last as an (H, W, 3) int16 image, top row first."""
    shot = tmp_path / "shot.png"
    done = subprocess.run([sys.executable, "-m", "glcnn.cli", "view", str(model), "--frames",
                           str(FRAMES), "--screenshot", str(shot), *map(str, args)],
                          env={**os.environ, "DISPLAY": display}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    image = np.asarray(Image.open(shot).convert("RGB")).astype(np.int16)
    assert image.shape == (WINDOW[1], WINDOW[0], 3)
    return image, shot


def publish(shot, doc):
    """Copy a screenshot whose checks passed into docs/."""
    shutil.copy(shot, ROOT / "docs" / doc)


def at(image, x, y):
    """The pixel at window coordinates (x, y), origin bottom left."""
    return image[WINDOW[1] - 1 - y, x]


def assert_labelled(image, panels=(0, 1, 2, 3)):
    """Every panel's label band and the status line hold light text pixels."""
    for i in panels:
        x0 = GAP + i * (PANEL + GAP)
        top = WINDOW[1] - (BOTTOM + GAP + PANEL)
        band = image[top - LABEL_H:top, x0:x0 + PANEL]
        assert (band.min(axis=2) > 150).sum() > 100, f"label of panel {i} is blank"
    status = image[WINDOW[1] - STATUS_H:, :]
    assert (status.min(axis=2) > 100).sum() > 300, "status line is blank"


def colour_classifier() -> Graph:
    """Names the mean colour of an image: per-pixel logits 20·(p·x − |p|²/2) for 8 prototype
    colours p (a 1×1 conv: the nearest prototype wins), averaged, then softmax."""
    protos = np.array(list(COLOURS.values()), np.float32)
    w = (20 * protos).reshape(8, 3, 1, 1)
    b = (-10 * (protos ** 2).sum(1)).astype(np.float32)
    nodes = [Node("Conv", "colours", ["image"], {"kernel_shape": [1, 1]}, {"W": w, "B": b}),
             Node("GlobalAveragePool", "pool", ["colours"], {}, {}),
             Node("Softmax", "probs", ["pool"], {"axis": -1}, {})]
    graph = Graph({"image": (3, 96, 128)}, nodes, ["probs"], {"input_range": [0, 1]})
    graph.validate()
    return graph


def test_autoencoder_filter_grid_matches_its_weights(display, tmp_path):
    model = ROOT / "weights" / "autoencoder.npz"
    image, shot = shoot(display, tmp_path, model)
    graph = glcnn.load_graph(model)
    node = graph.node("enc1")
    w = node.weights["W"].astype(np.float64)  # (64, 3, 4, 4): RGB tiles
    bank = bank_of(node, w.shape)
    x0, y0, rw, rh = panel_rect(3, bank.grid_size())
    scale = rw // bank.grid_size()[0]
    assert scale >= 5, "tiles are enlarged"
    worst = 0
    for o in range(bank.co):
        lo, hi = w[o].min(), w[o].max()  # each tile its own range
        row, col = divmod(o, bank.cols)
        for ky in range(bank.kh):
            for kx in range(bank.kw):
                tx, ty = 1 + col * (bank.kw + 1) + kx, 1 + row * (bank.kh + 1) + ky
                half = scale // 2
                pixel = at(image, x0 + tx * scale + half, y0 + rh - 1 - ty * scale - half)
                expected = np.round((w[o, :, ky, kx] - lo) / (hi - lo) * 255)
                worst = max(worst, np.abs(pixel - expected).max())
    assert worst <= 1, worst
    gutter = at(image, x0 + scale // 2, y0 + rh - 1 - scale // 2)
    assert np.abs(gutter - np.array([0.3, 0.3, 0.34]) * 255).max() <= 1
    assert_labelled(image)
    publish(shot, "viewer_autoencoder.png")


def test_generator_walks_its_latent_shown_as_bars(display, tmp_path):
    model = ROOT / "weights" / "dcgan_shapes.npz"
    image, shot = shoot(display, tmp_path, model)
    graph = glcnn.load_graph(model)
    z = LatentWalk(graph.inputs["z"]).at(LAST)
    assert not np.allclose(z, LatentWalk(graph.inputs["z"]).at(0)), "the latent walks"
    y = reference.run(graph, {"z": z.astype(np.float64)})[graph.outputs[0]]
    x0, y0, rw, rh = panel_rect(1, (64, 64))
    v, u = np.mgrid[0:rh, 0:rw]
    ys, xs = (v * 64 // rh), (u * 64 // rw)
    expected = np.round(np.clip((y[:3, ys, xs].transpose(1, 2, 0) + 1) / 2, 0, 1) * 255)
    top = WINDOW[1] - (y0 + rh)
    assert np.abs(image[top:top + rh, x0:x0 + rw] - expected).max() <= 1, "generated image"
    bx, by, bw, bh = panel_box(0)
    values = z.reshape(-1)
    mid, half = by + bh // 2, bh // 2 - 2
    for i, value in enumerate(values):  # one bar per latent entry: sign and height
        x = bx + i * bw // len(values) + 1
        up = sum(at(image, x, mid + k)[0] > 200 for k in range(half + 1))
        down = sum(at(image, x, mid - 1 - k)[2] > 200 for k in range(half + 1))
        length = round(abs(value) / np.abs(values).max() * half)
        assert (up, down) == ((length, 0) if value >= 0 else (0, length)), (i, value, up, down)
    assert_labelled(image)
    publish(shot, "viewer_dcgan.png")


def test_classifier_output_is_a_named_top_k_bar_chart(display, tmp_path):
    graph = colour_classifier()
    save(graph, tmp_path / "colours.npz")
    (tmp_path / "colours.txt").write_text("\n".join(COLOURS) + "\n")
    image, shot = shoot(display, tmp_path, tmp_path / "colours.npz", "--labels",
                        tmp_path / "colours.txt")
    x = SyntheticSource(128, 96).frame(LAST)[..., :3].transpose(2, 0, 1).astype(np.float64) / 255
    p = reference.run(graph, {"image": x})["probs"].reshape(-1)
    order = np.argsort(-p, kind="stable")
    assert p[order[0]] > 0.3 and p[order[1]] > 0.01, p  # more than one bar to see
    bx, by, bw, bh = panel_box(1)
    row = bh // TOP_K
    background = np.round(np.array(PANEL_BG[:3]) * 255)
    lengths = []
    for rank in range(len(p)):
        y = by + bh - (rank + 1) * row + 3  # below the text of the row
        line = np.array([at(image, bx + 2 + k, y) for k in range(bw - 4)])
        lengths.append(int((np.abs(line - background).max(axis=1) > 8).sum()))
    expected = [round(p[i] * (bw - 4)) for i in order]
    assert np.abs(np.array(lengths) - expected).max() <= 1, (lengths, expected)
    assert lengths == sorted(lengths, reverse=True)
    assert_labelled(image)
    publish(shot, "viewer_classifier.png")


PLOT = """
import sys
from glcnn.viewer.sources import SyntheticSource
from glcnn.viewer.window import Viewer
import glcnn
with Viewer(glcnn.load_graph(sys.argv[1]), SyntheticSource(128, 96), visible=False) as v:
    for step in range(50):
        v.plot("loss", 1.0 / (1 + step))
    v.run(frames=1, screenshot=sys.argv[2])
"""


def test_plot_draws_the_fed_values_as_a_falling_line(display, tmp_path):
    done = subprocess.run([sys.executable, "-c", PLOT, str(ROOT / "weights" / "autoencoder.npz"),
                           str(tmp_path / "plot.png")], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "DISPLAY": display})
    assert done.returncode == 0, done.stderr
    image = np.asarray(Image.open(tmp_path / "plot.png").convert("RGB")).astype(np.int16)
    line = (np.abs(image - np.array([89, 191, 255])).max(axis=2) <= 2)  # COLORS[0]
    plot = line[WINDOW[1] - BOTTOM + 20:WINDOW[1] - STATUS_H]  # below the series' label
    ys, xs = np.nonzero(plot)
    assert len(xs) > 50
    first, last = ys[xs == xs.min()].mean(), ys[xs == xs.max()].mean()
    assert first < last, "the loss falls: the line ends lower (larger image row)"


def test_upscaler_output_is_shown_at_true_scale(display, tmp_path):
    """A ×2 nearest-neighbour upscaler (ConvTranspose, stride 2, 2×2 ones per channel) of a
    256×192 input: its 512×384 output would be halved to fit; the viewer shows its centre
    256×256 at one texel per pixel and the input's matching 128×128 at ×2, so the two
    panels show the same pixels."""
    w = np.zeros((3, 3, 2, 2), np.float32)
    for c in range(3):
        w[c, c] = 1
    node = Node("ConvTranspose", "up", ["image"], {"strides": [2, 2], "kernel_shape": [2, 2]},
                {"W": w})
    graph = Graph({"image": (3, 192, 256)}, [node], ["up"],
                  {"input_range": [0, 1], "output_range": [0, 1]})
    graph.validate()
    save(graph, tmp_path / "up.npz")
    image, _ = shoot(display, tmp_path, tmp_path / "up.npz")
    x = SyntheticSource(256, 192).frame(LAST)[..., :3].astype(np.float64) / 255  # (H, W, 3)
    y = x.repeat(2, 0).repeat(2, 1)
    panels = []
    for index, content in enumerate([(128, 128), (256, 256)]):  # input, output
        x0, y0, rw, rh = panel_rect(index, content)
        assert (rw, rh) == (256, 256)
        top = WINDOW[1] - (y0 + rh)
        panels.append(image[top:top + rh, x0:x0 + rw])
    expected = np.round(y[64:64 + 256, 128:128 + 256] * 255)
    assert np.abs(panels[1] - expected).max() <= 1, "output: centre crop at 1:1"
    assert np.abs(panels[0] - expected).max() <= 1, "input: the matching region at x2"
