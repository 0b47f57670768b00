"""Drive the live viewer through every binding of glcnn.viewer.window.KEYS, for
tests/viewer/test_viewer.py.

    python tests/viewer_keys.py OUT_DIR        (under a display, e.g. Xvfb)

It runs in a process of its own because the glfw window must exist before any headless EGL
context (DESIGN.md §5). The model and source are `glcnn view`'s: the shipped autoencoder on
the synthetic source. Each key is pressed through the viewer's glfw key callback, the key
code found from the key's name, as a keyboard would send it; then Viewer.run renders
FRAMES_PER_KEY frames, each saved in OUT_DIR for the test to compare with numpy:

    frame-<n>.png   the window (Viewer.run's screenshot of frame n)
    frame-<n>.npz   x (that frame's input) and, from glcnn.graph.reference with the weights as
                    edited so far, y (the model output) and act (the shown layer)
    frames.json     per frame: the key pressed before it, layer, mode, diverging, paused
                    and a digest of the graph's weights (which bending edits)
    keys.json       per key: its name and whether it asked the window to close

Each bending key edits a channel no earlier key edited, so none is a no-op (inverting a
zeroed filter would be). A GL error makes Viewer.step raise ContextError, so this script
exits non-zero, as `glcnn view` exits 2. Quit keys render no frame; their close request
is then withdrawn for the next key.
"""

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from glcnn.graph import reference
from glcnn.importers.prepared import load_optimized
from glcnn.viewer.sources import SyntheticSource
from glcnn.viewer.window import KEYS, Viewer, key_name

MODEL = Path(__file__).resolve().parents[1] / "weights" / "autoencoder.npz"
FRAMES_PER_KEY = 2


def key_codes(glfw) -> dict[str, tuple[int, int]]:
    """KEYS name -> (glfw key, scancode) of a key that has that name on this keyboard."""
    codes = {}
    for attr in dir(glfw):
        key = getattr(glfw, attr)
        scancode = glfw.get_key_scancode(key) if attr.startswith("KEY_") and key >= 0 else -1
        if scancode >= 0:  # -1: no such key on this keyboard
            codes.setdefault(key_name(glfw, key, scancode), (key, scancode))
    missing = [name for name in KEYS if name not in codes]
    if missing:
        raise SystemExit(f"no key on this keyboard is named {missing}")
    return codes


def weights_digest(graph) -> str:
    digest = hashlib.sha256()
    for node in graph.nodes:
        for name in sorted(node.weights):
            digest.update(np.ascontiguousarray(node.weights[name]).tobytes())
    return digest.hexdigest()[:16]


def press(viewer, key, scancode):
    viewer._on_key(viewer.window, key, scancode, viewer.glfw.PRESS, 0)


def render_frame(viewer, source, out, record, key=None):
    """Render one frame through Viewer.run; save its screenshot, input and reference."""
    n = viewer.frames
    viewer.run(frames=n + 1, screenshot=out / f"frame-{n}.png")
    x = source.frame(source.index - 1)[..., :3].transpose(2, 0, 1).astype(np.float64) / 255
    values = reference.run(viewer.pipe.graph, {viewer.input_name: x})
    np.savez(out / f"frame-{n}.npz", x=x, y=values[viewer.pipe.graph.outputs[0]],
             act=values[viewer.layer])
    record.append({"frame": n, "layer": viewer.layer, "mode": viewer.mode,
                   "diverging": viewer.diverging, "paused": viewer.paused, "key": key,
                   "weights": weights_digest(viewer.pipe.graph)})


def main(out: Path) -> int:
    graph = load_optimized(MODEL)
    _, h, w = next(iter(graph.inputs.values()))
    source = SyntheticSource(w, h)
    frames, keys, edits = [], [], 0
    with Viewer(graph, source, visible=False) as viewer:
        glfw = viewer.glfw
        codes = key_codes(glfw)
        render_frame(viewer, source, out, frames)
        for name in KEYS:
            print(f"key {name!r}", flush=True)
            if KEYS[name][0] == "bend":
                viewer.channel, edits = edits, edits + 1
            press(viewer, *codes[name])
            closing = bool(glfw.window_should_close(viewer.window))
            keys.append({"name": name, "closing": closing})
            if closing:
                before = viewer.frames
                viewer.run()  # returns at once, as `glcnn view` does on its quit keys
                assert viewer.frames == before, "the viewer rendered after a quit key"
                glfw.set_window_should_close(viewer.window, False)
            for _ in range(FRAMES_PER_KEY):
                render_frame(viewer, source, out, frames, name)
    (out / "frames.json").write_text(json.dumps(frames, indent=1))
    (out / "keys.json").write_text(json.dumps(keys, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
