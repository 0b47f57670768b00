"""fuse_resize.fuse_upsampled_adds: Add(x, nearest upscale of u by whole factors) is one pass
that reads u at (y div ky, x div kx); the Resize pass goes. fuse_upsampled_convs: likewise for
the Convs that alone read such an upscale.

The GPU checks run the fused graph against the reference of the original graph (the Resize a
node of its own); tests/train/test_grad_layers.py checks a fused graph's gradients against
PyTorch autograd, which runs the Resize as F.interpolate.
"""

import numpy as np
import pytest
from helpers import PRECISIONS, _feeds, conv_node, optimised_matches_original, signature

import glcnn
from glcnn.graph import Graph, Node, passes, reference
from glcnn.graph.fuse_resize import fuse_upsampled_adds, fuse_upsampled_convs
from glcnn.ops import build_ops

NEAREST = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
           "nearest_mode": "floor"}


def upsampled_add(resize_attrs, op="Resize", u_shape=(6, 4, 5), x_shape=(6, 8, 10),
                  first=False, relu=False, outputs=("y",)) -> Graph:
    """x (a conv of input x0) + op(u) (of a conv of input u0), the upscaled operand first or
    second; a Relu after the Add if asked."""
    nodes = [conv_node("x", "x0", x_shape[0], x_shape[0]),
             conv_node("u", "u0", u_shape[0], u_shape[0], seed=1),
             Node(op, "up", ["u"], dict(resize_attrs)),
             Node("Add", "sum" if relu else "y", ["up", "x"] if first else ["x", "up"])]
    if relu:
        nodes.append(Node("Relu", "y", ["sum"]))
    return Graph({"x0": x_shape, "u0": u_shape}, nodes, list(outputs))


CASES = {
    "scales 2": (NEAREST | {"scales": [2.0, 2.0]}, "Resize", (6, 4, 5), (6, 8, 10)),
    "sizes 3x2": (NEAREST | {"sizes": [12, 10]}, "Resize", (5, 4, 5), (5, 12, 10)),
    "upsample 2x3": ({"scales": [2.0, 3.0]}, "Upsample", (3, 3, 4), (3, 6, 12)),
    "half pixel": ({"mode": "nearest", "scales": [2.0, 2.0]}, "Resize", (6, 4, 5), (6, 8, 10)),
}


@pytest.mark.gl
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("first", [False, True], ids=["second", "first"])
@pytest.mark.parametrize("case", CASES)
def test_upsampled_add_is_one_pass(ctx, case, first, precision):
    attrs, op, u_shape, x_shape = CASES[case]
    graph = upsampled_add(attrs, op, u_shape, x_shape, first=first, relu=first)
    out = optimised_matches_original(ctx, graph, precision)
    assert signature(out) == ["Conv", "Conv", "Resize+Add+Relu" if first else "Resize+Add"]
    add = out.nodes[-1]
    assert add.inputs == ["x", "u"] and add.attrs["upsample"] == {"op": op, **attrs}
    feeds = _feeds(graph, "fp32")  # the float64 reference evaluates the fused Add too
    np.testing.assert_allclose(reference.run(out, feeds)["y"], reference.run(graph, feeds)["y"],
                               rtol=1e-12, atol=1e-12)


@pytest.mark.gl
@pytest.mark.parametrize("case", ["linear", "scale 1.5", "downscale", "read elsewhere",
                                  "an output"])
def test_other_resizes_stay(ctx, case):
    attrs = {"linear": {"mode": "linear", "scales": [2.0, 2.0]},
             "scale 1.5": NEAREST | {"scales": [1.5, 1.5]},
             "downscale": NEAREST | {"scales": [0.5, 0.5]}}.get(case, NEAREST | {"scales": [2, 2]})
    shapes = {"scale 1.5": ((6, 4, 6), (6, 6, 9)), "downscale": ((6, 8, 10), (6, 4, 5))}
    u_shape, x_shape = shapes.get(case, ((6, 4, 5), (6, 8, 10)))
    graph = upsampled_add(attrs, u_shape=u_shape, x_shape=x_shape,
                          outputs=("y", "up") if case == "an output" else ("y",))
    if case == "read elsewhere":
        graph.nodes.append(Node("Relu", "r", ["up"]))
        graph.outputs.append("r")
    out = optimised_matches_original(ctx, graph)
    assert "Resize" in signature(out) and not out.nodes[-1].attrs.get("upsample")


