"""One way to test an op: run it alone on the GPU and compare with glcnn.graph.reference.

Error metric: max |glcnn − reference| / max(1, max |reference|), so tolerances mean
"relative to the output's scale" and stay meaningful for tiny or huge outputs.
"""

import copy

import numpy as np

import glcnn
from glcnn.graph import Graph, Node, passes, reference
from glcnn.layout import Atlas
from glcnn.runtime.precision import TOLERANCE

# TOLERANCE (glcnn.runtime.precision, shared with `glcnn diff`) is the allowed scaled error per
# storage precision. Measured worst cases (README "Precision modes"; re-measure by printing
# WORST after a test run), on Mesa llvmpipe over test_conv, test_ops, test_passes and
# test_torch_parity:
# - fp32 1e-5: single ops ≤ 2.3e-7; whole models up to 2.5e-6 (DCGAN generator,
#   512-channel sums)
# - fp16 4e-3: single ops ≤ 9.6e-4 (one fp16 ulp: llvmpipe truncates float→half on store,
#   see test_layout.py); whole models up to 3.5e-3 (DCGAN generator, 5 stored layers)
# Precisions the op tests run in; u8 needs calibrated ranges and has its own tests
# (test_precision.py).
PRECISIONS = ("fp32", "fp16")

# Worst scaled error `assert_close` has seen in this process, per precision: what the
# numbers next to TOLERANCE were measured with.
WORST = dict.fromkeys(TOLERANCE, 0.0)


def scaled_error(y, ref) -> float:
    y, ref = np.asarray(y, np.float64), np.asarray(ref, np.float64)
    return float(np.max(np.abs(y - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def assert_close(y, ref, precision: str, what: str) -> float:
    """Assert glcnn's `y` matches `ref` within TOLERANCE[precision]; returns the error.

    `what` describes the case (every parameter) for the failure message.
    """
    assert np.shape(y) == np.shape(ref), f"{what}: shape {np.shape(y)} != {np.shape(ref)}"
    assert np.all(np.isfinite(y)), f"{what}: glcnn output has NaN or Inf"
    err = scaled_error(y, ref)
    WORST[precision] = max(WORST[precision], err)
    assert err <= TOLERANCE[precision], (
        f"{what} precision={precision}: scaled error {err:.3g} > {TOLERANCE[precision]}")
    return err


def assert_all_close(ys: dict, refs: dict, precision: str, what: str) -> float:
    """`assert_close` for every tensor of `refs` (name -> array); returns the worst error.

    A comparison of nothing proves nothing: fails when `refs` is empty or `ys` lacks one of
    its names.
    """
    assert refs, f"{what}: nothing compared (no reference tensors)"
    missing = sorted(set(refs) - set(ys))
    assert not missing, f"{what}: glcnn has no tensor {missing} (it has {sorted(ys)})"
    return max(assert_close(ys[k], refs[k], precision, f"{what} tensor {k!r}") for k in refs)


def random_inputs(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def storable(x, precision: str) -> np.ndarray:
    """`x` as float32 after the rounding storing it in `precision` textures applies."""
    x = np.asarray(x, np.float32)
    return x.astype(np.float16).astype(np.float32) if precision == "fp16" else x


def single_op_graph(op, attrs, in_shapes, weights=None, name="y") -> Graph:
    """A graph of one node `name` reading inputs x0, x1, ... of `in_shapes`."""
    names = [f"x{i}" for i in range(len(in_shapes))]
    node = Node(op, name, names, dict(attrs), dict(weights or {}))
    return Graph(dict(zip(names, [tuple(s) for s in in_shapes])), [node], [name])


def check_op(ctx, op, attrs, in_shapes, weights=None, precision="fp32", seed=0, inputs=None,
             strategy=None):
    """Run one op on the GPU and assert it matches the float64 reference.

    `strategy` is the Pipeline's ("direct", "blocked", or None for the context's choice).
    Returns the measured scaled error. The failure message lists every parameter.
    """
    graph = single_op_graph(op, attrs, in_shapes, weights)
    xs = inputs if inputs is not None else random_inputs(in_shapes, seed)
    # The reference sees what the input texture can represent.
    feeds = {name: storable(x, precision) for name, x in zip(graph.inputs, xs)}
    with glcnn.Pipeline(graph, ctx, precision=precision, strategy=strategy) as pipe:
        y = pipe.run(feeds)
        strategy = pipe.strategy
    ref = reference.run(graph, feeds)["y"]
    shapes = {k: np.shape(v) for k, v in (weights or {}).items()}
    return assert_close(y, ref, precision, f"{op} attrs={attrs} inputs={in_shapes} "
                                           f"weights={shapes} seed={seed} strategy={strategy}")


def atlas_texels(tex, shape) -> np.ndarray:
    """The texels of texture `tex` holding a (C, H, W) tensor, as a (height, width, 4) float32
    atlas; asserts that the texture's margin past the atlas (Pipeline._new_image) is zero."""
    dtype = {"f4": np.float32, "f2": np.float16, "f1": np.uint8}[tex.dtype]
    raw = np.frombuffer(tex.read(), dtype).reshape(tex.height, tex.width, 4)
    width, height = Atlas.of(shape).size
    assert not raw[height:].any() and not raw[:, width:].any(), "texels past the atlas written"
    return raw[:height, :width].astype(np.float32)


# --- graphs for the pass tests (tests/graph/test_passes.py and the op tests) ----------
RNG_SEED = 7


def conv_node(name, x, ci, co, k=3, group=1, transposed=False, bias=True, seed=0, **attrs):
    """A Conv (or ConvTranspose) node with random weights; pads default to 'same'-ish."""
    rng = np.random.default_rng(seed)
    shape = (ci, co // group, k, k) if transposed else (co, ci // group, k, k)
    weights = {"W": rng.standard_normal(shape).astype(np.float32) / np.sqrt(ci * k * k / group)}
    if bias:
        weights["B"] = rng.standard_normal(co).astype(np.float32)
    attrs = {"pads": [k // 2] * 4, "group": group} | attrs
    return Node("ConvTranspose" if transposed else "Conv", name, [x], attrs, weights)


def signature(graph):
    """Node ops with their fused parts, e.g. ['Conv+Add+Relu', 'Add', 'LeakyRelu+Conv']."""
    return [n.label for n in graph.nodes]


def _feeds(graph, precision, seed=RNG_SEED):
    rng = np.random.default_rng(seed)
    return {k: storable(rng.standard_normal(s), precision) for k, s in graph.inputs.items()}


def optimised_matches_original(ctx, graph, precision="fp32", optimise=passes.optimize,
                               strategy=None):
    """GPU run of optimise(copy of graph) vs reference of `graph`; returns the new graph."""
    feeds = _feeds(graph, precision)
    ref = reference.run(graph, feeds)
    optimised = optimise(copy.deepcopy(graph))
    optimised.validate()
    assert optimised.outputs == graph.outputs
    with glcnn.Pipeline(optimised, ctx, precision=precision, strategy=strategy) as pipe:
        assert len(pipe.passes) == len(optimised.nodes)
        ys = pipe.run(feeds)
    ys = ys if isinstance(ys, dict) else {graph.outputs[0]: ys}
    for name in graph.outputs:
        assert_close(ys[name], ref[name], precision,
                     f"output {name!r} of {signature(optimised)} vs original {graph!r}")
    return optimised
