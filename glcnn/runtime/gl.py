"""GL calls moderngl lacks, made through the function loader moderngl created its context with:
buffer textures (`BufferTexture`), framebuffers on the layers of a texture array
(`layer_framebuffer`), copies of texel rectangles between textures (`TileCopies`), and the few
entry points those and `Context.set_uniforms` need.

The loader is moderngl's private `ctx.mglo._context.load_opengl_function` (glcontext's, present
in every moderngl 5.x tested); pyproject.toml pins moderngl to the tested range while glcnn
uses it, and a moderngl without it is refused with a ContextError saying so.
"""

import ctypes

import moderngl
import numpy as np

from ..errors import ContextError, GlcnnError

_GL_DRAW_FRAMEBUFFER = 0x8CA9
_GL_READ_FRAMEBUFFER = 0x8CA8
_GL_COLOR_BUFFER_BIT, _GL_NEAREST = 0x4000, 0x2600
_GL_COLOR_ATTACHMENT0 = 0x8CE0
_GL_FRAMEBUFFER_COMPLETE = 0x8CD5
_GL_TEXTURE_BUFFER = 0x8C2A
_GL_TEXTURE0 = 0x84C0
_GL_TEXTURE_2D = 0x0DE1
_GL_TEXTURE_2D_ARRAY = 0x8C1A
_GL_PIXEL_PACK_BUFFER = 0x88EB
_GL_RGBA, _GL_FLOAT = 0x1908, 0x1406
_GL_FORMATS = {"f4": 0x8814, "f2": 0x881A, "f1": 0x8058}  # RGBA32F, RGBA16F, RGBA8
DTYPE_BYTES = {"f4": 4, "f2": 2, "f1": 1}  # bytes per channel of a texture dtype


class GLFunctions:
    """The GL entry points of one moderngl context that moderngl does not wrap, each looked up
    once (`get`); the ones used on every draw are attributes."""

    def __init__(self, gl: moderngl.Context, renderer: str):
        try:
            self._load = gl.mglo._context.load_opengl_function
        except AttributeError:
            raise ContextError(f"moderngl {moderngl.__version__} has no GL function loader "
                               "(ctx.mglo._context.load_opengl_function), which glcnn uses for "
                               "buffer textures; install the moderngl pyproject.toml "
                               "names") from None
        self._renderer, self._functions = renderer, {}
        c_uint, c_int = ctypes.c_uint, ctypes.c_int
        self.active_texture = self.get("glActiveTexture", None, c_uint)
        self.bind_texture = self.get("glBindTexture", None, c_uint, c_uint)
        self.use_program = self.get("glUseProgram", None, c_uint)
        self.uniform1i = self.get("glUniform1i", None, c_int, c_int)
        self.bind_buffer = self.get("glBindBuffer", None, c_uint, c_uint)
        self.get_tex_image = self.get("glGetTexImage", None, c_uint, c_int, c_uint, c_uint,
                                      ctypes.c_void_p)

    def get(self, name: str, restype, *argtypes):
        """GL entry point `name` as a ctypes function (looked up once).

        Raises:
            ContextError: the driver's GL lacks it.
        """
        if name not in self._functions:
            address = self._load(name)
            if not address:
                raise ContextError(f"{name} is missing from the GL of {self._renderer}")
            self._functions[name] = ctypes.CFUNCTYPE(restype, *argtypes)(address)
        return self._functions[name]


def layer_framebuffer(ctx, array: moderngl.TextureArray, layers: int,
                      size: tuple[int, int] | None = None) -> moderngl.Framebuffer:
    """A framebuffer whose colour attachment j is layer j of `array`, for j < `layers`,
    drawing into its `size` (width, height) corner (default: all of it).

    A pass with several render targets then writes one texture, which a later shader reads
    with a single `sampler2DArray` fetch whatever the target (separate textures need a
    switch over samplers, which a SIMD rasteriser runs in full for every lane: 3.5x slower
    on llvmpipe). moderngl attaches no single layers, so the framebuffer is made on 1×1
    stand-in renderbuffers (for its draw-buffer list; full-size ones cost up to 60 ms to
    allocate), glFramebufferTextureLayer (core since GL 3.0) then attaches the layers in
    their place, and the viewport and scissor box are set to `size`.

    Raises:
        ContextError: the driver does not accept the layers as a complete framebuffer.
    """
    size = tuple(size or (array.width, array.height))
    stand_ins = [ctx.gl.renderbuffer((1, 1), 4, dtype=array.dtype) for _ in range(layers)]
    fbo = None
    try:
        fbo = ctx.gl.framebuffer(color_attachments=stand_ins)
        fbo.use()
        attach = ctx.gl_functions.get("glFramebufferTextureLayer", None, ctypes.c_uint,
                                      ctypes.c_uint, ctypes.c_uint, ctypes.c_int, ctypes.c_int)
        status = ctx.gl_functions.get("glCheckFramebufferStatus", ctypes.c_uint, ctypes.c_uint)
        for j in range(layers):
            attach(_GL_DRAW_FRAMEBUFFER, _GL_COLOR_ATTACHMENT0 + j, array.glo, 0, j)
        complete = status(_GL_DRAW_FRAMEBUFFER)
    except BaseException:
        if fbo is not None:
            ctx.park()
            fbo.release()
        raise
    finally:
        for buffer in stand_ins:
            buffer.release()
    ctx.park()
    if complete != _GL_FRAMEBUFFER_COMPLETE:
        fbo.release()
        raise ContextError(f"the layers of a {size} {array.dtype} texture array as "
                           f"{layers} render targets: framebuffer status {complete:#x} on "
                           f"{ctx.renderer}; use strategy='direct'")
    fbo.viewport = fbo.scissor = (0, 0, *size)
    return fbo


