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

import hashlib
import os
import threading
import weakref

import moderngl
import numpy as np

from .. import debug
from ..errors import ContextError, GlcnnError, ShaderCompileError, quote
from ..resources import resource_path, shader_text
from . import shaders, threads
from .gl import BufferTexture, GLFunctions, nearest_clamped

INSTALL_HINT = (
    "install Mesa's EGL and GL drivers (Debian/Ubuntu: apt-get install -y libegl1 "
    "libegl-mesa0 libgl1-mesa-dri) or run with a display and GLCNN_BACKEND=x11"
)
_SOFTWARE_RENDERERS = ("llvmpipe", "softpipe", "swiftshader")


_UNSET = object()
_THREAD = threading.local()  # .default: the thread's default Context (Context.default)
_WRAPPED: "weakref.WeakKeyDictionary[moderngl.Context, Context]" = weakref.WeakKeyDictionary()
_GL_SAMPLER_BUFFER = 0x8DC2
# The GL limits glcnn reads, by the names GLCNN_GL_LIMITS uses, and GL 3.3 core's minimums.
LIMITS = {"texture": "GL_MAX_TEXTURE_SIZE", "buffer": "GL_MAX_TEXTURE_BUFFER_SIZE",
          "draw_buffers": "GL_MAX_DRAW_BUFFERS", "attachments": "GL_MAX_COLOR_ATTACHMENTS",
          "units": "GL_MAX_TEXTURE_IMAGE_UNITS", "layers": "GL_MAX_ARRAY_TEXTURE_LAYERS"}
GL33_MINIMUMS = {"texture": 1024, "buffer": 65536, "draw_buffers": 8, "attachments": 8,
                 "units": 16, "layers": 256}
BUFFER_PROBE_MIN = 1 << 10  # the smallest buffer texture Context.buffer_fits probes


