"""Per-channel min/max of an activation atlas on the GPU (shaders/minmax.glsl).

Used every frame by the viewer's display normalisation and once per sample by u8
calibration. Two parallel passes (rows, then columns); the (C, 1, 2) result texture and
its intermediate are allocated once per (texture, shape) and reused.
"""

from dataclasses import dataclass

import moderngl
import numpy as np

from ..layout import Atlas, unpack
from .gl import nearest_clamped


@dataclass
class _Buffers:
    rows: moderngl.Texture
    rows_fbo: moderngl.Framebuffer
    result: moderngl.Texture
    result_fbo: moderngl.Framebuffer


class ChannelMinMax:
    """Computes per-channel (min, max) of atlas textures on a glcnn.Context.

    `shape_uniform` of a source may carry a tensor id for u8 storage (see
    runtime.compiler.Compiler.shape_uniform); the reduction then decodes stored values first.
    """

    def __init__(self, ctx, defines=None):
        self.ctx = ctx
        self.rows_prog = ctx.program("minmax.glsl", {"ROWS": 1, **(defines or {})}, "min/max")
        self.cols_prog = ctx.program("minmax.glsl", {"COLS": 1}, "min/max columns")
        self.vaos = {id(p): ctx.gl.vertex_array(p, []) for p in (self.rows_prog, self.cols_prog)}
        self.buffers: dict[tuple, _Buffers] = {}

    def _buffers(self, key, shape) -> _Buffers:
        if key not in self.buffers:
            c, h, _ = shape
            textures = [self._texture((c, h, 2)), self._texture((c, 1, 2))]
            fbos = [self.ctx.gl.framebuffer(color_attachments=[t]) for t in textures]
            self.buffers[key] = _Buffers(textures[0], fbos[0], textures[1], fbos[1])
        return self.buffers[key]

    def _texture(self, shape):
        return nearest_clamped(self.ctx.gl.texture(Atlas.of(shape).size, 4, dtype="f4"))

    def texture(self, source, shape, shape_uniform=None, bind=None) -> moderngl.Texture:
        """Reduce `source` holding a (C, H, W) tensor; returns the (C, 1, 2) result texture
        (x = 0: min, x = 1: max). `bind` is called with the rows program before drawing
        (e.g. to bind u8 range textures)."""
        out = self._buffers((source.glo, tuple(shape)), shape)
        c, h, _ = shape
        rows_atlas = Atlas.of((c, h, 2))
        self._reduce(self.rows_prog, source, shape_uniform or Atlas.of(shape).shape_uniform,
                     out.rows_fbo, rows_atlas, bind)
        self._reduce(self.cols_prog, out.rows, rows_atlas.shape_uniform, out.result_fbo,
                     Atlas.of((c, 1, 2)))
        return out.result

    def read(self, source, shape, shape_uniform=None, bind=None) -> np.ndarray:
        """(C, 2) float32 array of per-channel (min, max); reads back only 2·C numbers."""
        result = self.texture(source, shape, shape_uniform, bind)
        data = np.frombuffer(result.read(), np.float32).reshape(result.height, result.width, 4)
        return unpack(data, (shape[0], 1, 2))[:, 0, :]

    def _reduce(self, prog, source, shape_uniform, fbo, out_atlas, bind=None):
        source.use(0)
        prog["u_input"].value = 0
        prog["u_input_shape"].value = tuple(shape_uniform)
        prog["u_out"].value = out_atlas.shape_uniform
        if bind is not None:
            bind(prog)
        fbo.use()
        self.vaos[id(prog)].render(moderngl.TRIANGLES, vertices=3)

    def release(self):
        for b in self.buffers.values():
            for obj in (b.rows_fbo, b.result_fbo, b.rows, b.result):
                obj.release()
        for vao in self.vaos.values():
            vao.release()
        self.buffers = {}
