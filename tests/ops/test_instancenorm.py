"""InstanceNormalization: the one-pass op, its expansion by `glcnn.graph.passes.expand_reductions`,
the large-mean / small-variance case, a Conv → InstanceNorm → Relu chain, and the errors."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gl_census import census
from helpers import (
    PRECISIONS,
    assert_close,
    check_op,
    conv_node,
    optimised_matches_original,
    random_inputs,
    signature,
    storable,
)
from ort_node import run_node

import glcnn
from glcnn.graph import Graph, Node, passes, reference
from glcnn.ops import make_op

SHAPES = [(1, 1, 1), (3, 5, 7), (5, 1, 1), (13, 9, 4), (257, 3, 3), (1, 11, 3), (3, 64, 64)]
SHAPE_IDS = ["c{}-{}x{}".format(*s) for s in SHAPES]


def _weights(c, seed=0):
    rng = np.random.default_rng(seed)
    return {"scale": rng.uniform(0.5, 2, c).astype(np.float32),
            "B": rng.standard_normal(c).astype(np.float32)}


def _graph(shape, epsilon=None, then=None):
    attrs = {} if epsilon is None else {"epsilon": epsilon}
    nodes = [Node("InstanceNormalization", "norm", ["x"], attrs, _weights(shape[0]))]
    if then:
        nodes.append(Node(then, "act", ["norm"]))
    return Graph({"x": shape}, nodes, [nodes[-1].name])


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_instancenorm_one_pass(ctx, shape, precision):
    check_op(ctx, "InstanceNormalization", {}, [shape], _weights(shape[0]), precision)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_instancenorm_epsilon(ctx, precision):
    # A constant plane has variance 0: the output is B, and epsilon is what keeps it finite.
    x = np.full((5, 3, 4), 2.5, np.float32)
    check_op(ctx, "InstanceNormalization", {"epsilon": 1e-2}, [x.shape], _weights(5),
             precision, inputs=[x])
    check_op(ctx, "InstanceNormalization", {"epsilon": 1e-2}, [(5, 3, 4)], _weights(5),
             precision)


EXPANSIONS = [  # (input shape, nodes after optimize)
    ((3, 4, 4), ["InstanceNormalization"]),  # 16 positions: one pass is faster
    ((5, 9, 7), ["InstanceNormMean", "InstanceNormVariance", "InstanceNormApply"]),
    ((13, 40, 31), ["InstanceNormMean", "ReduceMean", "InstanceNormVariance", "ReduceMean",
                    "InstanceNormApply"]),
    ((3, 1, 300), ["InstanceNormMean", "InstanceNormVariance", "InstanceNormApply"]),
    ((2, 128, 96), ["InstanceNormMean", "ReduceMean", "InstanceNormVariance", "ReduceMean",
                    "InstanceNormApply"]),  # beyond the one-pass limit: needs the expansion
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("shape", "after"), EXPANSIONS,
                         ids=["c{}-{}x{}".format(*e[0]) for e in EXPANSIONS])
def test_optimised_instancenorm(ctx, shape, after, precision):
    optimised = optimised_matches_original(ctx, _graph(shape, epsilon=1e-3), precision)
    assert signature(optimised) == after
    assert optimised.nodes[-1].name == "norm"


@pytest.mark.parametrize("precision", PRECISIONS)
def test_instancenorm_relu_fuses_into_the_normalise_pass(ctx, precision):
    optimised = optimised_matches_original(ctx, _graph((6, 12, 10), then="Relu"), precision)
    assert signature(optimised)[-1] == "InstanceNormApply+Relu"
    assert optimised.nodes[-1].name == "act"


# --- accuracy where E[x²] − E[x]² collapses ----------------------------------------------------
@pytest.mark.parametrize("precision", PRECISIONS)
def test_instancenorm_with_and_without_relu_share_a_program(ctx, precision):
    shape = (6, 5, 7)
    nodes = [Node("InstanceNormalization", "plain", ["x"], {}, _weights(6)),
             Node("InstanceNormalization", "relu", ["x"], {"activation": {"op": "Relu"}},
                  _weights(6, seed=1))]
    graph = Graph({"x": shape}, nodes, ["plain", "relu"])
    x = {"x": storable(random_inputs([shape], 3)[0] * 3, precision)}
    with glcnn.Pipeline(graph, ctx, precision=precision) as pipe:
        assert len({id(p.program) for p in pipe.passes}) == 1
        ys = pipe.run(x)
    ref = reference.run(graph, x)
    for name in graph.outputs:
        assert_close(ys[name], ref[name], precision, name)
    assert ys["relu"].min() == 0 and ys["plain"].min() < 0


def _large_mean(shape, seed=5):
    rng = np.random.default_rng(seed)
    return (1000 + 0.01 * rng.standard_normal(shape)).astype(np.float32)


@pytest.mark.parametrize("optimise", [False, True], ids=["one-pass", "expanded"])
@pytest.mark.parametrize("shape", [(5, 9, 7), (3, 48, 40)], ids=["c5-9x7", "c3-48x40"])
def test_large_mean_small_variance_fp32(ctx, shape, optimise):
    x = _large_mean(shape)
    x64 = x.astype(np.float64)
    # Guard: the data defeats the one-pass float32 formula, so passing means something.
    naive = (x * x).mean((1, 2)) - x.mean((1, 2)) ** 2
    assert np.max(np.abs(naive - x64.var((1, 2))) / x64.var((1, 2))) > 0.5
    graph = _graph(shape)
    run = passes.optimize(copy.deepcopy(graph)) if optimise else graph
    with glcnn.Pipeline(run, ctx) as pipe:
        y = pipe.run(x)
    assert_close(y, reference.run(graph, {"x": x})["norm"], "fp32",
                 f"InstanceNormalization of 1000 + 0.01·noise {shape} optimise={optimise}")


# --- a chain, and the un-optimised limit --------------------------------------------------------
@pytest.mark.parametrize("optimise", [False, True], ids=["as-is", "optimised"])
def test_conv_instancenorm_relu_chain(ctx, optimise):
    shape = (3, 20, 18)
    conv = conv_node("conv", "x", 3, 8)
    nodes = [conv, Node("InstanceNormalization", "norm", ["conv"], {}, _weights(8)),
             Node("Relu", "act", ["norm"])]
    graph = Graph({"x": shape}, nodes, ["act"])
    x = random_inputs([shape], seed=6)[0]
    t = torch.from_numpy(x.astype(np.float64))[None]
    w = {k: torch.from_numpy(np.asarray(v, np.float64)) for k, v in conv.weights.items()}
    norm = {k: torch.from_numpy(v.astype(np.float64)) for k, v in _weights(8).items()}
    want = F.relu(F.instance_norm(F.conv2d(t, w["W"], w["B"], padding=1),
                                  weight=norm["scale"], bias=norm["B"], eps=1e-5))[0].numpy()
    run = passes.optimize(copy.deepcopy(graph)) if optimise else graph
    with glcnn.Pipeline(run, ctx) as pipe:
        y = pipe.run(x)
    assert_close(y, want, "fp32", f"Conv → InstanceNorm → Relu optimise={optimise}")


def test_large_plane_needs_optimize(ctx, tmp_path):
    graph = _graph((2, 128, 96))
    before = census()
    with pytest.raises(glcnn.UnsupportedOpError,
                       match=r"layer 'norm' \(InstanceNormalization\): a 128×96 plane .*"
                             r"glcnn\.graph\.passes\.optimize"):
        glcnn.Pipeline(graph, ctx)
    assert census() == before, "refusing the graph left GL objects behind"
    # glcnn.load optimises, so a saved model runs.
    glcnn.save(graph, tmp_path / "norm.npz")
    x = storable(random_inputs([(2, 128, 96)], seed=8)[0], "fp32")
    with glcnn.load(tmp_path / "norm.npz", ctx) as model:
        y = model.run(x)
    assert_close(y, reference.run(graph, {"x": x})["norm"], "fp32", "glcnn.load of 2x128x96")


# --- the reference (GL-free) ----------------------------------------------------------------------
def test_reference_matches_torch_and_onnxruntime():
    x = random_inputs([(5, 7, 6)], seed=9)[0] * 3 + 2
    w = _weights(5)
    got = reference.instance_norm(x, w["scale"], w["B"], 1e-3)
    t = torch.from_numpy(x.astype(np.float64))[None]
    want = F.instance_norm(t, weight=torch.from_numpy(w["scale"].astype(np.float64)),
                           bias=torch.from_numpy(w["B"].astype(np.float64)), eps=1e-3)
    np.testing.assert_allclose(got, want[0].numpy(), rtol=1e-10, atol=1e-12)
    ort = run_node("InstanceNormalization", [x], {"epsilon": 1e-3}, [w["scale"], w["B"]])
    np.testing.assert_allclose(got, ort, rtol=1e-4, atol=1e-5)


def test_expanded_reference_equals_original():
    graph = _graph((4, 40, 30), epsilon=1e-3, then="Relu")
    x = _large_mean((4, 40, 30))
    expanded = passes.optimize(copy.deepcopy(graph))
    np.testing.assert_allclose(reference.run(expanded, {"x": x})["act"],
                               reference.run(graph, {"x": x})["act"], rtol=1e-9, atol=1e-9)


# --- errors -----------------------------------------------------------------------------------
def test_errors_name_layer_and_value():
    node = Node("InstanceNormalization", "n", ["x"], {"epsilon": 0.0}, _weights(3))
    with pytest.raises(glcnn.UnsupportedOpError, match=r"layer 'n'.*epsilon=0.0 must be positive"):
        make_op(node, [(3, 4, 4)])
    node = Node("InstanceNormalization", "n", ["x"], {}, _weights(4))
    with pytest.raises(glcnn.WeightError, match=r"layer 'n'.*'scale' has shape \(4,\), expected"):
        make_op(node, [(3, 4, 4)])
    node = Node("InstanceNormalization", "n", ["x"], {}, {"scale": np.ones(3, np.float32)})
    with pytest.raises(glcnn.WeightError, match=r"layer 'n'.*missing weight 'B'"):
        make_op(node, [(3, 4, 4)])
    node = Node("InstanceNormApply", "a", ["x", "m", "v"], {}, _weights(3))
    with pytest.raises(glcnn.ShapeError, match=r"layer 'a'.*var input has shape \(3, 2, 1\)"):
        make_op(node, [(3, 4, 4), (3, 1, 1), (3, 2, 1)])
