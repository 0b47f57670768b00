"""One way to test an op: run it alone on the GPU and compare with glcnn.reference.

Error metric: max |glcnn − reference| / max(1, max |reference|), so tolerances mean
"relative to the output's scale" and stay meaningful for tiny or huge outputs.
"""

import numpy as np

import glcnn
from glcnn import reference
from glcnn.graph import Graph, Node

# Allowed scaled error per storage precision. Measured worst cases over the test suite
# are recorded next to each entry (see README "Precision").
TOLERANCE = {
    "fp32": 1e-5,
    "fp16": 4e-3,
}


def scaled_error(y, ref) -> float:
    y, ref = np.asarray(y, np.float64), np.asarray(ref, np.float64)
    return float(np.max(np.abs(y - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def random_inputs(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def check_op(ctx, op, attrs, in_shapes, weights=None, precision="fp32", seed=0, inputs=None):
    """Run one op on the GPU and assert it matches the float64 reference.

    Returns the measured scaled error. The failure message lists every parameter.
    """
    names = [f"x{i}" for i in range(len(in_shapes))]
    node = Node(op, "y", names, dict(attrs), dict(weights or {}))
    graph = Graph(dict(zip(names, [tuple(s) for s in in_shapes])), [node], ["y"])
    xs = inputs if inputs is not None else random_inputs(in_shapes, seed)
    feeds = dict(zip(names, xs))
    if precision == "fp16":  # the reference sees what fp16 storage can represent
        feeds = {k: v.astype(np.float16).astype(np.float32) for k, v in feeds.items()}
    with glcnn.Pipeline(graph, ctx, precision=precision) as pipe:
        y = pipe.run(feeds)
    ref = reference.run(graph, feeds)["y"]
    assert y.shape == ref.shape, f"{op} {attrs} {in_shapes}: shape {y.shape} != {ref.shape}"
    err = scaled_error(y, ref)
    assert err <= TOLERANCE[precision], (
        f"{op} attrs={attrs} inputs={in_shapes} weights={ {k: np.shape(v) for k, v in (weights or {}).items()} } "
        f"precision={precision}: scaled error {err:.3g} > {TOLERANCE[precision]}")
    return err
