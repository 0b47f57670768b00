"""Show textures in a window without reading them back: GPU min/max, then one draw per panel.

`Display` owns its program and, per shown tensor, two small min/max textures allocated
once (glcnn.runtime.stats). Each frame, `draw()` reduces the tensor's per-channel min/max on the
GPU (shaders/minmax.glsl, rows then columns) and draws it into a rectangle of the bound
framebuffer with shaders/display.glsl, which maps values to colours.
"""

import math

import moderngl
import numpy as np

from ..layout import Atlas, unpack
from ..runtime.stats import ChannelMinMax

MODES = {"image": 0, "mosaic": 1, "channel": 2, "filters": 3}


class Display:
    """Draws tensors and weight textures into rectangles of the current framebuffer.

    Args:
        ctx: the glcnn.Context the textures live in (the window's context).
    """

    def __init__(self, ctx):
        self.ctx = ctx
        self.stats = ChannelMinMax(ctx)
        self.draw_prog = ctx.program("display.glsl", {"CUSTOM_MAIN": 1}, "display")
        self.vao = ctx.gl.vertex_array(self.draw_prog, [])

    def minmax(self, texture, shape) -> moderngl.Texture:
        """Per-channel (min, max) of an atlas as a (C, 1, 2) atlas texture, on the GPU."""
        return self.stats.texture(texture, shape)

    def draw(self, target, rect, texture, shape, mode="mosaic", channel=0, value_range=None,
             diverging=False, filters=None, view=None):
        """Draw `texture` into `rect` = (x, y, w, h) of framebuffer `target`.

        Args:
            shape: (C, H, W) of the tensor; for mode "filters", the weight texture is read
                as a (4, rows, cols) atlas for its range and `filters` = (kh, kw, Cg, Co).
            mode: "image", "mosaic", "channel" or "filters".
            value_range: fixed (lo, hi) mapped to black..white; None normalises on the GPU.
            diverging: colour negative values blue and positive red around zero.
            view: (x, y, w, h) texels of the tensor to show in mode "image" (row 0 at the
                top); None shows all of it.
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
            "u_view": tuple(view or (0, 0, shape[2], shape[1])),
        }
        if mode == "filters":
            kh, kw, cg, co = filters
            values["u_grid"] = (min(cg, 16), min(co, 16))
        for key, value in values.items():
            if key in p:
                p[key].value = value
        target.use()
        self.ctx.gl.viewport = tuple(int(v) for v in rect)
        self.vao.render(moderngl.TRIANGLES, vertices=3)

    def ranges(self, texture, shape) -> np.ndarray:
        """(C, 2) per-channel (min, max) of the last `draw` of `texture` (for labels): reads
        back the 2·C numbers it reduced, without reducing again."""
        result = self.stats.buffers[(texture.glo, tuple(shape))].result
        data = np.frombuffer(result.read(), np.float32).reshape(result.height, result.width, 4)
        return unpack(data, (shape[0], 1, 2))[:, 0, :]

    def release(self):
        self.stats.release()
        self.vao.release()


def mosaic_grid(channels: int) -> tuple[int, int]:
    """(columns, rows) of the channel mosaic: near-square, row by row."""
    cols = math.ceil(math.sqrt(channels))
    return cols, math.ceil(channels / cols)
