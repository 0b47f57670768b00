"""Live training (`glcnn train`, `glcnn view --train`): a model learns to reconstruct the frames
of a source, target = input, on the GPU (glcnn.Trainer), in the viewer's window or without one.

The window is the viewer's (glcnn/viewer/window.py) running the Trainer's forward pipeline:
input | reconstruction | a layer's activations | its filters, all drawn from the textures the
training writes, and a live loss plot. The bending keys edit the training weights
(Trainer.set_weights): zero a filter and watch training bring it back. `g` shows gradients
instead: the layer panel dL/d(layer) of the last trained sample (diverging colours, `d`
remembered per view), the filter panel the last step's dL/d(layer.weight), each tile on its
own range (Trainer.gradient_texture: drawn from the textures, as the activations are).

Frames go into a replay pool (the last POOL frames) and each step trains on frames drawn from it
at random: consecutive frames are nearly the same, and training on them in order forgets what it
saw a few seconds ago (32² autoencoder from scratch on the synthetic source, Adam lr 2e-3,
batch 1, 40 s: 14.6 dB held-out PSNR in order, 23.5 dB from the pool).
"""

import dataclasses
import sys
import time

import numpy as np

from ..errors import GlcnnError
from ..train import Trainer
from .bending import Bender
from .labels import describe_no_gradient
from .panels import GAP, PLOT_H, STATUS_H, LinePlot, label_lines
from .sources import SyntheticSource
from .window import KEYS, Viewer

POOL = 256  # frames kept for replay
HELD_OUT = [100_000 + 37 * k for k in range(16)]  # synthetic frames never trained on
# The viewer's keys and `g`, listed by `h` before help and quit.
TRAINING_KEYS = {**{k: v for k, v in KEYS.items() if v[0] not in ("print_help", "quit")},
                 "g": ("toggle_gradients", (), "gradients: dL/d layer, filters' gradient"),
                 **{k: v for k, v in KEYS.items() if v[0] in ("print_help", "quit")}}


@dataclasses.dataclass
class Options:
    """What `glcnn train` was asked: Trainer settings (loss, optimizer, lr, ...), steps (None:
    until the window closes), seconds (stop after this long), batch, where to save, whether to
    open the window, the layer shown first, a last-frame screenshot, the replay seed."""

    settings: dict
    steps: int | None = None
    seconds: float | None = None
    batch: int = 1
    save: str | None = None
    window: bool = True
    layer: str | None = None
    screenshot: str | None = None
    seed: int = 0


class FramePool:
    """A source's frames as model inputs (C, H, W) float32, in a replay pool.

    Args:
        source: a frame source (glcnn.viewer.sources). shape: the model input's (C, H, W).
        meta: the graph's meta (input_range, mean, std, channel_order as the viewer uses them).
    """

    def __init__(self, source, shape, meta: dict, size: int = POOL, seed: int = 0):
        self.source, self.shape, self.meta, self.size = source, tuple(shape), meta, size
        self.frames: list[np.ndarray] = []
        self.rng = np.random.default_rng(seed)

    def prepare(self, rgba: np.ndarray) -> np.ndarray:
        """An RGBA uint8 frame as the model's input: box-resized, scaled as the viewer does."""
        from PIL import Image
        c, h, w = self.shape
        image = Image.fromarray(np.ascontiguousarray(rgba[..., :3], np.uint8))
        image = image.resize((w, h), Image.Resampling.BOX)
        x = np.asarray(image.convert("L") if c == 1 else image, np.float32) / 255.0
        x = x.reshape(h, w, -1).transpose(2, 0, 1)
        if self.meta.get("channel_order", "rgb") == "bgr":
            x = x[::-1]
        lo, hi = self.meta.get("input_range", (0, 1))
        mean = np.asarray(self.meta.get("mean", [0.0] * c), np.float32).reshape(-1, 1, 1)
        std = np.asarray(self.meta.get("std", [1.0] * c), np.float32).reshape(-1, 1, 1)
        return np.ascontiguousarray(((lo + x * (hi - lo)) - mean) / std, np.float32)

    def batch(self, n: int) -> np.ndarray:
        """Read one new frame into the pool; `n` pool frames drawn at random, (n, C, H, W)."""
        self.frames = (self.frames + [self.prepare(self.source.read())])[-self.size:]
        return np.stack([self.frames[i] for i in self.rng.integers(len(self.frames), size=n)])