def nearest_clamped(texture):
    """`texture` (a moderngl Texture or TextureArray) set to the sampler state of every glcnn
    texture, NEAREST and clamped to the edge, and returned: shaders read texel centres, and
    llvmpipe compiles a program once only while every unit holds this one state
    (Context._prime_samplers)."""
    texture.filter = (moderngl.NEAREST, moderngl.NEAREST)
    texture.repeat_x = texture.repeat_y = False
    return texture


class BufferTexture:
    """RGBA texels in a buffer object, read in shaders with texelFetch(samplerBuffer, i).

    On llvmpipe such a fetch costs a quarter of a NEAREST sample of a 2D texture (measured:
    about 1.3 against 4.8 cycles per lane; no coordinate scaling, clamping or mip level to
    compute), and on GPUs it goes through the texture cache like any texture. glcnn keeps
    conv filter banks in them, and on software rasterisers copies a blocked conv's input atlas
    into one before the pass (README "Speed"). moderngl has no buffer textures, so this
    holds a moderngl.Buffer and a texture name made through moderngl's GL loader; `use` and
    `release` mirror moderngl.Texture's.
    """

    def __init__(self, ctx, size: tuple[int, int], texels: int, dtype: str = "f4",
                 clear: bool = True):
        """`texels` RGBA texels of `dtype` ("f4" float32, "f2" float16, "f1" unsigned
        normalised bytes, as moderngl names them), zero (unless not `clear`: then undefined
        until written), holding a layout of `size` = (width, height) row by row."""
        self.width, self.height = size
        self.texels, self.dtype = texels, dtype
        self._ctx = ctx
        self.buffer = ctx.gl.buffer(reserve=texels * 4 * DTYPE_BYTES[dtype])
        if clear:  # glBufferData leaves the store undefined: no texel is read unwritten
            self.buffer.clear()
        name = ctypes.c_uint()
        ctx.gl_functions.get("glGenTextures", None, ctypes.c_int, ctypes.POINTER(ctypes.c_uint))(
            1, ctypes.byref(name))
        self.glo = name.value
        self.use(ctx.gl.default_texture_unit)
        ctx.gl_functions.get("glTexBuffer", None, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint)(
            _GL_TEXTURE_BUFFER, _GL_FORMATS[dtype], self.buffer.glo)

    def copy_from(self, texture: moderngl.Texture | moderngl.TextureArray) -> None:
        """Copy all of `texture` (of this size; an array layer after layer) into the buffer,
        row by row, on the GL side (a pixel-pack read; no trip through Python). A texture of
        another dtype is converted by the read: a float16 texture into a float32 buffer
        (Pipeline's input buffers)."""
        if texture.dtype == self.dtype:
            texture.read_into(self.buffer)
            return
        if self.dtype != "f4":
            raise GlcnnError(f"BufferTexture.copy_from converts into float32 only; this one "
                             f"holds {self.dtype}, the texture {texture.dtype}")
        ctx = self._ctx
        ctx.gl_functions.active_texture(_GL_TEXTURE0 + ctx.gl.default_texture_unit)
        array = isinstance(texture, moderngl.TextureArray)
        target = _GL_TEXTURE_2D_ARRAY if array else _GL_TEXTURE_2D
        ctx.gl_functions.bind_texture(target, texture.glo)
        ctx.gl_functions.bind_buffer(_GL_PIXEL_PACK_BUFFER, self.buffer.glo)
        ctx.gl_functions.get_tex_image(target, 0, _GL_RGBA, _GL_FLOAT, None)  # at offset 0
        ctx.gl_functions.bind_buffer(_GL_PIXEL_PACK_BUFFER, 0)

    def use(self, location: int = 0) -> None:
        """Bind to texture unit `location` (as moderngl.Texture.use)."""
        self._ctx.gl_functions.active_texture(_GL_TEXTURE0 + location)
        self._ctx.gl_functions.bind_texture(_GL_TEXTURE_BUFFER, self.glo)

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the layout held, as a 2D texture's."""
        return self.width, self.height

    def write(self, data, viewport: tuple[int, int, int, int] | None = None) -> None:
        """Write float32 RGBA texels into the rectangle `viewport` = (x, y, w, h) of the
        layout (default: all of it), as moderngl.Texture.write does."""
        if self.dtype != "f4":
            raise GlcnnError(f"BufferTexture.write takes float32 texels; this one holds "
                             f"{self.dtype}")
        x, y, w, h = viewport or (0, 0, self.width, self.height)
        rows = np.frombuffer(data, np.float32) if isinstance(data, bytes) else np.asarray(data)
        rows = np.ascontiguousarray(rows, np.float32).reshape(h, w * 4)
        if w == self.width:  # whole rows lie one after another in the buffer
            self.buffer.write(rows, offset=16 * y * self.width)
            return
        for r in range(h):
            self.buffer.write(rows[r], offset=16 * ((y + r) * self.width + x))

    def read(self) -> bytes:
        """The layout's texels, row by row (as moderngl.Texture.read of a 2D texture)."""
        return self.buffer.read(size=4 * DTYPE_BYTES[self.dtype] * self.width * self.height)

    def release(self) -> None:
        if self.glo:
            name = ctypes.c_uint(self.glo)
            self._ctx.gl_functions.get("glDeleteTextures", None, ctypes.c_int,
                                   ctypes.POINTER(ctypes.c_uint))(1, ctypes.byref(name))
            self.glo = 0
            self.buffer.release()


