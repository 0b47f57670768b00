"""Show textures in a window without reading them back: GPU min/max, then one draw per panel.

`Display` owns its few programs and, per shown tensor, two small min/max textures
allocated once. Each frame, `draw()` reduces the tensor's per-channel min/max on the GPU
(shaders/minmax.glsl, rows then columns) and draws it into a rectangle of the bound
framebuffer with shaders/display.glsl, which maps values to colours.
"""

import math
from dataclasses import dataclass

import moderngl

from .layout import Atlas

MODES = {"image": 0, "mosaic": 1, "channel": 2, "filters": 3}


@dataclass
class _Reduction:
    rows: moderngl.Texture
    rows_fbo: moderngl.Framebuffer
    result: moderngl.Texture
    result_fbo: moderngl.Framebuffer


class Display:
    """Draws tensors and weight textures into rectangles of the current framebuffer.

    Args:
        ctx: the glcnn.Context the textures live in (the window's context).
    """

    def __init__(self, ctx):
        self.ctx = ctx
        self.rows_prog = ctx.program("minmax.glsl", {"ROWS": 1}, "display min/max rows")
        self.cols_prog = ctx.program("minmax.glsl", {"COLS": 1}, "display min/max columns")
        self.draw_prog = ctx.program("display.glsl", {"CUSTOM_MAIN": 1}, "display")
        self.vaos = {id(p): ctx.gl.vertex_array(p, []) for p in
                     (self.rows_prog, self.cols_prog, self.draw_prog)}
        self.reductions: dict[tuple, _Reduction] = {}

    def _reduction(self, key, shape) -> _Reduction:
        if key not in self.reductions:
            c, h, _ = shape
            textures = [self._texture((c, h, 2)), self._texture((c, 1, 2))]
            fbos = [self.ctx.gl.framebuffer(color_attachments=[t]) for t in textures]
            self.reductions[key] = _Reduction(textures[0], fbos[0], textures[1], fbos[1])
        return self.reductions[key]

    def _texture(self, shape):
        tex = self.ctx.gl.texture(Atlas.of(shape).size, 4, dtype="f4")
        tex.filter = (moderngl.NEAREST, moderngl.NEAREST)
        return tex

    def minmax(self, texture, shape, key=None) -> moderngl.Texture:
        """Per-channel (min, max) of an atlas as a (C, 1, 2) atlas texture, on the GPU."""
        red = self._reduction(key or (texture.glo, tuple(shape)), shape)
        c, h, _ = shape
        self._reduce(self.rows_prog, texture, Atlas.of(shape), red.rows_fbo, Atlas.of((c, h, 2)))
        self._reduce(self.cols_prog, red.rows, Atlas.of((c, h, 2)), red.result_fbo,
                     Atlas.of((c, 1, 2)))
        return red.result

    def _reduce(self, prog, source, atlas, fbo, out_atlas):
        source.use(0)
        prog["u_input"].value = 0
        prog["u_input_shape"].value = atlas.shape_uniform
        prog["u_out"].value = out_atlas.shape_uniform
        fbo.use()
        self.vaos[id(prog)].render(moderngl.TRIANGLES, vertices=3)

    def draw(self, target, rect, texture, shape, mode="mosaic", channel=0, value_range=None,
             diverging=False, filters=None):
        """Draw `texture` into `rect` = (x, y, w, h) of framebuffer `target`.

        Args:
            shape: (C, H, W) of the tensor; for mode "filters", the weight texture is read
                as a (4, rows, cols) atlas for its range and `filters` = (kh, kw, Cg, Co).
            mode: "image", "mosaic", "channel" or "filters".
            value_range: fixed (lo, hi) mapped to black..white; None normalises on the GPU.
            diverging: colour negative values blue and positive red around zero.
        """
        minmax = self.minmax(texture, shape)
        p = self.draw_prog
        texture.use(0)
        minmax.use(1)
        values = {
            "u_tex": 0, "u_minmax": 1, "u_tex_shape": Atlas.of(shape).shape_uniform,
            "u_minmax_shape": Atlas.of((shape[0], 1, 2)).shape_uniform,
            "u_rect": tuple(float(v) for v in rect), "u_mode": MODES[mode],
            "u_channel": int(channel), "u_grid": mosaic_grid(shape[0]),
            "u_filter": tuple(filters or (1, 1, 1, 1)), "u_range": tuple(value_range or (0, 1)),
            "u_fixed_range": int(value_range is not None), "u_diverging": int(diverging),
        }
        if mode == "filters":
            kh, kw, cg, co = filters
            values["u_grid"] = (min(cg, 16), min(co, 16))
        for key, value in values.items():
            if key in p:
                p[key].value = value
        target.use()
        self.ctx.gl.viewport = tuple(int(v) for v in rect)
        self.vaos[id(p)].render(moderngl.TRIANGLES, vertices=3)

    def release(self):
        for red in self.reductions.values():
            for obj in (red.rows_fbo, red.result_fbo, red.rows, red.result):
                obj.release()
        for vao in self.vaos.values():
            vao.release()
        self.reductions = {}


def mosaic_grid(channels: int) -> tuple[int, int]:
    """(columns, rows) of the channel mosaic: near-square, row by row."""
    cols = math.ceil(math.sqrt(channels))
    return cols, math.ceil(channels / cols)