class Context:
    """A moderngl context plus glcnn's program cache.

    Args:
        ctx: an existing `moderngl.Context` (e.g. your window's) to render into; glcnn
            then never creates a context of its own. None creates a headless one.
        backend: for a new context, "egl" (default, no display needed) or None for the
            platform default (X11/GLX); also read from GLCNN_BACKEND.
        rasterizer_threads: for a new context, the LP_NUM_THREADS to make it with unless the
            environment sets one (glcnn.runtime.threads; 0 rasterises on the calling thread);
            None: the driver's default. Software rasterisers only, and only if this is the
            process's first context (Mesa reads it once per process).
    Raises:
        ContextError: if no OpenGL 3.3 core context can be created, naming packages.
    """

    def __init__(self, ctx: moderngl.Context | None = None, backend: str | None = "egl",
                 rasterizer_threads: int | None = None):
        backend = os.environ.get("GLCNN_BACKEND", backend)
        # The rasteriser threads (None: the driver's default, one per core; corrected to what
        # llvmpipe runs by _count_threads), and whether glcnn chose them (threads.check)
        user = threads.from_environment()
        self.rasterizer_threads, self.threads_chosen = user, False
        if ctx is None:
            with threads.asking(rasterizer_threads) as self.rasterizer_threads:
                ctx = _create(None if backend in (None, "", "x11", "default") else backend)
            self.threads_chosen = user is None and self.rasterizer_threads is not None
        self.gl = ctx
        self._cut = _cut_limits(os.environ.get("GLCNN_GL_LIMITS", ""))
        self.thread = threading.get_ident()
        self.programs: dict[tuple[str, str], moderngl.Program] = {}
        self._keys: dict[tuple, tuple[str, str]] = {}  # (shader, defines) -> key of programs
        self._held: dict[moderngl.Program, dict] = {}  # uniform values written by set_uniforms
        self.compiles = 0
        # Called with the layer after each program() request (compiled or cached): a
        # progress bar's hook (glcnn run); None: nothing is called.
        self.progress = None
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
        self.gl_functions = GLFunctions(ctx, self.renderer)
        # buffer_fits: buffer textures of up to _buffer_verified texels read back right; of
        # _buffer_broken or more, not (probed at the sizes asked for)
        self._buffer_verified, self._buffer_broken = 0, 1 << 62
        self._prime_samplers()
        self._count_threads()

    def _count_threads(self) -> None:
        """On llvmpipe, correct `rasterizer_threads` to the threads its rasteriser runs
        (threads.running, after the priming draw): Mesa starts them with the process's first
        context, so an earlier one decided, whatever this one asked for."""
        alive = threads.running() if "llvmpipe" in self.renderer.lower() else None
        if alive is None or (self.rasterizer_threads is None and alive > 0):
            return  # unknown, or the driver's default as asked
        if alive != self.rasterizer_threads:
            self.rasterizer_threads, self.threads_chosen = alive, False

    def _prime_samplers(self) -> None:
        """Sample a NEAREST, clamped texel on texture units 0-15 (shaders/sampler_prime.glsl),
        the sampler state of every glcnn texture, so that each glcnn program compiles once on
        llvmpipe instead of once per state earlier draws left on its units."""
        texel = nearest_clamped(self.gl.texture((1, 1), 4, dtype="f4"))
        program = self.program("sampler_prime.glsl", {"CUSTOM_MAIN": 1}, "sampler prime")
        program["u_units"].value = list(range(16))  # a glcnn-internal program: set directly
        vao = self.gl.vertex_array(program, [])
        try:
            for unit in range(16):
                texel.use(unit)
            self._parking.use()
            vao.render(moderngl.TRIANGLES, vertices=3)
        finally:
            vao.release()
            texel.release()

    @classmethod
    def default(cls, ops=None) -> "Context":
        """The calling thread's default headless context, made at the first call: every
        `Pipeline` and `glcnn.load` given no `ctx` shares it (one program cache, textures
        usable together).

        Args:
            ops: the layers of the model the context is wanted for (glcnn.ops.build_ops); if
                this call makes the context, a software rasteriser gets the threads that
                suit them (glcnn.runtime.threads.preferred) unless LP_NUM_THREADS is set.
        Raises:
            ContextError: if no OpenGL 3.3 core context can be created, naming packages.
        """
        ctx = getattr(_THREAD, "default", None)
        if ctx is None:
            ctx = _THREAD.default = cls(rasterizer_threads=threads.preferred(ops or ()))
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
        tiles to LP_NUM_THREADS threads (default: one per core); 0 on GPUs and on llvmpipe
        rasterising on the calling thread (LP_NUM_THREADS=0: nothing to spread over)."""
        if not self.software:
            return 0
        count = threads.from_environment()  # the user's, else the ones it runs
        count = self.rasterizer_threads if count is None else count
        return 64 * (count if count is not None else os.cpu_count() or 1)

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

    def program(self, shader: str, defines: dict, layer: str = "?") -> moderngl.Program:
        """Compile (or fetch from cache) op shader `shader` with `defines` for `layer`.

        Raises:
            ShaderCompileError: the driver refused the program, e.g. an `#error` of a shader
                on defines that do not go together; its text holds the driver's message and
                the lines it points at, by file (shaders.excerpt).
            GlcnnError: a define that is not an identifier with an integer value, or an
                `#include` that cannot be resolved (shaders.build_source).
        """
        self.activate()
        # Layers share programs: a pipeline asks for each a few times (PP-OCRv4 det: 143
        # requests, 27 programs), so the source is built and hashed once per shader and defines.
        named = (shader, shaders.checked_defines(shader, defines))
        key = self._keys.get(named)
        if key is None:
            source = shaders.build_source(shader, defines)
            key = (shader, hashlib.sha1(source.encode()).hexdigest())
            if key not in self.programs:
                self.programs[key] = self._compile(shader, defines, source, layer)
            self._keys[named] = key
        elif debug.level() >= 2:
            print(f"[glcnn] program cache hit: {shader} for {layer}")
        if self.progress is not None:
            self.progress(layer)
        return self.programs[key]

    def _compile(self, shader: str, defines: dict, source: str, layer: str) -> moderngl.Program:
        vertex = "#version 330 core\n" + shader_text("fullscreen.vert")
        try:
            program = self.gl.program(vertex_shader=vertex, fragment_shader=source)
        except moderngl.Error as exc:
            raise ShaderCompileError(str(resource_path("shaders", shader)), layer, defines,
                                     str(exc), shaders.excerpt(source, str(exc))) from None
        self.compiles += 1
        if debug.level() >= 2:
            print(f"[glcnn] compiled {shader} for {layer} {defines}")
        if debug.level() >= 3:
            print(f"[glcnn] GLSL for {layer} ({shader}):\n{source}")
        return program

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
                    self.gl_functions.use_program(program.glo)
                    self.gl_functions.uniform1i(member.location, value)
                elif member.array_length == 1 and _one_element(value, member.dimension):
                    # moderngl takes an array of one (Concat's u_end[1]) for a plain value; the
                    # driver may keep it (zink) or drop it as unused (llvmpipe)
                    member.value = value[0]
                else:
                    member.value = value
                held[name] = value

    def summary(self) -> str:
        cut = f" | limits cut by GLCNN_GL_LIMITS: {self._cut}" if self._cut else ""
        return (f"{self.renderer} | OpenGL {self.version} | "
                f"max texture {self.max_texture_size}{cut}")

    def __repr__(self):
        return f"Context({self.summary()}, {len(self.programs)} programs)"


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


def _one_element(value, dimension: int) -> bool:
    """Whether `value` is a sequence of one uniform value: one number (dimension 1) or one
    vector (a sequence itself)."""
    return isinstance(value, tuple | list) and len(value) == 1 and (
        dimension == 1 or isinstance(value[0], tuple | list))

