"""The viewer's per-frame input path: a frame goes up once through a pixel buffer and is
resized and normalised on the GPU (shaders/preprocess.glsl) into the model's input texture."""

import moderngl
import numpy as np

from ..errors import ShapeError
from ..layout import Atlas


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
