"""Calibration of u8 storage: per-channel value ranges of every tensor over sample inputs.

`calibrate` runs the graph in fp32 on the GPU and stores the ranges in
`graph.meta["u8_ranges"]`, which `glcnn.runtime.precision.U8Ranges` turns into the (offset,
scale) of each channel. It sits above the pipeline (it runs one), where
glcnn.runtime.precision, which the pipeline and its plan read, cannot.
"""

import copy

import numpy as np

from ..errors import GlcnnError
from .pipeline import Pipeline
from .precision import DEFAULT_MARGIN
from .stats import ChannelMinMax


def calibrate(graph, samples, ctx=None, margin: float = DEFAULT_MARGIN) -> dict:
    """Per-channel value ranges of every tensor over `samples`, for u8 storage.

    Runs `graph` in fp32 on each sample, reduces each tensor's per-channel min/max on the
    GPU (2·C numbers read back per tensor), widens each range by `margin` of its span on
    both sides, and stores the result in `graph.meta["u8_ranges"]`.

    Args:
        graph: the graph to calibrate, as it will be compiled (optimise it first;
            `glcnn.load(path, precision="u8", calibration=samples)` does both).
        samples: inputs accepted by `Pipeline.run`: an iterable of them, one dict, or one
            array: (C, H, W) is one sample, a 4-D array one per index of its first axis.
        ctx: Context to use (default: as for `Pipeline`).
        margin: fraction of each channel's span added below and above.
    Returns:
        {tensor name: [lows, highs]}, also written to graph.meta["u8_ranges"].
    """
    if isinstance(samples, dict):
        samples = [samples]
    elif isinstance(samples, np.ndarray):
        samples = np.split(samples, len(samples)) if samples.ndim == 4 else [samples]
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