def test_a_broadcasting_or_fused_add_keeps_its_resize():
    graph = upsampled_add(NEAREST | {"scales": [2.0, 2.0]}, x_shape=(1, 8, 10))
    graph.nodes[0] = conv_node("x", "x0", 1, 1)
    fuse_upsampled_adds(graph)
    assert [n.op for n in graph.nodes] == ["Conv", "Conv", "Resize", "Add"]  # (1, 8, 10) + up
    graph = upsampled_add(NEAREST | {"scales": [2.0, 2.0]})
    graph.nodes[-1].attrs = {"activation": {"op": "Relu"}}
    fuse_upsampled_adds(graph)
    assert [n.op for n in graph.nodes] == ["Conv", "Conv", "Resize", "Add"]


@pytest.mark.parametrize("attrs, shape, error, message", [
    ({"upsample": {"op": "Resize"}}, (6, 3, 5), glcnn.ShapeError, "by whole factors"),
    ({"upsample": {"op": "Resize"}}, (5, 4, 5), glcnn.ShapeError, "by whole factors"),
    ({"upsample": "yes"}, (6, 4, 5), glcnn.UnsupportedOpError, "a dict"),
])
def test_bad_upsample_attributes_name_the_layer(attrs, shape, error, message):
    graph = Graph({"x": (6, 8, 10), "u": shape}, [Node("Add", "y", ["x", "u"], attrs)], ["y"])
    with pytest.raises(error, match=f"'y'.*{message}"):
        build_ops(graph)
    graph = Graph({"x": (6, 8, 10), "u": (6, 4, 5)},
                  [Node("Mul", "y", ["x", "u"], {"upsample": {"op": "Resize"}})], ["y"])
    with pytest.raises(glcnn.UnsupportedOpError, match="an Add's"):
        build_ops(graph)


def test_optimize_fuses_it():
    graph = upsampled_add(NEAREST | {"scales": [2.0, 2.0]})
    assert [n.op for n in passes.optimize(graph).nodes] == ["Conv", "Conv", "Add"]
    np.testing.assert_equal(graph.nodes[-1].attrs["upsample"]["scales"], [2.0, 2.0])


def upsampled_conv(resize_attrs, op="Resize", u_shape=(8, 4, 5), k=3, group=1, co=8,
                   stride=1) -> Graph:
    """conv(op(u)), u a conv of input u0: the upscaled tensor read by a conv only."""
    return Graph({"u0": u_shape}, [
        conv_node("u", "u0", u_shape[0], u_shape[0]),
        Node(op, "up", ["u"], dict(resize_attrs)),
        conv_node("y", "up", u_shape[0], co, k=k, group=group, seed=2, strides=[stride] * 2)],
        ["y"])


CONV_CASES = {  # (resize attrs, op, u shape, k, group, output channels, stride)
    "3x3 scales 4": (NEAREST | {"scales": [4.0, 4.0]}, "Resize", (8, 4, 5), 3, 1, 8, 1),
    "1x1 upsample 2x3": ({"scales": [2.0, 3.0]}, "Upsample", (12, 3, 4), 1, 1, 3, 1),
    "half pixel sizes": ({"mode": "nearest", "sizes": [8, 15]}, "Resize", (8, 4, 5), 3, 1, 4, 1),
    "depthwise": (NEAREST | {"scales": [2.0, 2.0]}, "Resize", (8, 4, 5), 3, 8, 8, 1),
    "stride 2, 5x5": (NEAREST | {"scales": [2.0, 2.0]}, "Resize", (8, 5, 6), 5, 1, 8, 2),
    "wide, 1x8 blocks": (NEAREST | {"scales": [2.0, 4.0]}, "Resize", (8, 3, 10), 3, 1, 8, 1),
}


