"""The live viewer under Xvfb (started here): screenshots checked pixel by pixel against numpy.

The window runs in a subprocess (`glcnn view ... --frames N --screenshot F`), as a user
would run it. Xvfb comes from .ci/run's apt packages; in CI its absence fails the test.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

import glcnn
from glcnn.graph import reference
from glcnn.viewer.display import mosaic_grid
from glcnn.viewer.sources import SyntheticSource
from glcnn.viewer.window import KEYS, WINDOW, panel_rect

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "weights" / "autoencoder.npz"


def view(display, tmp_path, *args):
    shot = tmp_path / "shot.png"
    env = {**os.environ, "DISPLAY": display}
    cmd = [sys.executable, "-m", "glcnn.cli", "view", str(MODEL), *map(str, args),
           "--screenshot", str(shot)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    image = np.asarray(Image.open(shot).convert("RGB")).astype(np.int16)
    assert image.shape == (WINDOW[1], WINDOW[0], 3)
    return image, done.stderr


def panel_pixels(image, rect):
    """The panel's pixels, top row first, with their (u, v) sample points (v down)."""
    x0, y0, w, h = rect
    top = WINDOW[1] - (y0 + h)
    pixels = image[top:top + h, x0:x0 + w]
    v, u = np.mgrid[0:h, 0:w]
    return pixels, (u + 0.5) / w, (v + 0.5) / h


def expected_image(t, u, v, lo, hi):
    """Channels 0-2 of tensor t at (u, v), mapped from [lo, hi] to 0..255."""
    _, h, w = t.shape
    ys, xs = (v * h).astype(int), (u * w).astype(int)
    rgb = t[:3, ys, xs].transpose(1, 2, 0)
    return np.round(np.clip((rgb - lo) / (hi - lo), 0, 1) * 255)


