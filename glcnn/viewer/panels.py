"""Where the viewer draws what, and the panels drawn with the overlay (glcnn/viewer/overlay.py):
bar charts of vectors and the live line plot.

Window layout (window pixels, origin at the bottom left)::

    +-------------------------------------------------------------------+
    | label lines | label lines | label lines | label lines             |  LABEL_H
    | input       | output      | layer       | filters                 |  PANEL
    +-------------------------------------------------------------------+
    | line plot (model ms, or what Viewer.plot is fed, e.g. the loss)   |  PLOT_H
    | status: FPS, model ms, precision, key help                        |  STATUS_H
    +-------------------------------------------------------------------+
"""

from collections import deque

import numpy as np

PANEL, GAP = 256, 8
LABEL_H, PLOT_H, STATUS_H = 34, 96, 20
BOTTOM = STATUS_H + PLOT_H  # the panels' row starts GAP above this
WINDOW = (4 * PANEL + 5 * GAP, BOTTOM + GAP + PANEL + LABEL_H + GAP)
TOP_K = 10
COLORS = [(0.35, 0.75, 1.0, 1.0), (1.0, 0.6, 0.2, 1.0), (0.5, 0.9, 0.4, 1.0),
          (0.9, 0.4, 0.8, 1.0)]
DIM, PANEL_BG = (0.6, 0.6, 0.6, 1.0), (0.16, 0.16, 0.17, 1.0)


def panel_rect(index: int, content) -> tuple[int, int, int, int]:
    """Where panel `index` draws content of (width, height) texels: centred, aspect kept,
    an integer magnification when it fits (so texels map to whole pixel blocks)."""
    w, h = content
    scale = min(PANEL / w, PANEL / h)
    scale = float(int(scale)) if scale >= 1 else scale
    rw, rh = max(1, round(w * scale)), max(1, round(h * scale))
    x0 = GAP + index * (PANEL + GAP) + (PANEL - rw) // 2
    y0 = BOTTOM + GAP + (PANEL - rh) // 2
    return x0, y0, rw, rh


def panel_box(index: int) -> tuple[int, int, int, int]:
    """The whole PANEL x PANEL square of panel `index`."""
    return GAP + index * (PANEL + GAP), BOTTOM + GAP, PANEL, PANEL


def label_lines(overlay, index: int, lines):
    """Up to two label lines above panel `index`, the first brighter; clipped to the panel."""
    x, y = GAP + index * (PANEL + GAP), BOTTOM + GAP + PANEL + 2
    for i, line in enumerate(lines[:2]):
        overlay.text(x, y + (1 - i) * (LABEL_H // 2), fit(overlay, line, PANEL),
                     (0.95, 0.95, 0.95, 1.0) if i == 0 else DIM)


def fit(overlay, text: str, width: int) -> str:
    """`text` cut (with "..") to `width` pixels."""
    while text and overlay.atlas.width(text) > width:
        text = text[:-3] + ".."
    return text


def is_vector(shape) -> bool:
    """A (C, 1, 1) tensor: drawn as bars, not as an image."""
    return tuple(shape[1:]) == (1, 1)


def vector_bars(overlay, box, values: np.ndarray):
    """Every value of a vector as a vertical bar up (positive, red) or down (negative,
    blue) from a zero line in the middle of `box`, scaled by the largest magnitude."""
    x0, y0, w, h = box
    overlay.rect(x0, y0, w, h, PANEL_BG)
    n, top = len(values), max(float(np.max(np.abs(values))), 1e-20)
    mid, half = y0 + h // 2, h // 2 - 2
    overlay.rect(x0, mid, w, 1, DIM)
    for i, v in enumerate(values):
        left, right = x0 + i * w // n, x0 + (i + 1) * w // n
        length = round(abs(float(v)) / top * half)
        color = (1.0, 0.35, 0.25, 1.0) if v >= 0 else (0.3, 0.5, 1.0, 1.0)
        overlay.rect(left, mid if v >= 0 else mid - length, max(1, right - left - 1), length, color)


def top_k_bars(overlay, box, values: np.ndarray, names=None, k: int = TOP_K):
    """The k largest values as horizontal bars, largest on top, each with its name (or
    "class i") and value; lengths relative to 1 for probabilities, else to the largest."""
    x0, y0, w, h = box
    overlay.rect(x0, y0, w, h, PANEL_BG)
    order = np.argsort(-values, kind="stable")[:k]
    probabilities = values.min() >= 0 and values.max() <= 1
    top = 1.0 if probabilities else max(float(np.max(np.abs(values[order]))), 1e-20)
    row = h // k
    for rank, i in enumerate(order):
        y = y0 + h - (rank + 1) * row
        name = names[i] if names is not None and i < len(names) else f"class {i}"
        length = round(max(float(values[i]), 0.0) / top * (w - 4))
        overlay.rect(x0 + 2, y + 2, length, row - 4, COLORS[0] if rank == 0 else COLORS[0][:3]
                     + (0.55,))
        overlay.text(x0 + 6, y + (row - overlay.line_height) // 2,
                     fit(overlay, f"{name}  {float(values[i]):.3g}", w - 8))
    return order


class LinePlot:
    """Values over time, one line per series, drawn by the overlay.

    `add(name, value)` appends; the last `length` values of each series are kept. Each
    series is scaled to its own min..max (its label says them).
    """

    def __init__(self, length: int = 300):
        self.length = length
        self.series: dict[str, deque] = {}

    def add(self, name: str, value: float):
        self.series.setdefault(name, deque(maxlen=self.length)).append(float(value))

    def draw(self, overlay, box):
        x0, y0, w, h = box
        overlay.rect(x0, y0, w, h, PANEL_BG)
        label_x = x0 + 6
        for i, (name, values) in enumerate(self.series.items()):
            color = COLORS[i % len(COLORS)]
            v = np.asarray(values)
            finite = v[np.isfinite(v)]
            lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
            span = hi - lo if hi > lo else 1.0
            points = [(x0 + 1 + j * (w - 2) / max(self.length - 1, 1),
                       y0 + 2 + (float(np.clip(value, lo, hi)) - lo) / span * (h - 4 - 16))
                      for j, value in enumerate(v) if np.isfinite(value)]
            overlay.line(points, color)
            label_x += overlay.text(label_x, y0 + h - overlay.line_height - 1,
                                    f"{name} {v[-1]:.4g} ({lo:.3g}..{hi:.3g})   ", color)


def true_scale_views(in_shape, out_shape):
    """For an upscaler (output r ≥ 2 times the input's height and width) whose output would
    be shrunk to fit its panel: (input view, output view) as (x, y, w, h) texels, the centre
    of the output at one texel per pixel and the input region it comes from (shown r times
    larger); None otherwise, when whole tensors are shown."""
    (_, h, w), (_, oh, ow) = in_shape, out_shape
    if h <= 1 or oh <= h or oh % h or ow != w * (oh // h) or (ow <= PANEL and oh <= PANEL):
        return None
    r = oh // h
    cw, ch = min(ow, PANEL) // r * r, min(oh, PANEL) // r * r
    ox, oy = (ow - cw) // 2 // r * r, (oh - ch) // 2 // r * r
    return (ox // r, oy // r, cw // r, ch // r), (ox, oy, cw, ch)
