"""The one exception hierarchy of glcnn: everything a user can cause raises a GlcnnError."""


class GlcnnError(Exception):
    """Base class of every error glcnn raises on purpose."""


class ContextError(GlcnnError):
    """No usable OpenGL context (missing EGL/Mesa, wrong thread, too old a GL)."""


class ShaderCompileError(GlcnnError):
    """A GLSL program failed to compile or link.

    Attributes:
        path: the `.glsl` file of the op.
        layer: the graph node the program was compiled for.
        defines: the `#define`s injected after `#version`.
        message: the driver's log.
    """

    def __init__(self, path, layer, defines, message, excerpt):
        self.path, self.layer, self.defines, self.message = path, layer, defines, message
        text = (
            f"shader {path} failed to compile for layer {layer!r}\n"
            f"  defines: {defines}\n  driver: {message.strip()}\n{excerpt}"
        )
        super().__init__(text)


class UnsupportedOpError(GlcnnError):
    """An op type, or an attribute value of a known op, that glcnn cannot run."""


class WeightError(GlcnnError):
    """A weight is missing, has the wrong shape, or holds unusable values."""


class ShapeError(GlcnnError):
    """A tensor shape does not fit the op or the model's declared input."""


class GraphError(GlcnnError):
    """A graph is malformed: dangling inputs, cycles, duplicated names."""


class TextureSizeError(GlcnnError):
    """A tensor or weight texture would exceed GL_MAX_TEXTURE_SIZE."""


class ModelFileError(GlcnnError):
    """A model file cannot be read: wrong format, truncated, or not a model."""


class MismatchError(GlcnnError):
    """Two implementations of a model disagree beyond tolerance (`glcnn bench` refuses to
    time a wrong computation)."""


class NothingComparedError(GlcnnError):
    """A comparison found nothing to compare (no layer with a reference): it must not pass;
    `glcnn diff` exits 1 on it."""
