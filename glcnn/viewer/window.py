"""A glfw window that runs a model on live frames and shows it, every panel labelled.

Panels, left to right: input | output | one layer's activations (all channels as a
mosaic, or one channel enlarged) | that layer's filters (glcnn.viewer.filters); below them
a line plot (model time, or what `Viewer.plot` is fed) and a status line with the keys
(layout: glcnn.viewer.panels). The model runs in the window's own GL context; images are
drawn from textures by glcnn.viewer.display, text, bars and lines by glcnn.viewer.overlay.
Only vectors (C, 1, 1) and per-channel ranges (2·C numbers) are read back, for bars and labels.

Keys: the KEYS table below (printed by `h`).
"""

import sys
import time
from pathlib import Path

import moderngl
import numpy as np

from ..errors import ContextError, GlcnnError, quote
from ..runtime.context import Context
from ..runtime.pipeline import Pipeline
from .bending import BENDABLE, Bender
from .display import Display, mosaic_grid
from .filters import FilterBank, FilterGrid, bank_of
from .frame_input import FrameInput  # noqa: F401  (was defined here; tests import it)
from .labels import describe_filters, describe_tensor, describe_vector, read_labels, status_line
from .latent import LatentWalk
from .overlay import Overlay
from .panels import (
    DIM,
    GAP,
    PANEL,  # noqa: F401  (tests import it from here)
    PLOT_H,
    STATUS_H,
    WINDOW,
    LinePlot,
    is_vector,
    label_lines,
    panel_box,
    panel_rect,
    top_k_bars,
    true_scale_views,
    vector_bars,
)

# What each key does: its name (key_name) -> (Viewer method, arguments, help line).
KEYS = {
    "[": ("cycle_layer", (-1,), "previous layer"),
    "]": ("cycle_layer", (1,), "next layer"),
    "up": ("cycle_channel", (1,), "next channel"),
    "down": ("cycle_channel", (-1,), "previous channel"),
    "m": ("toggle_mode", (), "mosaic / single channel"),
    "d": ("toggle_diverging", (), "diverging colour map"),
    ",": ("cycle_in_channel", (-1,), "filters: previous input channel"),
    ".": ("cycle_in_channel", (1,), "filters: next input channel"),
    "space": ("toggle_pause", (), "pause"),
    "s": ("request_screenshot", (), "save the next frame as glcnn-<n>.png"),
    "z": ("bend", ("zero",), "zero the channel's filter and bias"),
    "i": ("bend", ("invert",), "invert the channel's filter and bias"),
    "=": ("bend", ("scale", 1.5), "scale the channel ×1.5"),
    "+": ("bend", ("scale", 1.5), "scale the channel ×1.5"),
    "-": ("bend", ("scale", 0.5), "scale the channel ×0.5"),
    "u": ("undo", (), "undo the last edit"),
    "r": ("reset", (), "reset all edits"),
    "h": ("print_help", (), "this help"),
    "q": ("quit", (), "quit"),
    "escape": ("quit", (), "quit"),
}
# Bound keys that glfw gives no name (not printable): named after their glfw.KEY_ constant.
UNNAMED_KEYS = ("space", "escape", "up", "down")


def _glfw():
    import glfw
    if not glfw.init():
        raise ContextError("glfw could not initialise: no display? Set DISPLAY or run under "
                           "Xvfb (apt-get install xvfb; xvfb-run glcnn view ...)")
    return glfw