def held_out(source, shape, meta) -> np.ndarray | None:
    """Frames of a synthetic source that training never reads (HELD_OUT), as model inputs;
    None for other sources."""
    if not isinstance(source, SyntheticSource):
        return None
    pool = FramePool(source, shape, meta)
    return np.stack([pool.prepare(source.frame(i)) for i in HELD_OUT])


def psnr(pipeline, frames: np.ndarray) -> float:
    """Reconstruction PSNR (dB) of `pipeline` on `frames`, peak = the output range's span."""
    lo, hi = pipeline.graph.meta.get("output_range", (0, 1))
    mse = np.mean([np.mean((np.asarray(pipeline.run(x)).reshape(x.shape) - x) ** 2)
                   for x in frames])
    return float(10 * np.log10((hi - lo) ** 2 / max(mse, 1e-20)))


class TrainingWeights:
    """What a Bender edits in a training window: the Trainer's weights, through the
    methods Bender uses on a Pipeline."""

    def __init__(self, trainer):
        self.trainer = trainer

    @property
    def graph(self):
        return self.trainer.pipeline.graph

    @property
    def shapes(self):
        return self.trainer.pipeline.shapes

    def weights(self, layer):
        return self.trainer.weights(layer)

    def set_weights(self, layer, name, array):
        return self.trainer.set_weights(layer, name, array)


class Gradients:
    """The layer panel's tensor with gradients on: dL/d(tensor) of the last trained sample,
    through the methods the window draws a panel with (as Pipeline.texture, Pipeline.read)."""

    def __init__(self, viewer):
        self.viewer = viewer

    def texture(self, name):
        return self.viewer.gradient_texture(name)

    def read(self, name):
        return self.viewer.trainer.gradient(name)


class TrainingViewer(Viewer):
    """The viewer's window training its graph on `source`'s frames, one step per frame.

    Args:
        graph, source, layer, visible: as Viewer. options: an Options (settings, batch, seed).
        report: called as report(step, loss) after each step, or None.
    """

    keys = TRAINING_KEYS

    def __init__(self, graph, source, options: Options, report=None, visible=True):
        self.options, self.report = options, report
        # `g`: gradients shown; the `d` setting of the view not shown (gradients: diverging)
        self.gradients, self._other_diverging, self._gradients = False, True, {}
        super().__init__(graph, source, layer=options.layer, visible=visible)
        self.bender = Bender(TrainingWeights(self.trainer))
        self.pool = FramePool(source, self.input_shape, graph.meta, seed=options.seed)
        self.lines, self.losses, self.started = LinePlot(options.steps or 1000), [], None

    def make_pipeline(self, graph):
        self.trainer = Trainer(graph, ctx=self.ctx, **self.options.settings)
        return self.trainer.pipeline

    def advance(self):
        """One training step on a batch from the pool (paused: the forward pass again, so
        bending shows)."""
        self.filters_changed = True  # every step: the panel's copy is refilled
        if self.paused and self.frames:
            self.pipe.execute()
            return
        x = self.pool.batch(self.options.batch)
        t0 = time.perf_counter()
        self.started = self.started or t0
        loss = self.trainer.step(x, x)
        self.model_ms = (time.perf_counter() - t0) * 1e3
        self.losses.append(loss)
        self.plot("loss", loss)
        if self.report is not None:
            self.report(self.trainer.steps, loss)

    # --- gradients (`g`) -------------------------------------------------------------------
    def toggle_gradients(self):
        self.gradients = not self.gradients
        self.diverging, self._other_diverging = self._other_diverging, self.diverging

    def gradient_texture(self, name):
        """Trainer.gradient_texture(name), asked once per frame (it interleaves a lane-blocked
        weight gradient with a draw); None when `name` has none (the loss does not depend
        on it)."""
        if name not in self._gradients:
            try:
                self._gradients[name] = self.trainer.gradient_texture(name)
            except GlcnnError:
                self._gradients[name] = None
        return self._gradients[name]

    def panel_source(self, index: int):
        return Gradients(self) if self.gradients and index == 2 else self.pipe

    def filter_texture(self):
        if self.gradients:
            return self.gradient_texture(f"{self.layer}.weight")
        return super().filter_texture()

    def panels(self) -> list[tuple]:
        """Viewer.panels; with gradients on, without the layer panel and the filters panel
        when the layer has no gradient (their labels say so)."""
        result = super().panels()
        if not self.gradients:
            return result
        layer = self.gradient_texture(self.layer) is not None
        weight = any(kind == "filters" for kind, *_ in result) and \
            self.gradient_texture(f"{self.layer}.weight") is not None
        return [panel for i, panel in enumerate(result)
                if (i != 2 or layer) and (panel[0] != "filters" or weight)]

    def draw(self):
        self._gradients = {}  # this frame's: asked before the panels draw
        if self.gradients:
            self.gradient_texture(self.layer)
            self.gradient_texture(f"{self.layer}.weight")
        super().draw()
        if self.gradients and self.gradient_texture(self.layer) is None:
            label_lines(self.overlay, 2, describe_no_gradient(self.layer))
        s = self.options.settings
        rate = self.trainer.steps / max(time.perf_counter() - (self.started or 0), 1e-6)
        text = (f"training step {self.trainer.steps}  batch {self.options.batch}  "
                f"{s.get('optimizer', 'sgd')} lr {s.get('lr', 1e-3):g}  {rate:.1f} steps/s")
        width = self.overlay.atlas.width(text)
        self.overlay.text(self.size[0] - GAP - width - 6,
                          STATUS_H + PLOT_H - 4 - self.overlay.line_height - 1, text)
        self.overlay.flush()

    def done(self) -> bool:
        """Whether the options' seconds of training have passed."""
        seconds = self.options.seconds
        return seconds is not None and self.started is not None and \
            time.perf_counter() - self.started >= seconds

    def close(self):
        self.trainer.release()  # the pipeline with it; Viewer.close releasing it again is harmless
        super().close()