@pytest.mark.gl
@pytest.mark.parametrize("precision", [*PRECISIONS, "u8"])
@pytest.mark.parametrize("strategy", ["blocked", "direct"])
@pytest.mark.parametrize("case", CONV_CASES)
def test_upsampled_conv_is_one_pass(ctx, case, strategy, precision):
    """The conv reads u at (y div ky, x div kx) (conv_inputs.glsl SOURCE_X): blocked (from its
    input buffer, or u's render targets in place) and direct, against the float64 reference
    of the graph with its Resize pass."""
    attrs, op, u_shape, k, group, co, stride = CONV_CASES[case]
    graph = upsampled_conv(attrs, op, u_shape, k, group, co, stride)
    if precision == "u8":
        feeds = [_feeds(graph, "fp32") for _ in range(2)]
        glcnn.calibrate(graph, feeds, ctx)
    out = optimised_matches_original(ctx, graph, precision, strategy=strategy)
    assert signature(out) == ["Conv", "Resize+Conv"]
    conv = out.nodes[-1]
    assert conv.inputs == ["u"] and conv.attrs["input_upsample"] == {"op": op, **attrs}
    feeds = _feeds(graph, "fp32")  # the float64 reference evaluates the fused Conv too
    np.testing.assert_allclose(reference.run(out, feeds)["y"], reference.run(graph, feeds)["y"],
                               rtol=1e-12, atol=1e-12)


@pytest.mark.gl
@pytest.mark.parametrize("case", ["linear", "scale 1.5", "read elsewhere", "an output",
                                  "gated conv", "generic conv", "transposed"])
def test_resizes_before_other_readers_stay(ctx, case):
    attrs = {"linear": {"mode": "linear", "scales": [2.0, 2.0]},
             "scale 1.5": NEAREST | {"scales": [1.5, 1.5]}}.get(case, NEAREST | {"scales": [2, 2]})
    u_shape = (8, 4, 6) if case == "scale 1.5" else (8, 4, 5)
    graph = upsampled_conv(attrs, u_shape=u_shape, group=2 if case == "generic conv" else 1,
                           co=6 if case == "generic conv" else 8)
    if case == "read elsewhere":
        graph.nodes.append(Node("Relu", "r", ["up"]))
        graph.outputs.append("r")
    elif case == "an output":
        graph.outputs.append("up")
    elif case == "gated conv":
        graph.nodes[-1].attrs["input_gate"] = True
        graph.nodes[-1].inputs.append("g")
        graph.inputs["g"] = (8, 1, 1)
    elif case == "transposed":
        graph.nodes[-1] = conv_node("y", "up", 8, 8, transposed=True)
    out = optimised_matches_original(ctx, graph)
    assert "Resize" in signature(out) and not out.nodes[-1].attrs.get("input_upsample")


@pytest.mark.parametrize("attrs, message", [
    ({"input_upsample": {"op": "Resize", "mode": "linear", "scales": [2.0, 2.0]}},
     "not a nearest upscale by whole factors"),
    ({"input_upsample": {"op": "Resize", "mode": "nearest", "scales": [1.5, 1.5]}},
     "not a nearest upscale by whole factors"),
    ({"input_upsample": [2, 2]}, "a dict"),
    ({"input_upsample": {"op": "Resize", "mode": "nearest", "scales": [2.0, 2.0]},
      "input_mean": True}, "without input_mean"),
])
def test_bad_input_upsample_attributes_name_the_layer(attrs, message):
    node = conv_node("y", "u", 8, 8, k=1, pads=[0] * 4)
    node.attrs |= attrs
    with pytest.raises(glcnn.UnsupportedOpError, match=f"'y'.*{message}"):
        build_ops(Graph({"u": (8, 4, 6)}, [node], ["y"]))


def test_optimize_fuses_the_conv_and_counts_its_flops_upscaled():
    graph = upsampled_conv(NEAREST | {"scales": [4.0, 4.0]})
    flops = {op.node.name: op.flops() for op in build_ops(graph)[0]}
    fused = passes.optimize(graph)
    assert [n.op for n in fused.nodes] == ["Conv", "Conv"]
    ops = build_ops(fused)[0]
    assert ops[-1].output_shape() == (8, 16, 20) and ops[-1].flops() == flops["y"]
    shared = upsampled_conv(NEAREST | {"scales": [2.0, 2.0]})  # two convs read one upscale
    shared.nodes.append(conv_node("z", "up", 8, 4, k=1))
    shared.outputs.append("z")
    fuse_upsampled_convs(shared)
    assert [n.op for n in shared.nodes] == ["Conv", "Conv", "Conv"]
    assert shared.node("z").inputs == ["u"] and shared.node("z").attrs["input_upsample"]
