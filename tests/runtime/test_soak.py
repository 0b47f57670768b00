"""Soak: the viewer's per-frame GPU path, headless, for SOAK_FRAMES frames.

Each frame does what `glcnn view` does without its window: a synthetic source frame goes up
through the pixel buffer and the preprocess pass (glcnn.viewer.window.FrameInput), the shipped
autoencoder runs (Pipeline.execute), and the four panels (input, output, the enc1 mosaic,
its filters) are min/max-reduced and drawn by glcnn.viewer.display.Display into an offscreen
framebuffer; then the GL queue is drained (ctx.finish, as the viewer's model timing does).

After WARMUP frames, the driver's count of GL objects and texture bytes (gl_census) must
not change, no program may be compiled, and the resident set may grow by less than 1%.
The last frame's output is checked against the numpy reference, so a long run cannot
drift into wrong numbers either.

CI: 10,000 frames of a 4×4 model input, panels drawn 8×8 (the passes, textures and
draw calls are the same kinds as at any size; only the fragment count differs). Set
GLCNN_SOAK_FRAMES and GLCNN_SOAK_SIZE (e.g. 32) for other runs; README "Limits and errors"
records them.
"""

import os
import resource
import time
from pathlib import Path

import numpy as np
import pytest
from gl_census import census

import glcnn
from glcnn.graph import reference
from glcnn.graph.passes import optimize
from glcnn.viewer.display import Display
from glcnn.viewer.sources import SyntheticSource
from glcnn.viewer.window import FrameInput

MODEL = Path(__file__).resolve().parents[2] / "weights" / "autoencoder.npz"
SOAK_FRAMES = int(os.environ.get("GLCNN_SOAK_FRAMES", "10000"))
SIZE = int(os.environ.get("GLCNN_SOAK_SIZE", "4"))
WARMUP = 1000
PANEL = 2 * SIZE


def rss_bytes() -> int:
    """Resident set size now (/proc/self/statm), in bytes."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize()


class HeadlessViewer:
    """The viewer's per-frame GPU work on any context, drawing into an offscreen target."""

    def __init__(self, ctx, graph):
        self.ctx = ctx
        self.pipe = glcnn.Pipeline(graph, ctx, keep="all")
        self.frames = FrameInput(self.pipe)
        self.display = Display(ctx)
        self.target_tex = ctx.gl.texture((4 * (PANEL + 2), PANEL), 4)
        self.target = ctx.gl.framebuffer(color_attachments=[self.target_tex])
        self.panels = self._panels(graph)

    def _panels(self, graph):
        """(texture, shape, mode, extra) as Viewer.panels() gives them for layer enc1."""
        shapes, meta = self.pipe.shapes, graph.meta
        name, out = next(iter(graph.inputs)), graph.outputs[0]
        enc1 = next(p for p in self.pipe.passes if p.op.node.name == "enc1")
        co, _, kh, kw = enc1.op.conv_weights().shape
        filters = dict(enc1.weights)["u_weights"]
        return [
            (self.pipe.texture(name), shapes[name], "image", {"value_range": meta["input_range"]}),
            (self.pipe.texture(out), shapes[out], "image", {"value_range": meta["output_range"]}),
            (self.pipe.texture("enc1"), shapes["enc1"], "mosaic", {}),
            (filters, (4, filters.height, filters.width), "filters",
             {"filters": (kh, kw, filters.width // kw, co)}),
        ]

    def step(self, frame: np.ndarray) -> None:
        self.frames.upload(frame, "synthetic")
        self.pipe.execute()
        for i, (tex, shape, mode, extra) in enumerate(self.panels):
            self.display.draw(self.target, (i * (PANEL + 2), 0, PANEL, PANEL), tex, shape, mode,
                              **extra)
        self.ctx.gl.finish()

    def release(self):
        self.ctx.park()
        self.display.release()
        self.frames.release()
        self.target.release()
        self.target_tex.release()
        self.pipe.release()


def test_soak_viewer_frames_constant_resources(ctx):
    graph = optimize(glcnn.load_graph(MODEL))
    graph.inputs["image"] = (3, SIZE, SIZE)
    viewer = HeadlessViewer(ctx, graph)
    source = SyntheticSource(SIZE, SIZE)
    for _ in range(WARMUP):
        viewer.step(source.read())
    before, rss_before, compiles = census(), rss_bytes(), ctx.compiles
    start = time.perf_counter()
    for _ in range(SOAK_FRAMES - WARMUP):
        viewer.step(source.read())
    seconds = time.perf_counter() - start
    after, rss_after = census(), rss_bytes()
    growth = (rss_after - rss_before) / rss_before
    print(f"soak: {SOAK_FRAMES} frames of {SIZE}x{SIZE} in {seconds:.1f} s after warm-up "
          f"({seconds / (SOAK_FRAMES - WARMUP) * 1e3:.2f} ms/frame); RSS {rss_before / 2**20:.1f}"
          f" -> {rss_after / 2**20:.1f} MiB ({growth:+.3%}); GL {after}")
    _check_last_frame(viewer.pipe, graph)
    viewer.release()
    assert after == before, f"GL objects changed over the soak: {before} -> {after}"
    assert ctx.compiles == compiles, "a frame compiled a program"
    assert growth < 0.01, f"RSS grew {growth:.2%} over {SOAK_FRAMES} frames"


def _check_last_frame(pipe, graph) -> None:
    """The output of the last frame matches numpy on the input texture it was computed from."""
    x = pipe.read("image")
    expected = reference.run(graph, {"image": x})[graph.outputs[0]]
    np.testing.assert_allclose(pipe.read(graph.outputs[0]), expected, atol=1e-5)
    assert x.std() > 0.01, "the preprocessed frame is blank"


def test_frame_input_matches_the_cpu_resize(ctx):
    """FrameInput (the refactored viewer path) writes the frame into the input texture."""
    graph = optimize(glcnn.load_graph(MODEL))
    graph.inputs["image"] = (3, 12, 16)
    with glcnn.Pipeline(graph, ctx, keep="all") as pipe:
        frames = FrameInput(pipe)
        frame = SyntheticSource(16, 12).frame(5)
        frames.upload(frame)
        x = pipe.read("image")
        frames.release()
    np.testing.assert_allclose(x, frame[..., :3].transpose(2, 0, 1) / 255.0, atol=1e-6)


def test_frame_input_refuses_bad_frames(ctx):
    graph = optimize(glcnn.load_graph(MODEL))
    graph.inputs["image"] = (3, 8, 8)
    with glcnn.Pipeline(graph, ctx, keep="all") as pipe:
        frames = FrameInput(pipe)
        for bad in (np.zeros((8, 8, 3), np.uint8), np.zeros((8, 8, 4), np.float32)):
            with pytest.raises(glcnn.ShapeError, match=r"camera 0 .*\(H, W, 4\) uint8 RGBA"):
                frames.upload(bad, "camera 0")
        frames.release()