class Viewer:
    """Open a window running `graph` on frames from `source`, every panel labelled.

    A (nz, 1, 1) first input is a generator's latent: it gets a slowly walking latent
    (glcnn.viewer.latent) instead of frames. Vector tensors (C, 1, 1) show as bars: the
    output as the top TOP_K values with `labels`, others as one bar per value.

    Args:
        graph: the model (its first input receives the frames).
        source: a frame source from glcnn.viewer.sources.
        layer: the layer shown in the activation and filter panels (default: the first).
        visible: show the window (False renders offscreen in a hidden window).
        labels: names of a vector output's entries (class names): a list, a text file with
            one per line, or None.
    Raises:
        ContextError: no display or no OpenGL 3.3. GlcnnError: `layer` is no layer of the
            graph; a `labels` file that cannot be read (before any window opens).
    """

    keys = KEYS  # the bindings `_on_key` and `h` use (a training window adds `g`)

    def __init__(self, graph, source, layer=None, visible=True, labels=None):
        self.labels = read_labels(labels) if isinstance(labels, str | Path) else labels
        self.size = WINDOW
        self.glfw, self.window, self.ctx = open_window(self.size, "glcnn", visible)
        self.pipe = self.make_pipeline(graph)
        self.display, self.filter_grid = Display(self.ctx), FilterGrid(self.ctx)
        self.overlay, self.lines = Overlay(self.ctx, self.size), LinePlot()
        self.bender = Bender(self.pipe)
        self._mirror = None  # (layer, 2D copy of its filters) for the filters panel
        self.filters_changed = True  # the copy is refreshed from the filters before drawing
        self._banks: dict[str, FilterBank] = {}
        self.source = source
        self.input_name, self.input_shape = next(iter(graph.inputs.items()))
        self.layers = [node.name for node in graph.nodes]
        self.layer = layer if layer is not None else self.layers[0]
        if self.layer not in self.layers:
            raise GlcnnError(f"no layer {quote(self.layer)}; layers: {', '.join(self.layers)}")
        self.mode, self.channel, self.paused, self.diverging = "mosaic", 0, False, False
        self.in_channel = 0  # the filters panel's input channel (grey tiles)
        self.pending_screenshot = None  # a path to save the next drawn frame as
        self.latent = LatentWalk(self.input_shape) if is_vector(self.input_shape) else None
        self.frame_input = None if self.latent else FrameInput(self.pipe)
        self.frames, self.walked, self.model_ms, self.fps = 0, 0, 0.0, 0.0
        self.glfw.set_key_callback(self.window, self._on_key)
        out, out_shape = graph.outputs[0], self.pipe.shapes[graph.outputs[0]]
        if self.labels is not None and len(self.labels) != out_shape[0]:
            print(f"glcnn view: note: {len(self.labels)} labels for the {out_shape[0]} entries "
                  f"of output {quote(out)}", file=sys.stderr)
        fed = (f"a latent walk into {self.input_name} {self.input_shape}" if self.latent
               else f"source {source.name}")
        print(f"glcnn view: {fed}, {self.ctx.renderer}", file=sys.stderr)

    def make_pipeline(self, graph) -> Pipeline:
        """The pipeline the window runs and shows (a training window: its Trainer's)."""
        return Pipeline(graph, self.ctx, keep="all")

    def panel_source(self, index: int):
        """Where panel `index` gets its tensor (`texture(name)`, `read(name)`): the pipeline
        (a training window's `g`: the layer panel from the gradients)."""
        return self.pipe

    # --- frames in ---------------------------------------------------------------------
    def upload(self, frame: np.ndarray):
        """Upload an RGBA uint8 frame and pre-process it into the model's input texture."""
        self.frame_input.upload(frame, self.source.name)

    def plot(self, name: str, value: float):
        """Add `value` to series `name` of the line plot (e.g. a training loss per step)."""
        self.lines.add(name, value)

    # --- drawing ---------------------------------------------------------------------------
    def step(self):
        """One frame: read (or walk the latent), upload, run the model, draw the panels."""
        start = time.perf_counter()
        self.advance()
        self.draw()
        if self.pending_screenshot:
            self.screenshot(self.pending_screenshot)
            self.pending_screenshot = None
        self.ctx.check_error(f"frame {self.frames}")  # a lost context stops the loop
        self.frames += 1
        self.fps = 0.9 * self.fps + 0.1 / max(time.perf_counter() - start, 1e-6)
        self.glfw.set_window_title(
            self.window, f"glcnn | {self.layer} ({self.mode}"
            f"{'' if self.mode == 'mosaic' else f' {self.channel}'}) | model "
            f"{self.model_ms:.1f} ms | {self.fps:.1f} FPS{' | paused' if self.paused else ''}")

    def advance(self):
        """Run the model on the next input (the same one while paused)."""
        if self.latent is not None and (not self.paused or self.frames == 0):
            self.pipe.upload(self.input_name, self.latent.at(self.walked))
            self.walked += 1
        elif not self.paused or self.frames == 0:
            self.upload(self.source.read())
        t0 = time.perf_counter()
        self.pipe.execute()
        self.ctx.gl.finish()
        self.model_ms = (time.perf_counter() - t0) * 1e3
        if self.frames:  # the first run compiles: seconds, off the scale
            self.plot("model ms", self.model_ms)

    def panels(self) -> list[tuple]:
        """(kind, rect, name, shape, extra) of the panels in window pixels; kind is "display"
        (Display.draw with extra), "bars", "top_k" (vectors) or "filters" (extra: bank)."""
        graph = self.pipe.graph
        meta = graph.meta
        items = [(self.input_name, "image", meta.get("input_range")),
                 (graph.outputs[0], "image", meta.get("output_range")),
                 (self.layer, self.mode, None)]
        out_shape = self.pipe.shapes[graph.outputs[0]]
        views = true_scale_views(self.input_shape, out_shape) or (None, None)
        result = []
        for i, (name, mode, value_range) in enumerate(items):
            shape = self.pipe.shapes[name]
            if is_vector(shape):
                result.append(("top_k" if i == 1 else "bars", panel_box(i), name, shape, {}))
                continue
            mode = mode if shape[0] in (1, 3) or mode != "image" else "mosaic"
            view = views[i] if i < 2 and mode == "image" else None
            content = view[2:] if view else _content_size(shape, mode)
            result.append(("display", panel_rect(i, content), name, shape,
                           {"mode": mode, "value_range": value_range if mode == "image" else None,
                            "view": view}))
        bank = self._bank()
        if bank is not None:
            result.append(("filters", panel_rect(3, bank.grid_size()), self.layer, None,
                           {"bank": bank}))
        return result

    def _bank(self) -> FilterBank | None:
        """The shown layer's filter bank; None for a layer without filters."""
        node = self.pipe.graph.node(self.layer)
        if node.op not in BENDABLE:
            return None
        if self.layer not in self._banks:
            self._banks[self.layer] = bank_of(node, self.pipe.weights(self.layer)["W"].shape)
        return self._banks[self.layer]

    def filter_texture(self):
        """The shown layer's filter texture, or for filters in a buffer texture (which
        filter_grid.glsl cannot sample) a 2D copy of them, one texture per shown layer,
        refilled on the GL side (no trip through Python) after `filters_changed` (an edit,
        a training step)."""
        tex = self.pipe.weight_texture(self.layer)
        if isinstance(tex, moderngl.Texture):
            return tex
        if self._mirror is None or self._mirror[0] != self.layer:
            self._release_mirror()
            self._mirror = (self.layer, self.ctx.gl.texture(tex.size, 4, dtype="f4"))
            self.filters_changed = True
        if self.filters_changed:
            self._mirror[1].write(tex.buffer)
            self.filters_changed = False
        return self._mirror[1]

    def _release_mirror(self):
        if self._mirror is not None:
            self._mirror[1].release()
            self._mirror = None

    def draw(self):
        screen = self.ctx.gl.screen
        screen.use()
        self.ctx.gl.viewport = (0, 0, *self.size)
        self.ctx.gl.clear(0.12, 0.12, 0.12)
        labels = {}
        for i, (kind, rect, name, shape, extra) in enumerate(self.panels()):
            if kind == "display":
                self.display.draw(screen, rect, self.panel_source(i).texture(name), shape,
                                  extra["mode"], self.channel, value_range=extra["value_range"],
                                  diverging=self.diverging and extra["mode"] != "image",
                                  view=extra["view"])
                labels[i] = describe_tensor(self, i, name, shape, extra["mode"], extra["view"])
            elif kind == "filters":
                self.filter_grid.draw(screen, rect, self.filter_texture(), extra["bank"],
                                      self.in_channel)
                labels[3] = describe_filters(self, extra["bank"])
            else:
                values = self.panel_source(i).read(name).reshape(-1)  # C numbers: sorted, named
                if kind == "top_k":
                    top_k_bars(self.overlay, rect, values, self.labels)
                else:
                    vector_bars(self.overlay, rect, values)
                labels[i] = describe_vector(self, i, name, shape, values, kind)
        labels.setdefault(3, describe_filters(self, None))
        for i, lines in labels.items():
            label_lines(self.overlay, i, lines)
        self.lines.draw(self.overlay, (GAP, STATUS_H, self.size[0] - 2 * GAP, PLOT_H - 4))
        self.overlay.text(GAP, 3, status_line(self), DIM)
        screen.use()
        self.overlay.flush()

    # --- loop, screenshot, keys ------------------------------------------------------------
    def run(self, frames=None, screenshot=None):
        """Render until the window closes, or `frames` frames; save the last as `screenshot`.

        Raises:
            GlcnnError: `screenshot` has no image extension PIL writes or no folder to go
                to (checked before the first frame), or cannot be written.
        """
        if screenshot:
            check_screenshot_path(screenshot)
        while not self.glfw.window_should_close(self.window):
            self.step()
            last = frames is not None and self.frames >= frames
            if last and screenshot:
                self.screenshot(screenshot)
            self.glfw.swap_buffers(self.window)
            self.glfw.poll_events()
            if last:
                break

    def screenshot(self, path):
        """Save what the window shows now (the back buffer before swap) as PNG."""
        from PIL import Image
        try:
            Image.fromarray(read_screen(self.ctx, self.size)).save(path)
        except (OSError, ValueError, KeyError) as exc:  # PIL: unknown extension, I/O
            raise GlcnnError(f"screenshot {path}: cannot save it ({type(exc).__name__}: "
                             f"{str(exc)[:200]})") from None
        print(f"glcnn view: saved {path}", file=sys.stderr)

    # --- keys: one method per KEYS entry ---------------------------------------------------
    def _on_key(self, window, key, scancode, action, mods):
        if action not in (self.glfw.PRESS, self.glfw.REPEAT):
            return
        binding = self.keys.get(key_name(self.glfw, key, scancode))
        if binding is not None:
            method, args, _ = binding
            getattr(self, method)(*args)

    def cycle_layer(self, step):
        self.layer = self.layers[(self.layers.index(self.layer) + step) % len(self.layers)]
        self.channel = min(self.channel, self.pipe.shapes[self.layer][0] - 1)

    def cycle_channel(self, step):
        self.channel = (self.channel + step) % self.pipe.shapes[self.layer][0]

    def cycle_in_channel(self, step):
        bank = self._bank()
        if bank is not None:
            self.in_channel = (bank.in_channel(self.in_channel) + step) % bank.cg

    def toggle_mode(self):
        self.mode = "channel" if self.mode == "mosaic" else "mosaic"

    def toggle_diverging(self):
        self.diverging = not self.diverging

    def toggle_pause(self):
        self.paused = not self.paused

    def request_screenshot(self):
        """Save the next frame drawn: keys arrive after the swap, when the back buffer's
        contents are undefined."""
        self.pending_screenshot = f"glcnn-{self.frames}.png"

    def bend(self, action, *args):
        if self.pipe.graph.node(self.layer).op in BENDABLE:
            getattr(self.bender, action)(self.layer, self.channel, *args)
            self.filters_changed = True

    def undo(self):
        self.bender.undo()
        self.filters_changed = True

    def reset(self):
        self.bender.reset()
        self.filters_changed = True

    def print_help(self):
        lines: dict[str, list[str]] = {}
        for name, (_, _, text) in self.keys.items():
            lines.setdefault(text, []).append(name)
        print("\n".join(f"  {' / '.join(names):<12} {text}" for text, names in lines.items()))

    def quit(self):
        self.glfw.set_window_should_close(self.window, True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Release GL objects, the source and the window."""
        for part in (self.display, self.filter_grid, self.overlay, self.frame_input):
            if part is not None:
                part.release()
        self._release_mirror()
        self.pipe.release()
        self.source.close()
        self.glfw.destroy_window(self.window)


def open_window(size, title="glcnn", visible=True):
    """A fixed-size glfw window with an OpenGL 3.3 core context, wrapped as a glcnn.Context.

    Returns:
        (glfw module, window, Context).
    Raises:
        ContextError: no display or no OpenGL 3.3.
    """
    glfw = _glfw()
    for hint, value in ((glfw.CONTEXT_VERSION_MAJOR, 3), (glfw.CONTEXT_VERSION_MINOR, 3),
                        (glfw.OPENGL_PROFILE, glfw.OPENGL_CORE_PROFILE),
                        (glfw.OPENGL_FORWARD_COMPAT, True), (glfw.VISIBLE, visible),
                        (glfw.RESIZABLE, False)):
        glfw.window_hint(hint, value)
    window = glfw.create_window(*size, title, None, None)
    if not window:
        raise ContextError("glfw could not open an OpenGL 3.3 core window")
    glfw.make_context_current(window)
    return glfw, window, Context(moderngl.create_context())


def key_name(glfw, key: int, scancode: int) -> str:
    """A key's name in KEYS: glfw's name for a printable key (it follows the keyboard
    layout), the lower-case glfw.KEY_ suffix for UNNAMED_KEYS, else ""."""
    name = glfw.get_key_name(key, scancode)
    if name:
        return name
    return next((n for n in UNNAMED_KEYS if key == getattr(glfw, f"KEY_{n.upper()}")), "")


def check_screenshot_path(path) -> None:
    """Refuse a screenshot path PIL could not write: no image extension it knows, or a
    folder that does not exist.

    Raises:
        GlcnnError: naming the path and what is wrong.
    """
    from PIL import Image
    path = Path(path)
    if path.suffix.lower() not in Image.registered_extensions():
        raise GlcnnError(f"screenshot {quote(str(path))}: unknown image extension "
                         f"{quote(path.suffix)} (use .png)")
    if not path.parent.is_dir():
        raise GlcnnError(f"screenshot {quote(str(path))}: folder {quote(str(path.parent))} "
                         "does not exist")


def read_screen(ctx, size) -> np.ndarray:
    """The window's back buffer as an (H, W, 3) uint8 image, top row first.

    Not `ctx.gl.screen.read()`: moderngl's Framebuffer.read() selects GL_COLOR_ATTACHMENT0
    as the read buffer, which a window's default framebuffer does not have, so GL records
    GL_INVALID_OPERATION (the pixels still come from GL_BACK) and the viewer's next error
    check fails. Copying into a texture reads the window's own read buffer instead.
    """
    copy = ctx.gl.texture(size, 4)
    try:
        ctx.gl.copy_framebuffer(copy, ctx.gl.screen)
        data = copy.read()
    finally:
        copy.release()
    image = np.frombuffer(data, np.uint8).reshape(size[1], size[0], 4)
    return np.ascontiguousarray(image[::-1, :, :3])


def _content_size(shape, mode) -> tuple[int, int]:
    c, h, w = shape
    if mode == "mosaic":
        cols, rows = mosaic_grid(c)
        return cols * w, rows * h
    return w, h

