"""A MaxPool or AveragePool reads a blocked conv's output in place (pool.glsl BLOCKED_INPUT,
through conv_block_input.glsl), so the conv needs no unblock pass (MTCNN's conv → pool pairs).
Each chain x -> h (blocked conv) -> y (pool) must leave h in place (the array itself, never
a buffer copy: Plan.array_buffered), match the float64
reference at every precision, and equal bit for bit the same chain with h copied to an atlas
(test_conv.py's in-place checks)."""

import numpy as np
import pytest
from helpers import storable
from test_conv import ConvCase, _check_in_place, _no_buffers

import glcnn
from glcnn.graph import Node

POOLS = [  # (conv, pool op, pool attrs, why)
    (ConvCase("Conv", 3, 10, hw=(12, 14)), "MaxPool",
     {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
     "MTCNN P-Net's 2x2 stride-2 max pool, ceil_mode over an odd width (2x4 blocks)"),
    (ConvCase("Conv", 3, 8, hw=(11, 11)), "MaxPool",
     {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
     "MTCNN R-Net's 3x3 stride-2 max pool: overlapping windows, a short last one"),
    (ConvCase("Conv", 4, 8, pads=(1, 1, 1, 1), hw=(5, 40)), "MaxPool",
     {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 2]},
     "1x8 blocks, a padded dilated window"),
    (ConvCase("Conv", 3, 12, pads=(1, 1, 1, 1), hw=(9, 9)), "AveragePool",
     {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 0},
     "average over the taps inside only: padding taps read zero and are not counted"),
    (ConvCase("Conv", 3, 12, pads=(1, 1, 1, 1), hw=(9, 9)), "AveragePool",
     {"kernel_shape": [2, 3], "strides": [1, 2], "pads": [0, 1, 1, 0], "count_include_pad": 1},
     "average counting the pads, asymmetric"),
]


def _graph_and_input(conv: ConvCase, pool: str, attrs: dict, precision: str):
    nodes = [Node(conv.op, "h", ["x"], conv.attrs(), conv.weights(4)),
             Node(pool, "y", ["h"], attrs, {})]
    graph = glcnn.graph.Graph({"x": conv.in_shape}, nodes, ["y"])
    rng = np.random.default_rng(9)
    feeds = [{"x": (rng.standard_normal(conv.in_shape) * 2).astype(np.float32)}
             for _ in range(3)]
    if precision == "u8":
        glcnn.calibrate(graph, feeds)
    return graph, {"x": storable(feeds[0]["x"], precision)}


@pytest.mark.parametrize("buffers", [True, False], ids=["buffers", "no-buffers"])
@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
@pytest.mark.parametrize(("conv", "pool", "attrs", "why"), POOLS,
                         ids=lambda v: v.id("") if isinstance(v, ConvCase) else
                         str(v).replace(" ", "_")[:40] if isinstance(v, str) else None)
def test_pool_reads_blocked_tensor_in_place(ctx, monkeypatch, conv, pool, attrs, why, precision,
                                            buffers):
    if not buffers:
        _no_buffers(monkeypatch)
    graph, x = _graph_and_input(conv, pool, attrs, precision)
    _check_in_place(ctx, monkeypatch, graph, x, precision, False, why, pool=True)