def expected_mosaic(t, u, v, eps=(0.0, 0.0)):
    """Grey levels of the channel mosaic at (u, v); `eps` nudges samples that fall exactly
    on a texel edge, where the GPU's float rounding may pick either neighbour."""
    c, h, w = t.shape
    cols, rows = mosaic_grid(c)
    px = np.floor(u * cols * w + eps[0]).astype(int)
    py = np.floor(v * rows * h + eps[1]).astype(int)
    ch = (py // h) * cols + px // w
    valid = ch < c
    values = t[np.minimum(ch, c - 1), py % h, px % w]
    lo, hi = t.min(axis=(1, 2))[np.minimum(ch, c - 1)], t.max(axis=(1, 2))[np.minimum(ch, c - 1)]
    span = hi - lo
    grey = np.where(span > 1e-20, np.clip((values - lo) / np.where(span > 0, span, 1), 0, 1), 0.5)
    return np.round(grey * 255), valid


def check_frame(image, x):
    """Input, output and the enc1 activation panels against numpy for input x."""
    values = reference.run(glcnn.load_graph(MODEL), {"image": x})
    check_panels(image, x, values["dec2"], values["enc1"])


def check_panels(image, x, y, act=None):
    """The input panel shows x, the output panel y and, unless act is None, the layer panel
    act as a grey mosaic, each within a grey level or two of numpy."""
    _, h, w = x.shape
    pixels, u, v = panel_pixels(image, panel_rect(0, (w, h)))
    assert np.abs(pixels - expected_image(x, u, v, 0, 1)).max() <= 1, "input panel"
    pixels, u, v = panel_pixels(image, panel_rect(1, (y.shape[2], y.shape[1])))
    assert np.abs(pixels - expected_image(y, u, v, 0, 1)).max() <= 1, "output panel"
    if act is None:
        return
    cols, rows = mosaic_grid(act.shape[0])
    pixels, u, v = panel_pixels(image, panel_rect(2, (cols * act.shape[2], rows * act.shape[1])))
    nudges = [(dx, dy) for dx in (-1e-3, 1e-3) for dy in (-1e-3, 1e-3)]
    diffs = []
    for eps in nudges:
        grey, valid = expected_mosaic(act, u, v, eps)
        diffs.append(np.where(valid, np.abs(pixels[..., 0] - grey), 0))
    best = np.min(diffs, axis=0)
    assert best.max() <= 2, ("layer panel", best.max(), np.mean(best > 2))
    assert np.all(pixels[..., 0] == pixels[..., 1]), "layer panel is not grey"


def test_synthetic_source_screenshot_matches_numpy(display, tmp_path):
    image, log = view(display, tmp_path, "--source", "synthetic", "--frames", 3)
    assert "source synthetic" in log
    frame = SyntheticSource(128, 96).frame(2)  # the third frame is the last one drawn
    check_frame(image, frame[..., :3].transpose(2, 0, 1).astype(np.float64) / 255)


def test_video_file_source_screenshot_matches_numpy(display, tmp_path):
    import av  # in the test extra
    frames = [SyntheticSource(128, 96).frame(10 * i)[..., :3] for i in range(3)]
    path = tmp_path / "clip.mkv"
    with av.open(str(path), "w") as container:  # lossless, so decoded frames are exact
        stream = container.add_stream("ffv1", rate=10)
        stream.width, stream.height, stream.pix_fmt = 128, 96, "bgr0"
        for f in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        container.mux(stream.encode())
    image, log = view(display, tmp_path, "--source", path, "--frames", 2)
    assert f"video {path}" in log
    check_frame(image, frames[1].transpose(2, 0, 1).astype(np.float64) / 255)


def test_dcgan_walk_demo_tiles_match_numpy(display, tmp_path):
    """demos/dcgan_walk.py: each of the 16 tiles is the generator at that tile's latent."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("dcgan_walk", ROOT / "demos" / "dcgan_walk.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    shot = tmp_path / "walk.png"
    done = subprocess.run([sys.executable, str(ROOT / "demos" / "dcgan_walk.py"), "--frames", "2",
                           "--screenshot", str(shot)], env={**os.environ, "DISPLAY": display},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    image = np.asarray(Image.open(shot).convert("RGB")).astype(np.int16)
    graph = glcnn.load_graph(ROOT / "weights" / "dcgan_shapes.npz")
    latents = demo.LatentWalk(graph.inputs["z"][0]).at(1)  # the second frame is the last one
    tile = demo.TILE
    for i in (0, 5, 15):
        y = reference.run(graph, {"z": latents[i].reshape(graph.inputs["z"])})["main.13"]
        row, col = divmod(i, demo.GRID)
        pixels = image[row * tile:(row + 1) * tile, col * tile:(col + 1) * tile]
        v, u = np.mgrid[0:tile, 0:tile]
        expected = expected_image(y, (u + 0.5) / tile, (v + 0.5) / tile, -1, 1)
        assert np.abs(pixels - expected).max() <= 1, i


def test_every_key_keeps_correct_frames_coming(display, tmp_path):
    """Every binding of viewer.KEYS, pressed once in table order (tests/viewer_keys.py), then
    two frames each: no GL error stops the viewer (it exits 0, and only quit keys ask the
    window to close), exactly the bending keys change the weights, and every frame's input
    and output panels, and the layer panel when it is a grey mosaic, match numpy with the
    weights as the bending keys left them."""
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "viewer_keys.py"), str(tmp_path)],
                          cwd=tmp_path, env={**os.environ, "DISPLAY": display},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-1000:] + done.stderr[-4000:]
    keys = json.loads((tmp_path / "keys.json").read_text())
    assert [k["name"] for k in keys] == list(KEYS)
    quit_keys = {name for name, (method, _, _) in KEYS.items() if method == "quit"}
    assert {k["name"] for k in keys if k["closing"]} == quit_keys
    assert all(text in done.stdout for _, _, text in KEYS.values())  # `h` printed them all
    frames = json.loads((tmp_path / "frames.json").read_text())
    assert {f["key"] for f in frames} == {None, *KEYS}
    for name, (method, _, _) in KEYS.items():  # each edit reached the weights, shown below
        i = next(i for i, f in enumerate(frames) if f["key"] == name)
        edited = frames[i]["weights"] != frames[i - 1]["weights"]
        assert edited == (method in ("bend", "undo", "reset")), (name, method)
    failures = []
    for f in frames:
        image = np.asarray(Image.open(tmp_path / f"frame-{f['frame']}.png")).astype(np.int16)
        data = np.load(tmp_path / f"frame-{f['frame']}.npz")
        grey_mosaic = f["mode"] == "mosaic" and not f["diverging"]
        try:
            check_panels(image, data["x"], data["y"], data["act"] if grey_mosaic else None)
        except AssertionError as exc:
            failures.append(f"{f}: {exc}")
    assert not failures, "\n".join(failures)
    after_s = next(f["frame"] for f in frames if f["key"] == "s")  # `s` saves the next frame
    saved = np.asarray(Image.open(tmp_path / f"glcnn-{after_s}.png"))
    assert np.array_equal(saved, np.asarray(Image.open(tmp_path / f"frame-{after_s}.png")))


def test_folder_source_reads_every_suffix_glcnn_run_reads(tmp_path):
    """One table of image suffixes: a .gif that `glcnn run` took was skipped by the viewer."""
    from glcnn.inputs import IMAGE_SUFFIXES
    from glcnn.viewer.sources import FolderSource
    pixels = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    Image.fromarray(pixels).save(tmp_path / "frame.gif")
    assert ".gif" in IMAGE_SUFFIXES
    assert FolderSource(tmp_path).read().shape[:2] == (4, 6)


WRONG_LAYER = """
import sys, glcnn
from glcnn.viewer.sources import SyntheticSource
from glcnn.viewer.window import Viewer
try:
    Viewer(glcnn.load_graph(sys.argv[1]), SyntheticSource(32, 32), layer="nope",
           visible=False)
except glcnn.GlcnnError as exc:
    print(f"{type(exc).__name__}: {exc}")
"""


def test_unknown_layer_is_not_a_context_error(display):
    """The viewer raised ContextError for a layer name it does not know: nothing was wrong
    with the context."""
    done = subprocess.run([sys.executable, "-c", WRONG_LAYER, str(MODEL)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "DISPLAY": display})
    assert done.stdout.startswith("GlcnnError: no layer 'nope'"), done.stdout + done.stderr
