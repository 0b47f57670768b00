"""Storage precisions, and range scaling for 8-bit storage.

| precision | texture | stored value                          | for                           |
|-----------|---------|---------------------------------------|-------------------------------|
| fp32      | RGBA32F | v                                     | exact results (default)       |
| fp16      | RGBA16F | half(v)                               | half the bandwidth            |
| u8        | RGBA8   | round(255·(v − offset[c]) / scale[c]) | GPUs without float targets    |

Arithmetic in shaders is float32 in every mode. For u8, each tensor's per-channel
offset/scale come from `glcnn.runtime.calibration.calibrate()`: run sample inputs in fp32, reduce
every tensor's per-channel min/max on the GPU, widen by a margin, and store the result in
`graph.meta["u8_ranges"]` (saved with the model, so loading needs no calibration). A value
outside its calibrated range is clamped to it — the margin exists so that this does not
happen on inputs like the samples. Plain RGBA8 would clamp everything outside [0, 1].

A u8 pipeline keeps a few tensors in RGBA32F (`float_tensors`): normalisation statistics and
what an InstanceNormalization normalises. Their 8-bit error would be divided by the spread of
the channel on this very input, once per normalisation; everything else is 8-bit.
"""

import numpy as np

from ..errors import GlcnnError, quote
from ..layout import Atlas

TEXTURE_DTYPE = {"fp32": "f4", "fp16": "f2", "u8": "f1"}
NUMPY_DTYPE = {"f4": np.float32, "f2": np.float16, "f1": np.uint8}  # by texture dtype
DEFAULT_MARGIN = 0.1

# Allowed scaled error, max |glcnn - reference| / max(1, max |reference|), per precision;
# the measured worst cases are listed in tests/helpers.py and the README.
TOLERANCE = {"fp32": 1e-5, "fp16": 4e-3, "u8": 3e-2}


# Op -> (inputs it normalises by their own spread, inputs that are statistics of its input 0).
NORMALISATIONS = {"InstanceNormalization": ((0,), ()), "InstanceNormApply": ((0,), (1, 2)),
                  "SoftmaxApply": ((), (1,))}


def float_tensors(graph) -> set[str]:
    """The tensors a u8 pipeline stores as float32 (RGBA32F, "stored as is"), not 8-bit.

    - Normalisation statistics: the mean and variance inputs of InstanceNormApply, the (M, S)
      input of SoftmaxApply, and the partial reductions that make them. Stored in 8 bits, a
      statistic snaps to a grid over the calibration samples' values of it (one value per
      sample), not to this input's, and its error shifts or scales every value it
      normalises.
    - The input x of an InstanceNormalization: y = (x − μ) / σ divides the 8-bit rounding
      error of x (up to 1/510 of a calibrated range spanning ≳ 9 σ) by this input's σ, in
      every such layer.
    A fast-style network with nine InstanceNorms, 64² and calibrated on its input, is off by
    1.2e-1 with every tensor 8-bit, 5.3e-2 with the statistics float, 4.0e-2 with x too
    (README, "Precision modes").

    Returns:
        Tensor names, a subset of the graph's (no graph input unless a normalisation reads it).
    """
    producers = {node.name: node for node in graph.nodes}
    kept = set()
    for node in graph.nodes:
        normalised, statistics = NORMALISATIONS.get(node.op, ((), ()))
        kept.update(node.inputs[i] for i in normalised)
        todo = [node.inputs[i] for i in statistics]
        while todo:  # the statistics and the reductions that made them, back to the input
            name = todo.pop()
            if name not in kept and name != node.inputs[0] and name in producers:
                kept.add(name)
                todo += producers[name].inputs
    return kept


class U8Ranges:
    """Per-tensor, per-channel (offset, scale) of u8 storage, and the texture shaders read.

    Tensor i (in `shapes` order, `floats` left out) has id i + 1: rows 2·id and 2·id + 1 of
    the ranges texture hold its offsets and scales, one RGBA texel per slice. Id 0 means
    "stored as is": the tensors of `floats` (see `float_tensors`), which need no range.
    """

    def __init__(self, ranges: dict, shapes: dict, floats=()):
        shapes = {name: shape for name, shape in shapes.items() if name not in floats}
        missing = [name for name in shapes if name not in ranges]
        if missing:
            raise GlcnnError(f"precision u8 needs calibrated ranges for every tensor; missing "
                             f"{missing[:5]}{'...' if len(missing) > 5 else ''}: pass "
                             "calibration=samples to glcnn.load (sample inputs like the real "
                             "ones), or run glcnn.calibrate(graph, samples) on the optimised "
                             "graph given to Pipeline")
        self.ids = {name: i + 1 for i, name in enumerate(shapes)}
        self.offset, self.scale = {}, {}
        for name, shape in shapes.items():
            lo, hi = (np.asarray(v, np.float64) for v in ranges[name])
            if lo.shape != (shape[0],) or hi.shape != (shape[0],) or np.any(~(hi >= lo)):
                raise GlcnnError(f"u8_ranges of tensor {quote(name)} must be two lists of "
                                 f"{shape[0]} values with hi >= lo")
            self.offset[name] = lo
            self.scale[name] = np.maximum(hi - lo, 1e-30)

    def texture_data(self) -> np.ndarray:
        """(2·(n + 1), max slices, 4) float32: offsets and scales per tensor id."""
        width = max((Atlas(len(v), 1, 1).slices for v in self.offset.values()), default=1)
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
