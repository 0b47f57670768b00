"""Resource limits glcnn checks before it allocates anything (GL-free).

- `MAX_TEXTURE_SIDE`: no GL offers textures wider or taller than this, so a tensor whose
  atlas (glcnn.layout) would be larger is refused as soon as its shape is known, before any
  per-size work; the context's own GL_MAX_TEXTURE_SIZE is checked when a Pipeline compiles.
- The texture-memory budget: a Pipeline refuses to compile a model whose textures would
  need more bytes than `memory_budget()`; the .npz importer refuses files whose arrays
  would. Default 2 GiB; set `Pipeline(..., memory_budget=...)` or GLCNN_MEMORY_BUDGET
  (bytes, or with a suffix: "512M", "4G", "1.5GiB").
- The compute limit: a Pipeline refuses a model needing more than `max_gflop()` GFLOP per
  run (the ops' `flops()`, as `glcnn info` sums them), before it allocates anything, so a
  small file cannot occupy the machine for minutes. Default 200 GFLOP: the largest real
  model measured, the UpscalerJS super-resolution model at 256², needs 29 GFLOP (the fast
  neural style at 256² about 20, MobileNetV2 at 224² 0.6); set `Pipeline(..., max_gflop=...)`,
  `glcnn.load(..., max_gflop=...)` or GLCNN_MAX_GFLOP.
- Inputs: images are decoded only up to `MAX_IMAGE_PIXELS` (64 MP; the size is read from
  the header first); `.npy` inputs and `.npz` members are judged by their headers before
  their data is read.
"""

import math
import os
import re

from .errors import GlcnnError, TextureSizeError, quote
from .layout import Atlas

MAX_TEXTURE_SIDE = 1 << 16
DEFAULT_MEMORY_BUDGET = 2 << 30
DEFAULT_MAX_GFLOP = 200.0
MAX_IMAGE_PIXELS = 64_000_000
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
    given = value
    if isinstance(value, str):
        match = _SIZE.match(value)
        if not match:
            raise GlcnnError(f"memory budget {quote(value)} is not a size (e.g. 2147483648, 512M, "
                             "2GiB); check GLCNN_MEMORY_BUDGET")
        value = float(match.group(1)) * _UNITS[match.group(2).lower()]  # 400 digits: inf
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or \
            value == math.inf:
        raise GlcnnError(f"memory budget {quote(given)} must be a positive, finite number of "
                         "bytes (memory_budget=..., GLCNN_MEMORY_BUDGET)")
    return int(value)


def max_gflop(value=None) -> float:
    """The compute limit in GFLOP per run: `value`, else GLCNN_MAX_GFLOP, else 200.

    Raises:
        GlcnnError: a value that is not a positive finite number.
    """
    if value is None:
        value = os.environ.get("GLCNN_MAX_GFLOP") or DEFAULT_MAX_GFLOP
    try:
        number = float(value) if isinstance(value, str | int | float) and \
            not isinstance(value, bool) else math.nan
    except (ValueError, OverflowError):  # "x", or an int of 400 digits
        number = math.nan
    if not 0 < number < math.inf:
        raise GlcnnError(f"compute limit {quote(str(value)[:40])} must be a positive number of "
                         "GFLOP (max_gflop=..., GLCNN_MAX_GFLOP)")
    return number


def check_flops(flops: int, limit=None) -> None:
    """Refuse a model needing more than the compute limit (`max_gflop`) per run.

    Raises:
        GlcnnError: naming the model's GFLOP, the limit and how to raise it.
    """
    gflop, limit = flops / 1e9, max_gflop(limit)
    if gflop > limit:
        raise GlcnnError(f"model needs {gflop:,.1f} GFLOP per run, over the compute limit of "
                         f"{limit:,.1f} GFLOP; raise it with max_gflop=... (Pipeline, "
                         "glcnn.load) or GLCNN_MAX_GFLOP")


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
