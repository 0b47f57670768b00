"""The one exception hierarchy of glcnn: everything a user can cause raises a GlcnnError.

Messages echo names and values taken from files through `quote`, so a hostile name cannot
reach the terminal raw (escape sequences, line breaks) and no echoed value is unbounded.
"""

QUOTE_LIMIT = 80  # characters of one echoed name or value


def quote(value, limit: int = QUOTE_LIMIT) -> str:
    """`value` for an error message: its repr (control characters escaped, so the message
    stays one line and a terminal prints it as text), cut to `limit` characters with "...".

    Strings are quoted ('name'); lists, arrays and other values are shown by their repr.
    """
    if isinstance(value, list | tuple) and len(value) > limit:  # no repr of a huge list
        value = value[:limit]
        text = repr(value)[:-1] + ", ..."
    else:
        text = repr(value).replace("\n", " ")  # numpy prints 2-D arrays on several lines
    if len(text) > limit:
        keep = max(limit - 3, 1)
        text = text[:keep] + "..."
    return text


def kinds_and_names(missing: dict, noun: str, most: int = 20) -> str:
    """"Kind (nouns: 'a', 'b', ...); Other (...); and N more" for an error listing everything
    unsupported at once: kinds sorted, at most `most` of them and 5 names each, names quoted."""
    listed = "; ".join(f"{kind} ({noun}: {', '.join(map(quote, names[:5]))}"
                       f"{', ...' if len(names) > 5 else ''})"
                       for kind, names in sorted(missing.items())[:most])
    return listed + (f"; and {len(missing) - most} more" if len(missing) > most else "")


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
