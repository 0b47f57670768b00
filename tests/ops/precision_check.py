"""`check`: one op against the float64 reference at fp32, fp16 or u8, for the op tests of
sequence heads and attention (test_binary, test_softmax_axes, test_reduce_channels,
test_matmul, test_layernorm). fp32 / fp16 as helpers.check_op; u8 as tests/ops/test_math.py:
calibrate on the evaluated sample and give the reference the inputs as their u8 textures
hold them, so the error measured is the op's own and its output's 8-bit storage."""

import numpy as np
from helpers import assert_close, check_op, single_op_graph

import glcnn
from glcnn.graph import reference

PRECISIONS = ("fp32", "fp16", "u8")


def normal_inputs(shapes, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) * scale).astype(np.float32) for s in shapes]


def check(ctx, op, attrs, shapes, precision, weights=None, inputs=None) -> float:
    """Run `op` alone on the GPU in `precision` and assert it matches the reference; returns
    the scaled error."""
    xs = inputs if inputs is not None else normal_inputs(shapes)
    if precision != "u8":
        return check_op(ctx, op, attrs, shapes, weights, precision, inputs=xs)
    graph = single_op_graph(op, attrs, shapes, weights)
    feeds = [dict(zip(graph.inputs, xs))]
    glcnn.calibrate(graph, feeds, ctx)
    with glcnn.Pipeline(graph, ctx, precision="u8", keep="all") as pipe:
        y = pipe.run(feeds[0])
        stored = {name: pipe.read(name) for name in graph.inputs}
    ref = reference.run(graph, stored)["y"]
    shown = {k: np.shape(v) for k, v in (weights or {}).items()}
    return assert_close(y, ref, "u8", f"{op} attrs={attrs} inputs={shapes} weights={shown}")
