"""The GL context glcnn renders with: headless EGL by default, or one the user already has.

Programs are compiled once per context and cached by (shader file, hash of final source).

Sharing rule: any number of pipelines work together in one process, on one context or on
several, used in any order. `Pipeline(graph)` and `glcnn.load(path)` without `ctx=` share
their thread's default headless context (`Context.default()`, as moderngl's own default
context), so their textures can be used together and their programs are compiled once; and
every pipeline makes its context current (`Context.activate`) before it touches GL, so a
pipeline on another context (yours, a window's, a second headless one) may run in between.
glcnn leaves its context current: to draw with your own moderngl context after a glcnn call,
make yours current again (`with your_ctx:`) or give glcnn your context as `ctx=`.

Threading rule: a Context belongs to the thread that created it (or, for a wrapped moderngl
context, the thread that wrapped it); compiling, running, reading or handing out textures of a
Pipeline on it from any other thread raises ContextError. Each thread has its own default
context, so pipelines made in a thread are that thread's.
"""

import ctypes
import hashlib
import os
import re
import threading
import weakref

import moderngl
import numpy as np

from .. import debug
from ..errors import ContextError, GlcnnError, ShaderCompileError, quote
from ..resources import resource_path, shader_text

INSTALL_HINT = (
    "install Mesa's EGL and GL drivers (Debian/Ubuntu: apt-get install -y libegl1 "
    "libegl-mesa0 libgl1-mesa-dri) or run with a display and GLCNN_BACKEND=x11"
)
_SOFTWARE_RENDERERS = ("llvmpipe", "softpipe", "swiftshader")
_LINE = re.compile(r"(\d+):(\d+)\(\d+\)")
_DEFINE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


_UNSET = object()
_THREAD = threading.local()  # .default: the thread's default Context (Context.default)
_WRAPPED: "weakref.WeakKeyDictionary[moderngl.Context, Context]" = weakref.WeakKeyDictionary()
_GL_DRAW_FRAMEBUFFER = 0x8CA9
_GL_COLOR_ATTACHMENT0 = 0x8CE0
_GL_FRAMEBUFFER_COMPLETE = 0x8CD5
_GL_TEXTURE_BUFFER = 0x8C2A
_GL_TEXTURE0 = 0x84C0
_GL_SAMPLER_BUFFER = 0x8DC2
_GL_TEXTURE_2D = 0x0DE1
_GL_PIXEL_PACK_BUFFER = 0x88EB
_GL_RGBA, _GL_FLOAT = 0x1908, 0x1406
# The GL limits glcnn reads, by the names GLCNN_GL_LIMITS uses, and GL 3.3 core's minimums.
LIMITS = {"texture": "GL_MAX_TEXTURE_SIZE", "buffer": "GL_MAX_TEXTURE_BUFFER_SIZE",
          "draw_buffers": "GL_MAX_DRAW_BUFFERS", "attachments": "GL_MAX_COLOR_ATTACHMENTS",
          "units": "GL_MAX_TEXTURE_IMAGE_UNITS", "layers": "GL_MAX_ARRAY_TEXTURE_LAYERS"}
GL33_MINIMUMS = {"texture": 1024, "buffer": 65536, "draw_buffers": 8, "attachments": 8,
                 "units": 16, "layers": 256}
BUFFER_PROBE_MIN = 1 << 10  # the smallest buffer texture Context.buffer_fits probes
_GL_FORMATS = {"f4": 0x8814, "f2": 0x881A, "f1": 0x8058}  # RGBA32F, RGBA16F, RGBA8
DTYPE_BYTES = {"f4": 4, "f2": 2, "f1": 1}  # bytes per channel of a texture dtype


