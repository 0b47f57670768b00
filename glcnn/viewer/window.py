"""A glfw window that runs a model on live frames and shows it, with no CPU readback.

Panels, left to right: input | output | one layer's activations (all channels as a
mosaic, or one channel enlarged) | that layer's filters. The model runs in the window's
own GL context; every panel is drawn from textures by glcnn.viewer.display.

Keys: the KEYS table below (printed by `h`).
"""

import sys
import time
from pathlib import Path

import moderngl
import numpy as np

from ..errors import ContextError, GlcnnError, ShapeError, quote
from ..layout import Atlas
from ..runtime.context import Context
from ..runtime.pipeline import Pipeline
from .bending import BENDABLE, Bender
from .display import Display, mosaic_grid

PANEL, GAP = 256, 8

# What each key does: its name (key_name) -> (Viewer method, arguments, help line).
KEYS = {
    "[": ("cycle_layer", (-1,), "previous layer"),
    "]": ("cycle_layer", (1,), "next layer"),
    "up": ("cycle_channel", (1,), "next channel"),
    "down": ("cycle_channel", (-1,), "previous channel"),
    "m": ("toggle_mode", (), "mosaic / single channel"),
    "d": ("toggle_diverging", (), "diverging colour map"),
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
    """Open a window running `graph` on frames from `source`.

    Args:
        graph: the model (its first input receives the frames).
        source: a frame source from glcnn.viewer.sources.
        layer: the layer shown in the activation and filter panels (default: the first).
        visible: show the window (False renders offscreen in a hidden window).
    Raises:
        ContextError: no display or no OpenGL 3.3. GlcnnError: `layer` is no layer of the
            graph.
    """

    def __init__(self, graph, source, layer=None, visible=True):
        self.size = (4 * PANEL + 5 * GAP, PANEL + 2 * GAP)
        self.glfw, self.window, self.ctx = open_window(self.size, "glcnn", visible)
        self.pipe = Pipeline(graph, self.ctx, keep="all")
        self.display = Display(self.ctx)
        self.bender = Bender(self.pipe)
        self._mirror = None  # (layer, 2D copy of its filters) for the filters panel
        self._filter_dims: dict[str, tuple] = {}  # layer -> (shape, dims) of its filters panel
        self.source = source
        self.input_name, self.input_shape = next(iter(graph.inputs.items()))
        self.layers = [node.name for node in graph.nodes]
        self.layer = layer if layer is not None else self.layers[0]
        if self.layer not in self.layers:
            raise GlcnnError(f"no layer {quote(self.layer)}; layers: {', '.join(self.layers)}")
        self.mode, self.channel, self.paused, self.diverging = "mosaic", 0, False, False
        self.pending_screenshot = None  # a path to save the next drawn frame as
        self.frame_input = FrameInput(self.pipe)
        self.frames, self.model_ms, self.fps = 0, 0.0, 0.0
        self.glfw.set_key_callback(self.window, self._on_key)
        print(f"glcnn view: source {source.name}, {self.ctx.renderer}", file=sys.stderr)

    # --- frames in ---------------------------------------------------------------------
    def upload(self, frame: np.ndarray):
        """Upload an RGBA uint8 frame and pre-process it into the model's input texture."""
        self.frame_input.upload(frame, self.source.name)

    # --- drawing ---------------------------------------------------------------------------
    def step(self):
        """One frame: read, upload, run the model, draw the panels."""
        start = time.perf_counter()
        if not self.paused or self.frames == 0:
            self.upload(self.source.read())
        t0 = time.perf_counter()
        self.pipe.execute()
        self.ctx.gl.finish()
        self.model_ms = (time.perf_counter() - t0) * 1e3
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

    def panels(self) -> list[tuple]:
        """(rect, texture, shape, mode, extra) for the four panels, in window pixels."""
        graph = self.pipe.graph
        out = graph.outputs[0]
        meta = graph.meta
        layer_shape = self.pipe.shapes[self.layer]
        items = [
            (self.input_name, self.input_shape, "image", meta.get("input_range")),
            (out, self.pipe.shapes[out], "image", meta.get("output_range")),
            (self.layer, layer_shape, self.mode, None),
        ]
        result = []
        for i, (name, shape, mode, value_range) in enumerate(items):
            mode = mode if shape[0] in (1, 3) or mode != "image" else "mosaic"
            content = _content_size(shape, mode)
            result.append((panel_rect(i, content), self.pipe.texture(name), shape, mode,
                           {"value_range": value_range if mode == "image" else None}))
        filt = self._filters()
        if filt is not None:
            tex, shape, dims = filt
            content = (min(dims[2], 16) * dims[1], min(dims[3], 16) * dims[0])
            result.append((panel_rect(3, content), tex, shape, "filters", {"filters": dims}))
        return result

    def _filters(self):
        """(texture, shape, dims) of the shown layer's filters panel; None for a layer without
        filters. The shapes are looked up once per layer: bending changes values, not shapes."""
        if self.pipe.graph.node(self.layer).op not in BENDABLE:
            return None
        if self.layer not in self._filter_dims:
            kh, kw = self.pipe.weights(self.layer)["W"].shape[2:]
            height, width, _ = self.pipe.weight_layout(self.layer)  # the texture may be larger
            dims = (kh, kw, width // kw, self.pipe.shapes[self.layer][0])
            self._filter_dims[self.layer] = ((4, height, width), dims)
        return self._filter_image(), *self._filter_dims[self.layer]

    def _filter_image(self):
        """The shown layer's filter texture, or for filters in a buffer texture (which
        display.glsl cannot sample) a 2D copy, made again after each edit (`bend`)."""
        tex = self.pipe.weight_texture(self.layer)
        if isinstance(tex, moderngl.Texture):
            return tex
        if self._mirror is None or self._mirror[0] != self.layer:
            self._release_mirror()
            self._mirror = (self.layer, self.ctx.gl.texture(tex.size, 4, tex.read(), dtype="f4"))
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
        for rect, tex, shape, mode, extra in self.panels():
            self.display.draw(screen, rect, tex, shape, mode, self.channel,
                              diverging=self.diverging and mode != "image", **extra)

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
        binding = KEYS.get(key_name(self.glfw, key, scancode))
        if binding is not None:
            method, args, _ = binding
            getattr(self, method)(*args)

    def cycle_layer(self, step):
        self.layer = self.layers[(self.layers.index(self.layer) + step) % len(self.layers)]
        self.channel = min(self.channel, self.pipe.shapes[self.layer][0] - 1)

    def cycle_channel(self, step):
        self.channel = (self.channel + step) % self.pipe.shapes[self.layer][0]

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
            self._release_mirror()

    def undo(self):
        self.bender.undo()
        self._release_mirror()

    def reset(self):
        self.bender.reset()
        self._release_mirror()

    def print_help(self):
        lines: dict[str, list[str]] = {}
        for name, (_, _, text) in KEYS.items():
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
        self.display.release()
        self.frame_input.release()
        self._release_mirror()
        self.pipe.release()
        self.source.close()
        self.glfw.destroy_window(self.window)


class FrameInput:
    """The viewer's per-frame input path, windowless: an RGBA uint8 frame goes up through
    a pixel buffer into a frame texture (with mipmaps), and shaders/preprocess.glsl resizes,
    scales (graph.meta input_range, mean, std, channel_order) and writes it into the
    pipeline's input texture. The frame texture and buffer are reallocated only when the
    frame size changes.

    Args:
        pipe: a Pipeline whose first input receives the frames; it must keep that input's
            texture (graph inputs always do).
    """

    def __init__(self, pipe):
        self.ctx, self.pipe = pipe.ctx, pipe
        self.name, self.shape = next(iter(pipe.graph.inputs.items()))
        gray = {"GRAY": 1} if self.shape[0] == 1 else {}
        self.program = self.ctx.program("preprocess.glsl", gray, "viewer preprocess")
        self.vao = self.ctx.gl.vertex_array(self.program, [])
        self.fbo = self.ctx.gl.framebuffer(color_attachments=[pipe.texture(self.name)])
        self.fbo.viewport = self.fbo.scissor = (0, 0, *Atlas.of(self.shape).size)
        self.frame_tex = self.pbo = None
        self._set_uniforms(pipe.graph.meta)

    def _set_uniforms(self, meta):
        c = self.shape[0]
        uniforms = {"u_frame": 0, "u_bgr": int(meta.get("channel_order", "rgb") == "bgr"),
                    "u_range": tuple(meta.get("input_range", (0, 1))),
                    "u_mean": tuple((list(meta.get("mean", [0] * c)) + [0] * 4)[:4]),
                    "u_std": tuple((list(meta.get("std", [1] * c)) + [1] * 4)[:4]),
                    "u_out": (c, *self.shape[1:], 1)}
        for key, value in uniforms.items():
            if key in self.program:
                self.program[key].value = value

    def upload(self, frame: np.ndarray, source: str = "frame source"):
        """Upload an (H, W, 4) uint8 RGBA frame and pre-process it on the GPU.

        Raises:
            ShapeError: a frame of another shape or dtype, naming `source`.
        """
        if frame.ndim != 3 or frame.shape[2] != 4 or frame.dtype != np.uint8:
            raise ShapeError(f"source {source} gave a {frame.dtype} frame of shape "
                               f"{frame.shape}; expected (H, W, 4) uint8 RGBA")
        h, w = frame.shape[:2]
        if self.frame_tex is None or self.frame_tex.size != (w, h):
            self._release_frame()
            self.frame_tex = self.ctx.gl.texture((w, h), 4)
            self.frame_tex.filter = (moderngl.LINEAR_MIPMAP_LINEAR, moderngl.LINEAR)
            self.pbo = self.ctx.gl.buffer(reserve=w * h * 4)
        self.pbo.write(np.ascontiguousarray(frame, np.uint8))
        self.frame_tex.write(self.pbo)
        self.frame_tex.build_mipmaps()
        self.frame_tex.use(0)
        self.fbo.use()
        self.vao.render(moderngl.TRIANGLES, vertices=3)

    def _release_frame(self):
        for obj in (self.frame_tex, self.pbo):
            if obj is not None:
                obj.release()
        self.frame_tex = self.pbo = None

    def release(self):
        """Free the frame texture, pixel buffer, framebuffer and vertex array."""
        self.ctx.park()
        self._release_frame()
        self.fbo.release()
        self.vao.release()


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


def panel_rect(index: int, content) -> tuple[int, int, int, int]:
    """Where panel `index` draws content of (width, height) texels: centred, aspect kept,
    an integer magnification when it fits (so texels map to whole pixel blocks)."""
    w, h = content
    scale = min(PANEL / w, PANEL / h)
    scale = float(int(scale)) if scale >= 1 else scale
    rw, rh = max(1, round(w * scale)), max(1, round(h * scale))
    x0 = GAP + index * (PANEL + GAP) + (PANEL - rw) // 2
    y0 = GAP + (PANEL - rh) // 2
    return x0, y0, rw, rh


def _content_size(shape, mode) -> tuple[int, int]:
    c, h, w = shape
    if mode == "mosaic":
        cols, rows = mosaic_grid(c)
        return cols * w, rows * h
    return w, h

