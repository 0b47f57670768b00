"""`glcnn.graph.fuse_norm.fuse_layernorm` on hand-built glcnn graphs: the decomposed LayerNorm
chain over W (a CL sequence) or C (channels last), with and without the affine tail, with
Pow or Mul squaring, becomes one LayerNormalization with the same results (reference and GPU);
a chain with an extra reader or a graph output inside is left alone."""

import copy

import numpy as np
import pytest
from helpers import optimised_matches_original, signature

from glcnn.graph import Graph, Node, reference
from glcnn.graph.fuse_norm import fuse_layernorm

RNG = np.random.default_rng(0)


def chain(shape, axis, affine=("Mul", "Add"), square="Pow", eps=1e-5):
    """The chain as the ONNX importer emits it for x of glcnn `shape`, normalised on `axis`."""
    n = shape[axis - 1]
    along = [1, 1, 1]
    along[axis - 1] = n
    const = (lambda v: v.reshape(-1)) if axis == 1 else (lambda v: v.reshape(along))
    nodes = [
        Node("ReduceMean", "m", ["x"], {"axes": [axis]}),
        Node("Sub", "d", ["x", "m"]),
        Node("Pow", "s", ["d"], {"exponent": 2.0}) if square == "Pow" else
        Node("Mul", "s", ["d", "d"]),
        Node("ReduceMean", "v", ["s"], {"axes": [axis - 4]}),
        Node("Add", "e", ["v"], {}, {"B": np.array([eps], np.float32)}),
        Node("Sqrt", "r", ["e"]),
        Node("Div", "y", ["d", "r"]),
    ]
    last = "y"
    if "Mul" in affine:
        scale = RNG.uniform(0.5, 1.5, n).astype(np.float32)
        nodes.append(Node("Mul", "scaled", [last], {}, {"B": const(scale)}))
        last = "scaled"
    if "Add" in affine:
        bias = RNG.standard_normal(n).astype(np.float32)
        nodes.append(Node("Add", "shifted", [last], {}, {"B": const(bias)}))
        last = "shifted"
    nodes.append(Node("Relu", "out", [last]))  # something after the chain
    return Graph({"x": shape}, nodes, ["out"])


CASES = [  # (shape, axis, affine, square)
    ((40, 1, 120), 3, ("Mul", "Add"), "Pow"),   # SVTR, CL
    ((120, 1, 40), 1, ("Mul", "Add"), "Pow"),   # SVTR, channels last
    ((5, 1, 17), 3, (), "Pow"),
    ((13, 1, 9), 1, ("Mul",), "Mul"),
    ((5, 7, 3), 2, ("Add",), "Mul"),
]
IDS = ["c{}-{}x{}-axis{}-{}-{}".format(*s, a, "+".join(f) or "plain", q) for s, a, f, q in CASES]


@pytest.mark.parametrize(("shape", "axis", "affine", "square"), CASES, ids=IDS)
def test_chain_fuses(shape, axis, affine, square):
    graph = chain(shape, axis, affine, square)
    fused = fuse_layernorm(copy.deepcopy(graph))
    assert signature(fused) == ["LayerNormalization", "Relu"]
    norm = fused.nodes[0]
    last = {(): "y", ("Mul",): "scaled", ("Add",): "shifted"}.get(affine, "shifted")
    assert norm.name == last and norm.inputs == ["x"] and norm.attrs["axis"] == axis
    assert set(norm.weights) == ({"scale", "bias"} if "Add" in affine else {"scale"})
    x = RNG.standard_normal(shape) * 2 + 3
    np.testing.assert_allclose(reference.run(fused, {"x": x})["out"],
                               reference.run(graph, {"x": x})["out"], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize(("shape", "axis"), [((40, 1, 120), 3), ((120, 1, 40), 1)],
                         ids=["cl", "lc"])
def test_optimised_chain_runs_as_one_pass(ctx, shape, axis, precision):
    optimised = optimised_matches_original(ctx, chain(shape, axis), precision)
    assert signature(optimised) == ["LayerNormalization+Relu"]


def _unfused(graph):
    return signature(fuse_layernorm(copy.deepcopy(graph))) == signature(graph)


def test_extra_reader_of_an_intermediate_is_left_alone():
    for tensor in ("m", "d", "s", "v", "e", "r"):
        graph = chain((5, 1, 17), 3)
        graph.nodes.append(Node("Relu", "extra", [tensor]))
        graph.outputs.append("extra")
        assert _unfused(graph), tensor


def test_intermediate_graph_output_is_left_alone():
    graph = chain((5, 1, 17), 3)
    graph.outputs.append("v")
    assert _unfused(graph)


def test_extra_reader_of_the_normalised_tensor_keeps_the_tail_out():
    graph = chain((5, 1, 17), 3)  # y is also read elsewhere: fuse up to the Div only
    graph.nodes.append(Node("Sigmoid", "extra", ["y"]))
    graph.outputs.append("extra")
    fused = fuse_layernorm(copy.deepcopy(graph))
    assert signature(fused) == ["LayerNormalization", "Mul", "Add", "Relu", "Sigmoid"]
    assert fused.nodes[0].name == "y" and set(fused.nodes[0].weights) == {"scale"}


def test_other_patterns_are_left_alone():
    wrong_axis = chain((5, 3, 17), 3)
    wrong_axis.nodes[3].attrs = {"axes": [2]}  # variance over another axis
    cube = chain((5, 1, 17), 3)
    cube.nodes[2].attrs = {"exponent": 3.0}
    per_row = chain((5, 1, 17), 3)
    per_row.nodes[7].weights = {"B": np.ones((5, 1, 17), np.float32)}  # varies along C too
    for graph in (wrong_axis, cube):
        assert _unfused(graph)
    assert signature(fuse_layernorm(copy.deepcopy(per_row)))[:2] == ["LayerNormalization", "Mul"]
