"""The filter panel: a conv layer's filters as a square grid of tiles (shaders/filter_grid.glsl).

One tile per output channel, in RGB when the filters read 3 input channels, otherwise one
chosen input channel in grey (the viewer's `,` and `.` keys change it). Each tile is
normalised on its own: a small GPU pass reduces every filter's taps to its (min, max) into
a (2, ceil(Co / 4)) texture, which the drawing pass reads; nothing is read back.
"""

import math
from dataclasses import dataclass

import moderngl


@dataclass(frozen=True)
class FilterBank:
    """A conv layer's filter texture as the viewer draws it.

    Attributes:
        kh, kw: taps; cg: input channels per filter (group); co: output channels.
    """
    kh: int
    kw: int
    cg: int
    co: int

    @property
    def rgb(self) -> bool:
        return self.cg == 3

    @property
    def cols(self) -> int:
        return math.ceil(math.sqrt(self.co))

    def grid_size(self) -> tuple[int, int]:
        """(width, height) in texels of the grid: tiles plus 1-texel gutters."""
        rows = math.ceil(self.co / self.cols)
        return self.cols * (self.kw + 1) + 1, rows * (self.kh + 1) + 1

    def in_channel(self, wanted: int) -> int:
        """The first input channel shown for a wanted one: 0 in RGB, else wrapped into cg."""
        return 0 if self.rgb else wanted % self.cg


def bank_of(node, weights_shape) -> FilterBank:
    """The FilterBank of a Conv or ConvTranspose node with weights W of `weights_shape`."""
    if node.op == "Conv":
        co, cg, kh, kw = weights_shape
    else:  # ConvTranspose W: (Ci, Co/group, kh, kw), drawn as the conv it runs as
        group = int(node.attrs.get("group", 1))
        ci, cog, kh, kw = weights_shape
        co, cg = cog * group, ci // group
    return FilterBank(kh, kw, cg, co)


class FilterGrid:
    """Draws filter banks into rectangles of the bound framebuffer.

    Args:
        ctx: the window's glcnn.Context.
    """

    def __init__(self, ctx):
        self.ctx = ctx
        self.minmax_prog = ctx.program("filter_grid.glsl", {"CUSTOM_MAIN": 1, "MINMAX": 1},
                                       "viewer filters")
        self.draw_prog = ctx.program("filter_grid.glsl", {"CUSTOM_MAIN": 1, "DRAW": 1},
                                     "viewer filters")
        self.vaos = {id(p): ctx.gl.vertex_array(p, []) for p in (self.minmax_prog, self.draw_prog)}
        self.minmax: dict[int, tuple] = {}  # slices -> (texture, framebuffer)

    def _minmax_target(self, slices: int):
        if slices not in self.minmax:
            tex = self.ctx.gl.texture((2, slices), 4, dtype="f4")
            tex.filter = (moderngl.NEAREST, moderngl.NEAREST)
            self.minmax[slices] = tex, self.ctx.gl.framebuffer(color_attachments=[tex])
        return self.minmax[slices]

    def _set(self, prog, values):
        for key, value in values.items():
            if key in prog:
                prog[key].value = value

    def draw(self, target, rect, texture, bank: FilterBank, in_channel: int = 0):
        """Draw `bank`, whose filters are in `texture` (layout.pack_filters), into `rect` =
        (x, y, w, h) of framebuffer `target`; grey tiles show input channel `in_channel`."""
        slices = (bank.co + 3) // 4
        minmax, fbo = self._minmax_target(slices)
        common = {"u_weights": 0, "u_filter": (bank.kh, bank.kw, bank.cg, bank.co),
                  "u_rgb": int(bank.rgb), "u_in_channel": bank.in_channel(in_channel)}
        texture.use(0)
        self._set(self.minmax_prog, common)
        fbo.use()
        fbo.viewport = (0, 0, 2, slices)
        self.vaos[id(self.minmax_prog)].render(moderngl.TRIANGLES, vertices=3)
        minmax.use(1)
        self._set(self.draw_prog, {**common, "u_minmax": 1, "u_cols": bank.cols,
                                   "u_rect": tuple(float(v) for v in rect)})
        target.use()
        self.ctx.gl.viewport = tuple(int(v) for v in rect)
        self.vaos[id(self.draw_prog)].render(moderngl.TRIANGLES, vertices=3)

    def release(self):
        self.ctx.park()
        for tex, fbo in self.minmax.values():
            fbo.release()
            tex.release()
        for vao in self.vaos.values():
            vao.release()
        self.minmax = {}
