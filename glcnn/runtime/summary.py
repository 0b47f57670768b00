"""What a pipeline shows of itself: per-layer tables for `glcnn info` and
`Pipeline.summary()`, and images of tensors and filter banks for notebooks
(`Pipeline.show`); the arrays come from the pipeline, the drawing is GL-free."""

import math

import numpy as np

from ..layout import Atlas

BYTES = {"fp32": 4, "fp16": 2, "u8": 1}  # per channel of an activation texel (u8: RGBA8)


def layer_bytes(op, shape, precision: str) -> int:
    """Texture bytes a layer owns: its output atlas plus its fp32 weight textures."""
    w, h = Atlas.of(shape).size
    weights = sum(int(np.prod(shape)) * 4 for shape in op.all_texture_shapes().values())
    return w * h * 4 * BYTES[precision] + weights


def table(ops, shapes, precision: str = "fp32", footer: str = "") -> str:
    """A table of layer, op (with fused parts), output shape, params, MFLOPs, texture KiB."""
    head = (f"{'layer':<24} {'op':<24} {'output':<18} {'params':>10} {'MFLOPs':>10}"
            f" {'tex KiB':>9}")
    rows, total_bytes = [], 0
    for op in ops:
        size = layer_bytes(op, shapes[op.node.name], precision)
        total_bytes += size
        rows.append(f"{op.summary()} {size / 1024:>9.1f}")
    params = sum(int(np.asarray(w).size) for op in ops for w in op.node.weights.values())
    flops = sum(op.flops() for op in ops) / 1e6
    total = (f"{len(ops)} passes, {params:,} params, {flops:.2f} MFLOPs, "
             f"{total_bytes / 2**20:.2f} MiB textures without reuse ({precision})")
    return "\n".join([head, *rows, total] + ([footer] if footer else []))


class Views:
    """`show()`: a tensor or a filter bank of a Pipeline as a PIL image (Jupyter displays a
    PIL image inline through its `_repr_png_`)."""

    def show(self, name: str, filters: bool = False, channel: int = 0, zoom: int = 1):
        """Tensor `name` as a PIL image, or with `filters` the weights "W" of layer `name`.

        A tensor (C, H, W) is normalised to its own min..max (one scale for all channels);
        3 channels make an RGB image, any other count a near-square grid of grey tiles (1-pixel
        gutters). A filter bank (Co, Ci, k, k) is a grid of k×k tiles, one per output
        channel, each normalised to its own min..max: RGB when Ci = 3, else input channel
        `channel`. `zoom` enlarges by pixel repetition.

        Raises:
            GlcnnError: as `read` (a tensor not kept: compile with keep=[name]) and `weights`.
        """
        if not filters:
            return to_image(tensor_grid(self.read(name)), zoom)
        return to_image(filter_grid(self.weights(name)["W"], channel), zoom)


def tensor_grid(x: np.ndarray) -> np.ndarray:
    """(C, H, W) as an (h, w) or, for C = 3, (H, W, 3) array in [0, 1]: see `Views.show`."""
    x = np.asarray(x, np.float64)
    lo, hi = float(x.min()), float(x.max())
    x = (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)
    return x.transpose(1, 2, 0) if x.shape[0] == 3 else tile(x)


def filter_grid(w: np.ndarray, channel: int = 0) -> np.ndarray:
    """(Co, Ci, k, k) weights as a grid of per-filter normalised tiles: see `Views.show`."""
    w = np.asarray(w, np.float64)
    w = w if w.shape[1] == 3 else w[:, channel % w.shape[1]][:, None]
    lo = w.min(axis=(1, 2, 3), keepdims=True)
    span = w.max(axis=(1, 2, 3), keepdims=True) - lo
    w = np.divide(w - lo, span, out=np.zeros_like(w), where=span > 0)
    return tile(w.transpose(0, 2, 3, 1) if w.shape[1] == 3 else w[:, 0])


def tile(tiles: np.ndarray) -> np.ndarray:
    """N tiles (N, h, w[, 3]) on a near-square grid (cols = ceil(sqrt(N))), 1-pixel gutters
    of 0 between them."""
    n, h, w = tiles.shape[:3]
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    grid = np.zeros((rows * (h + 1) - 1, cols * (w + 1) - 1, *tiles.shape[3:]))
    for i in range(n):
        r, c = divmod(i, cols)
        grid[r * (h + 1):r * (h + 1) + h, c * (w + 1):c * (w + 1) + w] = tiles[i]
    return grid


def to_image(values: np.ndarray, zoom: int = 1):
    """A [0, 1] array (h, w) or (h, w, 3) as a PIL image, each pixel repeated `zoom` times."""
    from PIL import Image
    zoom = max(1, int(zoom))
    pixels = np.round(np.clip(values, 0, 1) * 255).astype(np.uint8)
    return Image.fromarray(pixels.repeat(zoom, axis=0).repeat(zoom, axis=1))