def train(graph, source, options: Options, report=None) -> dict:
    """Train `graph` to reconstruct `source`'s frames, in the window or (options.window
    False) without one; save to options.save.

    Returns:
        {"losses": per step, "seconds": of training, "psnr": (before, after) on HELD_OUT
        frames for a synthetic source, else None}.
    Raises:
        GlcnnError: no window and neither steps nor seconds to stop after.
    """
    if not options.window and options.steps is None and options.seconds is None:
        raise GlcnnError("--no-window needs --steps N or --seconds S")
    frames = held_out(source, next(iter(graph.inputs.values())), graph.meta)
    if options.window:
        with TrainingViewer(graph, source, options, report) as viewer:
            return _windowed(viewer, frames, options)
    try:
        with Trainer(graph, **options.settings) as trainer:
            before = psnr(trainer.pipeline, frames) if frames is not None else None
            shape = next(iter(graph.inputs.values()))
            pool = FramePool(source, shape, graph.meta, seed=options.seed)
            losses, start = [], time.perf_counter()
            while not _finished(len(losses), start, options):
                x = pool.batch(options.batch)
                losses.append(trainer.step(x, x))
                if report is not None:
                    report(trainer.steps, losses[-1])
            return _finish(trainer, losses, time.perf_counter() - start, frames, before, options)
    finally:
        source.close()


def _windowed(viewer, frames, options) -> dict:
    """Viewer.run's loop, also stopping after options.seconds."""
    before = psnr(viewer.pipe, frames) if frames is not None else None
    glfw = viewer.glfw
    while not glfw.window_should_close(viewer.window):
        viewer.step()
        last = _finished(viewer.trainer.steps, 0, options) or viewer.done()
        if last and options.screenshot:
            viewer.screenshot(options.screenshot)
        glfw.swap_buffers(viewer.window)
        glfw.poll_events()
        if last:
            break
    seconds = time.perf_counter() - (viewer.started or time.perf_counter())
    return _finish(viewer.trainer, viewer.losses, seconds, frames, before, options)


def _finished(steps: int, start: float, options) -> bool:
    if options.steps is not None and steps >= options.steps:
        return True
    return bool(start) and options.seconds is not None and \
        time.perf_counter() - start >= options.seconds


def _finish(trainer, losses, seconds, frames, before, options) -> dict:
    after = psnr(trainer.pipeline, frames) if frames is not None else None
    if options.save:
        trainer.save(options.save)
        print(f"glcnn train: saved {options.save}", file=sys.stderr)
    return {"losses": losses, "seconds": seconds,
            "psnr": None if before is None else (before, after)}
