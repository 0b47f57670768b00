"""Resource limits glcnn checks before it allocates anything (GL-free).

- `MAX_TEXTURE_SIDE`: no GL offers textures wider or taller than this, so a tensor whose
  atlas (glcnn.layout) would be larger is refused as soon as its shape is known, before any
  per-size work; the context's own GL_MAX_TEXTURE_SIZE is checked when a Pipeline compiles.
- The texture-memory budget: a Pipeline refuses to compile a model whose textures would
  need more bytes than `memory_budget()`; the .npz importer refuses files whose arrays
  would. Default 2 GiB; set `Pipeline(..., memory_budget=...)` or GLCNN_MEMORY_BUDGET
  (bytes, or with a suffix: "512M", "4G", "1.5GiB").
"""

import os
import re

from .errors import GlcnnError, TextureSizeError
from .layout import Atlas

MAX_TEXTURE_SIDE = 1 << 16
DEFAULT_MEMORY_BUDGET = 2 << 30
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def memory_budget(value=None) -> int:
    """The texture-memory budget in bytes: `value`, else GLCNN_MEMORY_BUDGET, else 2 GiB.

    Args:
        value: bytes (int), or a string such as "512M" or "2GiB".
    Raises:
        GlcnnError: a value that is not a positive size.
    """
    if value is None:
        value = os.environ.get("GLCNN_MEMORY_BUDGET") or DEFAULT_MEMORY_BUDGET
    if isinstance(value, str):
        match = _SIZE.match(value)
        if not match:
            raise GlcnnError(f"memory budget {value!r} is not a size (e.g. 2147483648, 512M, "
                             "2GiB); check GLCNN_MEMORY_BUDGET")
        value = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise GlcnnError(f"memory budget {value!r} must be a positive number of bytes")
    return int(value)


def check_atlas(shape, what: str) -> None:
    """Refuse a (C, H, W) tensor whose atlas texture no GL could hold.

    Raises:
        TextureSizeError: naming `what`, the shape and the texture it would need.
    """
    width, height = Atlas.of(shape).size
    if max(width, height) > MAX_TEXTURE_SIDE:
        raise TextureSizeError(f"{what} of shape {tuple(shape)} needs a {width}×{height} "
                               f"texture; no GL allows more than {MAX_TEXTURE_SIDE} texels "
                               "a side")


def mib(size: int) -> str:
    """`size` bytes as a short human-readable MiB figure."""
    return f"{size / 2**20:,.1f} MiB"