class Context:
    """A moderngl context plus glcnn's program cache.

    Args:
        ctx: an existing `moderngl.Context` (e.g. your window's) to render into; glcnn
            then never creates a context of its own. None creates a headless one.
        backend: for a new context, "egl" (default, no display needed) or None for the
            platform default (X11/GLX); also read from GLCNN_BACKEND.
    Raises:
        ContextError: if no OpenGL 3.3 core context can be created, naming packages.
    """

    def __init__(self, ctx: moderngl.Context | None = None, backend: str | None = "egl"):
        backend = os.environ.get("GLCNN_BACKEND", backend)
        if ctx is None:
            ctx = _create(None if backend in (None, "", "x11", "default") else backend)
        self.gl = ctx
        self._cut = _cut_limits(os.environ.get("GLCNN_GL_LIMITS", ""))
        self.thread = threading.get_ident()
        self.programs: dict[tuple[str, str], moderngl.Program] = {}
        self._held: dict[moderngl.Program, dict] = {}  # uniform values written by set_uniforms
        self.compiles = 0
        if ctx.version_code < 330:
            raise ContextError(f"glcnn needs OpenGL 3.3; {self.renderer} offers {self.version}")
        # moderngl re-binds the last used framebuffer after creating a new one; if that one
        # was released, GL raises INVALID_OPERATION. Parking on this one avoids that.
        try:
            self._parking = ctx.framebuffer(color_attachments=[ctx.texture((1, 1), 4)])
        except moderngl.Error as exc:
            raise ContextError(f"cannot use the GL context on this thread ({exc}): a context "
                               "is used by the thread that made it current") from None
        _WRAPPED.setdefault(ctx, self)  # Context.wrap(ctx) finds this one
        self._gl_functions: dict[str, object] = {}  # by name (_gl_function)
        # buffer_fits: buffer textures of up to _buffer_verified texels read back right; of
        # _buffer_broken or more, not (probed at the sizes asked for)
        self._buffer_verified, self._buffer_broken = 0, 1 << 62
        self._active_texture = self._gl_function("glActiveTexture", None, ctypes.c_uint)
        self._bind_texture = self._gl_function("glBindTexture", None, ctypes.c_uint,
                                               ctypes.c_uint)
        self._use_program = self._gl_function("glUseProgram", None, ctypes.c_uint)
        self._uniform1i = self._gl_function("glUniform1i", None, ctypes.c_int, ctypes.c_int)
        self._bind_buffer = self._gl_function("glBindBuffer", None, ctypes.c_uint, ctypes.c_uint)
        self._get_tex_image = self._gl_function("glGetTexImage", None, ctypes.c_uint,
                                                ctypes.c_int, ctypes.c_uint, ctypes.c_uint,
                                                ctypes.c_void_p)

    @classmethod
    def default(cls) -> "Context":
        """The calling thread's default headless context, made at the first call: every
        `Pipeline` and `glcnn.load` given no `ctx` shares it (one program cache, textures
        usable together).

        Raises:
            ContextError: if no OpenGL 3.3 core context can be created, naming packages.
        """
        ctx = getattr(_THREAD, "default", None)
        if ctx is None:
            ctx = _THREAD.default = cls()
        return ctx

    @classmethod
    def wrap(cls, gl: moderngl.Context) -> "Context":
        """The glcnn Context of a moderngl context (e.g. a window's), made at the first call
        and shared by every Pipeline given that moderngl context: one program cache.

        Raises:
            ContextError: the moderngl context was wrapped by another thread.
        """
        if not isinstance(gl, moderngl.Context):
            raise ContextError(f"ctx={quote(gl)}: expected a glcnn.Context, a moderngl.Context "
                               "or None")
        ctx = _WRAPPED.get(gl)
        if ctx is None:
            ctx = _WRAPPED[gl] = cls(gl)
        ctx.check_thread()
        return ctx

    def activate(self) -> None:
        """Make this context current on the calling thread, as every glcnn call that
        touches GL does first (0.3 µs on Mesa EGL), so pipelines on different contexts may
        be used in any order.

        Raises:
            ContextError: the calling thread is not this context's, or the context is gone.
        """
        self.check_thread()
        try:
            self.gl.__enter__()  # moderngl: make current (the previous one is not restored)
        except (moderngl.Error, AttributeError) as exc:  # a released moderngl context
            raise ContextError(f"the GL context is no longer usable ({exc})") from None

    def park(self) -> None:
        """Bind glcnn's own 1×1 framebuffer, e.g. before releasing the bound one."""
        self._parking.use()

    @property
    def renderer(self) -> str:
        return self.gl.info["GL_RENDERER"]

    @property
    def version(self) -> str:
        return self.gl.info["GL_VERSION"]

    @property
    def software(self) -> bool:
        """True on a CPU rasteriser (llvmpipe, softpipe, SwiftShader): texture fetches are
        its main cost, and it threads over 64×64 screen tiles."""
        return any(name in self.renderer.lower() for name in _SOFTWARE_RENDERERS)

    @property
    def strategy(self) -> str:
        """How pipelines on this context run convs by default (glcnn.Pipeline `strategy`):
        "blocked" on software rasterisers, where it cuts texture fetches 3×, "direct" on
        GPUs, whose fetches are cheap and cached."""
        return "blocked" if self.software else "direct"

    @property
    def spread_width(self) -> int:
        """Render width that keeps every rasteriser thread busy: llvmpipe hands 64×64 screen
        tiles to LP_NUM_THREADS threads (default: one per core); 0 on GPUs."""
        if not self.software:
            return 0
        threads = os.environ.get("LP_NUM_THREADS", "")
        return 64 * (int(threads) if threads.isdigit() else os.cpu_count() or 1)

    def limit(self, name: str) -> int:
        """The GL limit `name` (a key of LIMITS) as glcnn uses it: the driver's value, or the
        lower one GLCNN_GL_LIMITS asks for (to run the fallback paths of small GLs)."""
        value = int(self.gl.info.get(LIMITS[name], GL33_MINIMUMS[name]))
        return min(value, self._cut.get(name, value))

    @property
    def max_texture_size(self) -> int:
        return self.limit("texture")


    @property
    def max_buffer_texels(self) -> int:
        """The most texels a buffer texture may hold, as the driver reports it
        (GL_MAX_TEXTURE_BUFFER_SIZE; GL 3.3 guarantees 65536). `buffer_fits` says whether glcnn
        uses one of a given size."""
        return self.limit("buffer")

    def buffer_fits(self, texels: int) -> bool:
        """Whether glcnn may keep `texels` RGBA32F texels in one buffer texture: within
        `max_buffer_texels`, and read back right at that size on this driver, probed once per
        power of two (`_buffer_reads_back`; 1-15 ms each, only for the sizes models need).

        Mesa softpipe (22.3) reports 65536 texels but wraps buffer indices at 512 KiB (32768
        RGBA32F texels): a blocked conv that read a larger input atlas from a buffer texture
        summed another part of the atlas there. Checking what is relied on keeps glcnn right on
        any such driver; larger layouts are sampled from 2D textures instead.
        """
        if texels > self.max_buffer_texels:
            return False
        size = min(max(BUFFER_PROBE_MIN, 1 << (texels - 1).bit_length()), self.max_buffer_texels)
        if size <= self._buffer_verified:
            return True
        if size >= self._buffer_broken:
            return False
        if self._buffer_reads_back(size):
            self._buffer_verified = size
            return True
        self._buffer_broken = size
        if debug.level() >= 2:
            print(f"[glcnn] {self.renderer}: a buffer texture of {size} texels reads wrong "
                  "texels; larger layouts are sampled from 2D textures")
        return False

    def _buffer_reads_back(self, texels: int) -> bool:
        """Whether texels 0, n/2 - 1, n/2 and n - 1 of an n = `texels` RGBA32F buffer texture
        read back as written (shaders/buffer_probe.glsl; only those four are written)."""
        marks = {0: 1.0, texels // 2 - 1: 2.0, texels // 2: 3.0, texels - 1: 4.0}
        probe = BufferTexture(self, (texels, 1), texels, clear=False)
        target = self.gl.texture((4, 1), 4, dtype="f4")
        fbo = self.gl.framebuffer(color_attachments=[target])
        try:
            for index, mark in marks.items():
                probe.buffer.write(np.full(4, mark, np.float32), offset=16 * index)
            program = self.program("buffer_probe.glsl", {"CUSTOM_MAIN": 1}, "buffer probe")
            self.set_uniforms(program, {"u_probe": 0, "u_texels": texels})
            probe.use(0)
            fbo.use()
            vao = self.gl.vertex_array(program, [])
            vao.render(moderngl.TRIANGLES, vertices=3)
            vao.release()
            got = np.frombuffer(target.read(), np.float32).reshape(4, 4)[:, 0]
        finally:
            self.park()
            fbo.release()
            target.release()
            probe.release()
        return bool(np.array_equal(got, np.array(list(marks.values()), np.float32)))

    def buffer_texture(self, data: np.ndarray, texels: int | None = None) -> "BufferTexture":
        """A buffer texture of RGBA32F texels holding the (height, width, 4) layout `data`
        row by row, `texels` long (zeros past the data)."""
        self.activate()
        height, width = data.shape[:2]
        tex = BufferTexture(self, (width, height), max(texels or 0, width * height))
        tex.write(data)
        return tex

    def check_thread(self) -> None:
        """Raise ContextError if called from a thread other than the creating one."""
        if threading.get_ident() != self.thread:
            raise ContextError("a glcnn Context (and every Pipeline and texture on it) is used "
                               "from a thread other than the one that created it; make the "
                               "pipeline in the thread that uses it (each thread has its own "
                               "default context)")

    def check_error(self, what: str) -> None:
        """Raise ContextError if the driver reports an error (GL_OUT_OF_MEMORY, a lost
        context, ...) or the context is gone; `what` says what glcnn was doing. Reading
        the error clears it, as glGetError does."""
        self.activate()
        try:
            error = self.gl.error
        except (moderngl.Error, AttributeError) as exc:  # a released moderngl context
            raise ContextError(f"{what}: the GL context is no longer usable ({exc})") from None
        if error != "GL_NO_ERROR":
            raise ContextError(f"{what}: the GL driver reported {error} on {self.renderer} "
                               "(out of memory or a lost context; on a shared context the "
                               "error may come from earlier GL calls)")

    def layer_framebuffer(self, array: moderngl.TextureArray, layers: int,
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
        stand_ins = [self.gl.renderbuffer((1, 1), 4, dtype=array.dtype) for _ in range(layers)]
        fbo = None
        try:
            fbo = self.gl.framebuffer(color_attachments=stand_ins)
            fbo.use()
            attach = self._gl_function("glFramebufferTextureLayer", None, ctypes.c_uint,
                                       ctypes.c_uint, ctypes.c_uint, ctypes.c_int, ctypes.c_int)
            status = self._gl_function("glCheckFramebufferStatus", ctypes.c_uint, ctypes.c_uint)
            for j in range(layers):
                attach(_GL_DRAW_FRAMEBUFFER, _GL_COLOR_ATTACHMENT0 + j, array.glo, 0, j)
            complete = status(_GL_DRAW_FRAMEBUFFER)
        except BaseException:
            if fbo is not None:
                self.park()
                fbo.release()
            raise
        finally:
            for buffer in stand_ins:
                buffer.release()
        self.park()
        if complete != _GL_FRAMEBUFFER_COMPLETE:
            fbo.release()
            raise ContextError(f"the layers of a {size} {array.dtype} texture array as "
                               f"{layers} render targets: framebuffer status {complete:#x} on "
                               f"{self.renderer}; use strategy='direct'")
        fbo.viewport = fbo.scissor = (0, 0, *size)
        return fbo

    def _gl_function(self, name: str, restype, *argtypes):
        """GL entry point `name` of this context, through the loader moderngl made it with
        (looked up once per context)."""
        if name not in self._gl_functions:
            address = self.gl.mglo._context.load_opengl_function(name)
            if not address:
                raise ContextError(f"{name} is missing from the GL of {self.renderer}")
            self._gl_functions[name] = ctypes.CFUNCTYPE(restype, *argtypes)(address)
        return self._gl_functions[name]

    def program(self, shader: str, defines: dict, layer: str = "?") -> moderngl.Program:
        """Compile (or fetch from cache) op shader `shader` with `defines` for `layer`."""
        self.activate()
        source = build_source(shader, defines)
        key = (shader, hashlib.sha1(source.encode()).hexdigest())
        if key not in self.programs:
            vertex = "#version 330 core\n" + shader_text("fullscreen.vert")
            try:
                self.programs[key] = self.gl.program(vertex_shader=vertex, fragment_shader=source)
            except moderngl.Error as exc:
                raise ShaderCompileError(str(resource_path("shaders", shader)), layer, defines,
                                         str(exc), excerpt(source, str(exc))) from None
            self.compiles += 1
            if debug.level() >= 2:
                print(f"[glcnn] compiled {shader} for {layer} {defines}")
            if debug.level() >= 3:
                print(f"[glcnn] GLSL for {layer} ({shader}):\n{source}")
        elif debug.level() >= 2:
            print(f"[glcnn] program cache hit: {shader} for {layer}")
        return self.programs[key]

    def set_uniforms(self, program: moderngl.Program, values: dict) -> None:
        """Write uniforms (name -> value) of one of this context's programs, skipping those
        that already hold the value (as written through this method).

        Programs are shared by every layer with the same shader and defines, so a pass sets
        its uniforms before each draw; most of them are unchanged since the program's last
        draw, and each write costs a few microseconds of Python (DCGAN generator: 40 writes per
        run). Write glcnn programs' uniforms only through here, or the skipping goes wrong.
        """
        held = self._held.setdefault(program, {})
        for name, value in values.items():
            if held.get(name, _UNSET) != value:
                member = program[name]
                if member.gl_type == _GL_SAMPLER_BUFFER:  # moderngl writes these wrongly
                    self._use_program(program.glo)
                    self._uniform1i(member.location, value)
                else:
                    member.value = value
                held[name] = value

    def summary(self) -> str:
        cut = f" | limits cut by GLCNN_GL_LIMITS: {self._cut}" if self._cut else ""
        return (f"{self.renderer} | OpenGL {self.version} | "
                f"max texture {self.max_texture_size}{cut}")

    def __repr__(self):
        return f"Context({self.summary()}, {len(self.programs)} programs)"


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

    def __init__(self, ctx: Context, size: tuple[int, int], texels: int, dtype: str = "f4",
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
        ctx._gl_function("glGenTextures", None, ctypes.c_int, ctypes.POINTER(ctypes.c_uint))(
            1, ctypes.byref(name))
        self.glo = name.value
        self.use(ctx.gl.default_texture_unit)
        ctx._gl_function("glTexBuffer", None, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint)(
            _GL_TEXTURE_BUFFER, _GL_FORMATS[dtype], self.buffer.glo)

    def copy_from(self, texture: moderngl.Texture) -> None:
        """Copy all of `texture` (of this size) into the buffer, row by row, on the GL side
        (a pixel-pack read; no trip through Python). A texture of another dtype is converted
        by the read: a float16 texture into a float32 buffer (Pipeline's input buffers)."""
        if texture.dtype == self.dtype:
            texture.read_into(self.buffer)
            return
        if self.dtype != "f4":
            raise GlcnnError(f"BufferTexture.copy_from converts into float32 only; this one "
                             f"holds {self.dtype}, the texture {texture.dtype}")
        ctx = self._ctx
        ctx._active_texture(_GL_TEXTURE0 + ctx.gl.default_texture_unit)
        ctx._bind_texture(_GL_TEXTURE_2D, texture.glo)
        ctx._bind_buffer(_GL_PIXEL_PACK_BUFFER, self.buffer.glo)
        ctx._get_tex_image(_GL_TEXTURE_2D, 0, _GL_RGBA, _GL_FLOAT, None)  # at offset 0
        ctx._bind_buffer(_GL_PIXEL_PACK_BUFFER, 0)

    def use(self, location: int = 0) -> None:
        """Bind to texture unit `location` (as moderngl.Texture.use)."""
        self._ctx._active_texture(_GL_TEXTURE0 + location)
        self._ctx._bind_texture(_GL_TEXTURE_BUFFER, self.glo)

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
            self._ctx._gl_function("glDeleteTextures", None, ctypes.c_int,
                                   ctypes.POINTER(ctypes.c_uint))(1, ctypes.byref(name))
            self.glo = 0
            self.buffer.release()


def _cut_limits(text: str) -> dict[str, int]:
    """GLCNN_GL_LIMITS ("texture=4096,buffer=65536,..."): limits glcnn then takes as lower
    than the driver's, so one driver runs the paths of a smaller GL (README "Portability").

    Raises:
        GlcnnError: a name not in LIMITS, or a value that is not an integer at least GL 3.3's
            minimum for it (glcnn uses at most 8 render targets, texture units 0-15 and 8
            array layers, which every GL 3.3 offers).
    """
    cut = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        if name not in LIMITS or not value.isdigit():
            raise GlcnnError(f"GLCNN_GL_LIMITS: {item!r} is not NAME=INTEGER with NAME one of "
                             f"{', '.join(LIMITS)}")
        if int(value) < GL33_MINIMUMS[name]:  # glcnn needs a GL 3.3, which offers these
            raise GlcnnError(f"GLCNN_GL_LIMITS: {item!r} is below GL 3.3's minimum "
                             f"{LIMITS[name]} of {GL33_MINIMUMS[name]}")
        cut[name] = int(value)
    return cut


def _create(backend):
    try:
        if backend:
            return moderngl.create_context(standalone=True, require=330, backend=backend)
        return moderngl.create_context(standalone=True, require=330)
    except Exception as exc:  # moderngl/glcontext raise bare Exceptions here
        raise ContextError(f"cannot create an OpenGL 3.3 context (backend={backend}): {exc}; "
                           f"{INSTALL_HINT}") from None


COMMON_LINE_OFFSET = 10000


def build_source(shader: str, defines: dict) -> str:
    """Final fragment source: #version, the defines, then common.glsl and the op shader.

    `#line` directives keep driver messages pointing at real lines: the op shader counts
    from 1, common.glsl from 10001 (drivers differ in reporting the source-string number
    of `#line N S`, so the line alone tells the two files apart).

    Only identifiers and integers reach the source: no string from a model file can.

    Raises:
        GlcnnError: a define that is not an identifier with an integer value.
    """
    for key, value in defines.items():
        if not (isinstance(key, str) and _DEFINE_NAME.match(key)) or \
                not isinstance(value, int | np.integer):
            raise GlcnnError(f"shader {shader}: refusing #define {key!r} = {value!r} "
                             "(defines must be identifiers with integer values)")
    head = ["#version 330 core"] + [f"#define {k} {int(v)}" for k, v in sorted(defines.items())]
    common, body = shader_text("common.glsl"), shader_text(shader)
    return "\n".join(head + [f"#line {COMMON_LINE_OFFSET + 1} 1", common, "#line 1 2", body])


def excerpt(source: str, message: str, around: int = 2) -> str:
    """The source lines a driver message ("0:49(22): error ...") points at, with file names."""
    files, current = {"common.glsl": [], "op shader": []}, None
    for text in source.split("\n"):
        if text.startswith("#line "):
            current = "common.glsl" if text.endswith(" 1") else "op shader"
        elif current is not None:
            files[current].append(text)
    out = []
    for line in sorted({int(n) for _, n in _LINE.findall(message)}):
        name = "common.glsl" if line > COMMON_LINE_OFFSET else "op shader"
        line -= COMMON_LINE_OFFSET if line > COMMON_LINE_OFFSET else 0
        lines = files[name]
        for n in range(max(1, line - around), min(len(lines), line + around) + 1):
            out.append(f"  {'>' if n == line else ' '} {name}:{n} | {lines[n - 1]}")
    return "\n".join(out)
