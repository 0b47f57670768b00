"""`glcnn diff --png DIR`: per layer one image, glcnn | reference | |difference| (GL-free).

Each panel is a channel mosaic of the (C, H, W) tensor: the C channels as H×W tiles in a
near-square grid (cols = ceil(sqrt(C))), 1-pixel gaps, scaled up (nearest) so small layers
stay visible. Every panel is normalised to its own range (black = min, white = max); the
difference panel to its own max, so a perfect layer shows black and a diverged one its
pattern. NaN/Inf values are red. `DIR/index.tsv` lists each file with the three ranges
(the |difference| max included), since the normalisation hides them.
"""

import math
from pathlib import Path

import numpy as np

from ..errors import GlcnnError
from .diff_refs import NothingComparedError, abs_error, safe_name

GAP = 4  # pixels between panels
HEADER = 14  # pixels of caption above the panels
MIN_SIDE = 96  # small mosaics are scaled up by an integer factor to at least this
BACKGROUND = (48, 48, 64)
NONFINITE = (255, 0, 0)


def grid(channels: int) -> tuple[int, int]:
    """(rows, cols) of the near-square channel grid: cols = ceil(sqrt(C))."""
    cols = math.ceil(math.sqrt(channels))
    return math.ceil(channels / cols), cols


def normalise(x, lo: float | None = None) -> tuple[np.ndarray, float, float]:
    """`x` mapped to uint8 RGB by its finite min (or `lo`)..max, NaN/Inf red.

    Returns:
        (rgb of shape x.shape + (3,), lo, hi).
    """
    x = np.asarray(x, np.float64)
    finite = np.isfinite(x)
    lo_hi = (float(x[finite].min()), float(x[finite].max())) if finite.any() else (0.0, 0.0)
    lo, hi = (lo_hi[0] if lo is None else lo), lo_hi[1]
    scaled = (np.where(finite, x, lo) - lo) / (hi - lo) if hi > lo else np.zeros_like(x)
    gray = np.round(scaled * 255).astype(np.uint8)
    rgb = np.repeat(gray[..., None], 3, axis=-1)
    rgb[~finite] = NONFINITE
    return rgb, lo, hi


def mosaic(rgb: np.ndarray) -> np.ndarray:
    """(C, H, W, 3) tiles → one (rows·(H+1)−1, cols·(W+1)−1, 3) image, scaled up if small."""
    c, h, w, _ = rgb.shape
    rows, cols = grid(c)
    out = np.empty((rows * (h + 1) - 1, cols * (w + 1) - 1, 3), np.uint8)
    out[:] = BACKGROUND
    for i in range(c):
        y, x = (i // cols) * (h + 1), (i % cols) * (w + 1)
        out[y:y + h, x:x + w] = rgb[i]
    factor = max(1, math.ceil(MIN_SIDE / max(out.shape[:2])))
    return out.repeat(factor, axis=0).repeat(factor, axis=1)


def layer_image(y, ref):
    """The three-panel PIL image for one layer, and (glcnn range, ref range, |diff| max)."""
    from PIL import Image, ImageDraw
    a, *y_range = normalise(y)
    b, *ref_range = normalise(ref)
    err = abs_error(y, ref)
    c, _, _ = normalise(err, lo=0.0)
    diff_max = float(err.max())
    panels = [mosaic(p) for p in (a, b, c)]
    ph, pw = panels[0].shape[:2]
    image = Image.new("RGB", (3 * pw + 2 * GAP, ph + HEADER), BACKGROUND)
    captions = [f"glcnn {y_range[0]:.3g}..{y_range[1]:.3g}",
                f"reference {ref_range[0]:.3g}..{ref_range[1]:.3g}", f"|diff| max {diff_max:.3g}"]
    draw = ImageDraw.Draw(image)
    for i, (panel, caption) in enumerate(zip(panels, captions)):
        image.paste(Image.fromarray(panel), (i * (pw + GAP), HEADER))
        draw.text((i * (pw + GAP) + 2, 1), caption, fill=(230, 230, 230))
    return image, tuple(y_range), tuple(ref_range), diff_max


def write_pngs(folder, rows, outputs: dict, refs: dict) -> list[Path]:
    """One `NN_<layer>.png` per compared layer (graph inputs skipped) and `index.tsv`.

    Args:
        folder: created if missing.
        rows: `LayerDiff` rows in execution order; outputs / refs: arrays by layer name.
    Returns:
        The PNG paths written.
    Raises:
        GlcnnError: the folder cannot be created or written.
        NothingComparedError: no layer of `rows` was compared (nothing to draw).
    """
    folder = Path(folder)
    layers = [row for row in rows if row.op != "Input"]
    if not any(row.compared for row in layers):
        raise NothingComparedError(f"nothing compared: none of the {len(layers)} layers has a "
                                   f"reference; no images written to {folder}")
    index = ["file\tlayer\top\tglcnn_min\tglcnn_max\tref_min\tref_max\tdiff_max"]
    written = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for i, row in enumerate(rows):
            if row.op == "Input" or not row.compared:
                continue
            image, y_range, ref_range, diff_max = layer_image(outputs[row.layer], refs[row.layer])
            path = folder / f"{i:02d}_{safe_name(row.layer)}.png"
            image.save(path)
            written.append(path)
            numbers = "\t".join(f"{v:.6g}" for v in (*y_range, *ref_range, diff_max))
            index.append(f"{path.name}\t{row.layer}\t{row.op}\t{numbers}")
        (folder / "index.tsv").write_text("\n".join(index) + "\n")
    except OSError as exc:
        raise GlcnnError(f"cannot write images to {folder}: {exc}") from None
    return written