class TileCopies:
    """A pass that moves texels without a shader: rectangles copied from input textures into
    an output texture of the same format (a Concat's tiles, glcnn.ops.concat `tile_copies`).

    With GL 4.3, glCopyImageSubData; on older GLs (3.3, Apple's 4.1) glBlitFramebuffer between
    same-size rectangles with NEAREST filtering: both copy texels exactly, and llvmpipe turns
    either into row copies (a 128-channel 128² Concat: 1.1 and 1.5 ms against 7 ms drawn). The
    output's `clears` rectangles (atlas cells past its last slice, which a drawn pass writes with
    zeros) are cleared, so the texture holds what the shader would have written: after the
    copies, as zink on lavapipe (Mesa 25.0.7) dropped a scissored glClear made before them. The
    copies start with a glFinish (`draw`).

    Args:
        ctx: the glcnn Context.
        inputs: tensor names, indexed by the rectangles.
        rects: (input, source x, source y, output x, output y, width, height) each.
        clears: (x, y, width, height) rectangles of the output to zero.
    """

    def __init__(self, ctx, inputs: list[str], rects, clears):
        self.ctx, self.inputs, self.rects, self.clears = ctx, inputs, rects, clears
        self.read_fbos: dict[int, moderngl.Framebuffer] = {}  # by source texture id (blits)
        c_int, c_uint = ctypes.c_int, ctypes.c_uint
        functions = ctx.gl_functions
        if ctx.gl.version_code >= 430:
            self.copy_image = functions.get("glCopyImageSubData", None, c_uint, c_uint, c_int,
                                            c_int, c_int, c_int, c_uint, c_uint, c_int, c_int,
                                            c_int, c_int, c_int, c_int, c_int)
        else:
            self.copy_image = None
            self.blit = functions.get("glBlitFramebuffer", None, *(c_int,) * 8, c_uint, c_uint)
            self.bind_framebuffer = functions.get("glBindFramebuffer", None, c_uint, c_uint)

    def draw(self, textures: dict, out: moderngl.Framebuffer) -> None:
        """Copy from the inputs' textures in `textures` (tensor name -> texture) into the
        texture of framebuffer `out` (its scissor box covers every rectangle)."""
        # llvmpipe copies on the CPU and waits only for rendering into the current
        # framebuffer: an input still being drawn by an earlier, queued pass was copied
        # half-written (PP-OCRv4 det wrong in 1 run of 2 once no clear came first). glFinish
        # makes every copy read finished inputs on any driver.
        self.ctx.gl.finish()
        out.use()
        sources = [textures[name] for name in self.inputs]
        if self.copy_image is not None:
            target = out.color_attachments[0].glo
            for i, sx, sy, dx, dy, w, h in self.rects:
                self.copy_image(sources[i].glo, _GL_TEXTURE_2D, 0, sx, sy, 0,
                                target, _GL_TEXTURE_2D, 0, dx, dy, 0, w, h, 1)
        else:
            for i, sx, sy, dx, dy, w, h in self.rects:
                self.bind_framebuffer(_GL_READ_FRAMEBUFFER, self._read_fbo(sources[i]).glo)
                self.blit(sx, sy, sx + w, sy + h, dx, dy, dx + w, dy + h, _GL_COLOR_BUFFER_BIT,
                          _GL_NEAREST)
            self.bind_framebuffer(_GL_READ_FRAMEBUFFER, out.glo)  # as out.use() left it
        for rect in self.clears:  # after the copies: zink dropped a clear made before them
            out.clear(0.0, 0.0, 0.0, 0.0, viewport=rect)

    def _read_fbo(self, texture: moderngl.Texture) -> moderngl.Framebuffer:
        if id(texture) not in self.read_fbos:
            self.read_fbos[id(texture)] = self.ctx.gl.framebuffer(color_attachments=[texture])
        return self.read_fbos[id(texture)]

    def release(self) -> None:
        for fbo in self.read_fbos.values():
            fbo.release()
        self.read_fbos.clear()
