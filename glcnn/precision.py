"""Storage precisions, and range scaling for 8-bit storage.

| precision | texture | stored value                          | for                           |
|-----------|---------|---------------------------------------|-------------------------------|
| fp32      | RGBA32F | v                                     | exact results (default)       |
| fp16      | RGBA16F | half(v)                               | half the bandwidth            |
| u8        | RGBA8   | round(255·(v − offset[c]) / scale[c]) | GPUs without float targets    |

Arithmetic in shaders is float32 in every mode. For u8, each tensor's per-channel
offset/scale come from `calibrate()`: run sample inputs in fp32, reduce every tensor's
per-channel min/max on the GPU, widen by a margin, and store the result in
`graph.meta["u8_ranges"]` (saved with the model, so loading needs no calibration). A value
outside its calibrated range is clamped to it — the margin exists so that this does not
happen on inputs like the samples. Plain RGBA8 would clamp everything outside [0, 1].
"""

import copy

import numpy as np

from .errors import GlcnnError
from .layout import Atlas

TEXTURE_DTYPE = {"fp32": "f4", "fp16": "f2", "u8": "f1"}
NUMPY_DTYPE = {"fp32": np.float32, "fp16": np.float16, "u8": np.uint8}
DEFAULT_MARGIN = 0.1

# Allowed scaled error, max |glcnn - reference| / max(1, max |reference|), per precision;
# the measured worst cases are listed in tests/helpers.py and the README.
TOLERANCE = {"fp32": 1e-5, "fp16": 4e-3, "u8": 3e-2}


class U8Ranges:
    """Per-tensor, per-channel (offset, scale) of u8 storage, and the texture shaders read.

    Tensor i (in `names` order) has id i + 1: rows 2·id and 2·id + 1 of the ranges texture
    hold its offsets and scales, one RGBA texel per slice. Id 0 means "stored as is".
    """

    def __init__(self, ranges: dict, shapes: dict):
        missing = [name for name in shapes if name not in ranges]
        if missing:
            raise GlcnnError(f"precision u8 needs calibrated ranges for every tensor; missing "
                             f"{missing[:5]}{'...' if len(missing) > 5 else ''}: run "
                             "glcnn.calibrate(graph, samples) on the optimised graph")
        self.ids = {name: i + 1 for i, name in enumerate(shapes)}
        self.offset, self.scale = {}, {}
        for name, shape in shapes.items():
            lo, hi = (np.asarray(v, np.float64) for v in ranges[name])
            if lo.shape != (shape[0],) or hi.shape != (shape[0],) or np.any(~(hi >= lo)):
                raise GlcnnError(f"u8 range of tensor {name!r} must be two lists of "
                                 f"{shape[0]} values with hi >= lo")
            self.offset[name] = lo
            self.scale[name] = np.maximum(hi - lo, 1e-30)

    def texture_data(self) -> np.ndarray:
        """(2·(n + 1), max slices, 4) float32: offsets and scales per tensor id."""
        width = max(Atlas(len(v), 1, 1).slices for v in self.offset.values())
        data = np.zeros((2 * (len(self.ids) + 1), width * 4), np.float32)
        data[1::2] = 1.0  # identity for id 0 and for lanes past C
        for name, i in self.ids.items():
            c = len(self.offset[name])
            data[2 * i, :c], data[2 * i + 1, :c] = self.offset[name], self.scale[name]
        return data.reshape(data.shape[0], width, 4)

    def encode(self, name: str, x: np.ndarray) -> np.ndarray:
        """(C, H, W) float -> stored fraction in [0, 1] (clamped)."""
        s = (np.asarray(x, np.float64) - self.offset[name][:, None, None]) \
            / self.scale[name][:, None, None]
        return np.clip(s, 0.0, 1.0).astype(np.float32)

    def decode(self, name: str, s: np.ndarray) -> np.ndarray:
        """Stored fractions (C, H, W) -> values."""
        return (s * self.scale[name][:, None, None]
                + self.offset[name][:, None, None]).astype(np.float32)


def calibrate(graph, samples, ctx=None, margin: float = DEFAULT_MARGIN) -> dict:
    """Per-channel value ranges of every tensor over `samples`, for u8 storage.

    Runs `graph` in fp32 on each sample, reduces each tensor's per-channel min/max on the
    GPU (2·C numbers read back per tensor), widens each range by `margin` of its span on
    both sides, and stores the result in `graph.meta["u8_ranges"]`.

    Args:
        graph: the graph to calibrate, as it will be compiled (optimise it first).
        samples: an iterable of inputs accepted by `Pipeline.run`.
        ctx: Context to use (default: a new headless one).
        margin: fraction of each channel's span added below and above.
    Returns:
        {tensor name: [lows, highs]}, also written to graph.meta["u8_ranges"].
    """
    from .pipeline import Pipeline
    from .stats import ChannelMinMax
    lo, hi = {}, {}
    with Pipeline(copy.deepcopy(graph), ctx, keep="all") as pipe:
        stats = ChannelMinMax(pipe.ctx)
        count = 0
        for sample in samples:
            pipe.run(sample, readback=False)
            for name, shape in pipe.shapes.items():
                mm = stats.read(pipe.texture(name), shape).astype(np.float64)
                lo[name] = np.minimum(lo.get(name, mm[:, 0]), mm[:, 0])
                hi[name] = np.maximum(hi.get(name, mm[:, 1]), mm[:, 1])
            count += 1
        stats.release()
    if count == 0:
        raise GlcnnError("calibrate() needs at least one sample input")
    ranges = {}
    for name in lo:
        pad = np.maximum((hi[name] - lo[name]) * margin, 1e-6 * np.maximum(1, abs(hi[name])))
        ranges[name] = [(lo[name] - pad).tolist(), (hi[name] + pad).tolist()]
    graph.meta["u8_ranges"] = ranges
    return ranges
