"""Text, rectangles and lines drawn over the viewer's panels, by the window's own GL context.

    overlay = Overlay(ctx, window_size)
    overlay.text(8, 20, "enc1  (64, 48, 64)")     # bottom-left of the line box, window pixels
    overlay.rect(8, 8, 40, 10, (1, 0.5, 0, 1))
    overlay.line([(0, 0), (10, 5), (20, 3)], (0.3, 0.8, 1, 1))
    overlay.flush()                                # one instanced draw, then the lines

Why a glyph atlas and not an immediate-mode GUI binding (Dear ImGui): the viewer only
labels what it draws, it has no widgets to click; a font Pillow ships (Pillow is already a
dependency) rendered once into an R8 texture, and quads placed on whole pixels keep the
window a GL 3.3 core moderngl context with no extra package, and screenshots pixel-exact.
Glyphs come from `PIL.ImageFont.load_default(size)` (the scalable font Pillow ≥ 10.1 bundles),
or Pillow's fixed bitmap font where that is not available.
"""

import moderngl
import numpy as np

from ..errors import ShaderCompileError
from ..resources import resource_path, shader_text
from ..runtime import shaders

CHARS = "".join(chr(c) for c in range(32, 127))  # the labels are ASCII
FLOATS_PER_QUAD = 12  # in_rect, in_uv, in_color


def load_font(size: int):
    """Pillow's bundled scalable font at `size` pixels, else its fixed bitmap font."""
    from PIL import ImageFont
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, ImportError, OSError, AttributeError):  # Pillow < 10.1, no FreeType
        return ImageFont.load_default()


class GlyphAtlas:
    """CHARS rendered once into an (H, W) uint8 coverage image, one cell per character.

    Attributes:
        image: the atlas; cells[ch] = (u0, v0, u1, v1) texels of the character's cell (v
            down); advance[ch] = pixels the pen moves; line_height: a line box's height.
    """

    def __init__(self, size: int = 12, width: int = 512):
        from PIL import Image, ImageDraw
        font = load_font(size)
        ascent, descent = font.getmetrics() if hasattr(font, "getmetrics") else (size, 2)
        self.line_height = ascent + descent
        self.advance, self.cells, boxes = {}, {}, {}
        x = y = 0
        for ch in CHARS:
            self.advance[ch] = max(1, round(font.getlength(ch)))
            right = max(self.advance[ch], font.getbbox(ch)[2]) + 1
            if x + right > width:
                x, y = 0, y + self.line_height
            boxes[ch] = (x, y, right)
            x += right
        image = Image.new("L", (width, y + self.line_height), 0)
        draw = ImageDraw.Draw(image)
        for ch, (x, y, right) in boxes.items():
            draw.text((x, y), ch, font=font, fill=255)
            self.cells[ch] = (x, y, x + right, y + self.line_height)
        self.image = np.asarray(image)

    def width(self, text: str) -> int:
        """Pixels `text` takes on a line."""
        return sum(self.advance.get(ch, self.advance["?"]) for ch in text)


