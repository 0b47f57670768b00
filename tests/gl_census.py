"""Count live GL objects and texture bytes by asking the driver, not glcnn's bookkeeping.

Object names are probed with glIs* through libOpenGL (the context current on this
thread); texture sizes come from glGetTexLevelParameteriv on each live texture.
"""

import ctypes

GL_TEXTURE_2D, GL_TEXTURE_2D_ARRAY = 0x0DE1, 0x8C1A
GL_TEXTURE_WIDTH, GL_TEXTURE_HEIGHT, GL_TEXTURE_DEPTH = 0x1000, 0x1001, 0x8071
GL_TEXTURE_INTERNAL_FORMAT = 0x1003
BYTES_PER_TEXEL = {0x8814: 16, 0x881A: 8, 0x8058: 4}  # RGBA32F, RGBA16F, RGBA8
_KINDS = ("Texture", "Framebuffer", "Program", "VertexArray", "Buffer", "Renderbuffer")

_gl = ctypes.CDLL("libOpenGL.so.0")
for _kind in _KINDS:
    getattr(_gl, f"glIs{_kind}").restype = ctypes.c_ubyte


def census(max_name: int | None = None) -> dict:
    """{"Texture": n, ..., "texture_bytes": b} for the current context.

    Names are probed from 1 to `max_name`, by default a little past the newest name the
    driver hands out (Mesa numbers objects upwards, so a long test session goes past 4096).
    """
    max_name = max_name or _newest_name() + 256
    counts = {kind: 0 for kind in _KINDS}
    live_textures = []
    for name in range(1, max_name):
        for kind in _KINDS:
            if getattr(_gl, f"glIs{kind}")(name):
                counts[kind] += 1
                if kind == "Texture":
                    live_textures.append(name)
    counts["texture_bytes"] = sum(_texture_bytes(n) for n in live_textures)
    return counts


def _texture_bytes(name: int) -> int:
    """Bytes of texture `name`: a 2D texture, or else (binding it as 2D fails) a 2D array;
    a buffer texture counts 0 (its bytes are its buffer's)."""
    while _gl.glGetError():
        pass
    target, layers = GL_TEXTURE_2D, 1
    _gl.glBindTexture(GL_TEXTURE_2D, name)
    if _gl.glGetError():  # GL_INVALID_OPERATION: the name was made for another target
        target = GL_TEXTURE_2D_ARRAY
        _gl.glBindTexture(target, name)
        if _gl.glGetError():
            return 0
    value = ctypes.c_int()
    dims = []
    for pname in (GL_TEXTURE_WIDTH, GL_TEXTURE_HEIGHT, GL_TEXTURE_INTERNAL_FORMAT,
                  GL_TEXTURE_DEPTH):
        _gl.glGetTexLevelParameteriv(target, 0, pname, ctypes.byref(value))
        dims.append(value.value)
    _gl.glBindTexture(target, 0)
    width, height, fmt, depth = dims
    if target == GL_TEXTURE_2D_ARRAY:
        layers = depth
    return width * height * layers * BYTES_PER_TEXEL.get(fmt, 16)


def _newest_name() -> int:
    """The largest name a new texture, framebuffer, buffer or vertex array would get now."""
    newest = 4096
    for kind in ("Textures", "Framebuffers", "Buffers", "VertexArrays", "Renderbuffers"):
        name = ctypes.c_uint()
        getattr(_gl, f"glGen{kind}")(1, ctypes.byref(name))
        getattr(_gl, f"glDelete{kind}")(1, ctypes.byref(name))
        newest = max(newest, name.value)
    return newest