class Overlay:
    """Queues glyphs, solid rectangles and line strips; `flush` draws them over the frame.

    Args:
        ctx: the window's glcnn.Context.
        size: (width, height) of the window in pixels.
        font_size: pixel size of the font.
    """

    def __init__(self, ctx, size, font_size: int = 12):
        self.ctx, self.size = ctx, tuple(size)
        self.atlas = GlyphAtlas(font_size)
        h, w = self.atlas.image.shape
        self.glyphs = ctx.gl.texture((w, h), 1, np.ascontiguousarray(self.atlas.image))
        self.glyphs.filter = (moderngl.NEAREST, moderngl.NEAREST)
        self.program = _program(ctx)
        self.quads: list[tuple] = []
        self.lines: list[list[tuple]] = []
        self.buffer = self.vao = self.line_vao = None
        self._capacity = 0

    @property
    def line_height(self) -> int:
        return self.atlas.line_height

    def text(self, x: int, y: int, text: str, color=(0.9, 0.9, 0.9, 1.0)) -> int:
        """Queue `text` with its line box's bottom-left at window pixel (x, y); returns its
        width. Characters the atlas lacks show as '?'."""
        pen = int(x)
        for ch in text:
            ch = ch if ch in self.atlas.cells else "?"
            u0, v0, u1, v1 = self.atlas.cells[ch]
            self.quads.append((pen, int(y), u1 - u0, v1 - v0, u0, v0, u1, v1, *color))
            pen += self.atlas.advance[ch]
        return pen - int(x)

    def rect(self, x, y, w, h, color):
        """Queue a solid rectangle (window pixels, bottom-left corner)."""
        self.quads.append((x, y, w, h, 0, 0, 0, 0, *color))

    def line(self, points, color):
        """Queue a line strip through `points` (window pixels)."""
        if len(points) >= 2:
            self.lines.append([(x, y, 0, 0, 0, 0, 0, 0, *color) for x, y in points])

    def flush(self):
        """Draw everything queued, blended over the bound framebuffer, and empty the queue."""
        mgl, gl = moderngl, self.ctx.gl
        rows = self.quads + [p for strip in self.lines for p in strip]
        if rows:
            self._reserve(len(rows))
            self.buffer.write(np.asarray(rows, np.float32).tobytes())
            gl.viewport = (0, 0, *self.size)
            gl.enable(mgl.BLEND)
            gl.blend_func = mgl.SRC_ALPHA, mgl.ONE_MINUS_SRC_ALPHA
            self.glyphs.use(0)
            self.program["u_glyphs"].value = 0
            self.program["u_screen"].value = self.size
            self.program["u_lines"].value = 0
            if self.quads:
                self.vao.render(mgl.TRIANGLE_STRIP, vertices=4, instances=len(self.quads))
            self.program["u_lines"].value = 1
            first = len(self.quads)
            for strip in self.lines:
                self.line_vao.render(mgl.LINE_STRIP, vertices=len(strip), first=first)
                first += len(strip)
            gl.disable(mgl.BLEND)
        self.quads, self.lines = [], []

    def _reserve(self, rows: int):
        """A buffer (and its two vertex arrays) for at least `rows` quads or points."""
        if rows <= self._capacity:
            return
        self._release_buffers()
        self._capacity = max(rows, 2 * self._capacity, 256)
        self.buffer = self.ctx.gl.buffer(reserve=self._capacity * FLOATS_PER_QUAD * 4)
        names = ("in_rect", "in_uv", "in_color")
        self.vao = self.ctx.gl.vertex_array(self.program, [(self.buffer, "4f 4f 4f/i", *names)])
        self.line_vao = self.ctx.gl.vertex_array(self.program, [(self.buffer, "4f 4f 4f", *names)])

    def _release_buffers(self):
        for obj in (self.vao, self.line_vao, self.buffer):
            if obj is not None:
                obj.release()
        self.buffer = self.vao = self.line_vao = None

    def release(self):
        self._release_buffers()
        self.glyphs.release()
        self.program.release()


def _program(ctx):
    """overlay.vert + overlay.glsl: their own vertex stage, so not Context.program (whose
    programs all share fullscreen.vert).

    Raises:
        ShaderCompileError: the driver refused them.
    """
    fragment = shaders.build_source("overlay.glsl", {"CUSTOM_MAIN": 1})
    try:
        return ctx.gl.program(vertex_shader="#version 330 core\n" + shader_text("overlay.vert"),
                              fragment_shader=fragment)
    except moderngl.Error as exc:
        raise ShaderCompileError(str(resource_path("shaders", "overlay.glsl")), "viewer overlay",
                                 {"CUSTOM_MAIN": 1}, str(exc),
                                 shaders.excerpt(fragment, str(exc))) from None
