"""Graph passes: the optimised graph has fewer nodes and the unoptimised graph's results.

Every GPU check runs the *optimised* graph on the GPU and compares it with the reference of
the *original* graph, so a pass that changes the maths cannot hide behind the reference.
"""

import copy

import numpy as np
import pytest
from helpers import (
    PRECISIONS,
    _feeds,
    assert_close,
    conv_node,
    optimised_matches_original,
    signature,
    storable,
)

import glcnn
from glcnn.graph import Graph, Node, passes, reference
from glcnn.ops import build_ops


def _bn(name, x, c, seed=1):
    rng = np.random.default_rng(seed)
    weights = {"scale": rng.uniform(0.5, 2, c), "B": rng.standard_normal(c),
               "mean": rng.standard_normal(c), "var": rng.uniform(0.1, 2, c)}
    return Node("BatchNormalization", name, [x], {"epsilon": 1e-3},
                {k: v.astype(np.float32) for k, v in weights.items()})


def _act(name, x, op="Relu", **attrs):
    return Node(op, name, [x], attrs)


# --- fold_batchnorm ---------------------------------------------------------------------------
FOLDS = [  # (id, ci, co, group, transposed, bias)
    ("conv", 5, 7, 1, False, True),
    ("conv-nobias", 5, 7, 1, False, False),
    ("conv-g3", 6, 9, 3, False, True),
    ("conv-depthwise", 6, 6, 6, False, True),
    ("convT", 5, 7, 1, True, True),
    ("convT-g2", 4, 6, 2, True, False),
    ("convT-g3", 6, 9, 3, True, True),
    ("convT-depthwise", 5, 5, 5, True, True),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("ci", "co", "group", "transposed", "bias"), [f[1:] for f in FOLDS],
                         ids=[f[0] for f in FOLDS])
def test_fold_batchnorm(ctx, ci, co, group, transposed, bias, precision):
    strides = {"strides": [2, 2]} if transposed else {}
    graph = Graph({"x": (ci, 6, 5)}, [
        conv_node("conv", "x", ci, co, group=group, transposed=transposed, bias=bias, **strides),
        _bn("bn", "conv", co)], ["bn"])
    folded = optimised_matches_original(ctx, graph, precision, passes.fold_batchnorm)
    assert signature(folded) == ["ConvTranspose" if transposed else "Conv"]
    assert folded.nodes[0].name == "bn" and "B" in folded.nodes[0].weights


def test_fold_batchnorm_is_exact_in_the_reference():
    """GL-free: the folded weights give the unfolded result to float32 rounding."""
    graph = Graph({"x": (6, 5, 5)}, [conv_node("c", "x", 6, 9, group=3, transposed=True),
                                     _bn("bn", "c", 9)], ["bn"])
    feeds = _feeds(graph, "fp32")
    folded = passes.fold_batchnorm(copy.deepcopy(graph))
    np.testing.assert_allclose(reference.run(folded, feeds)["bn"],
                               reference.run(graph, feeds)["bn"], rtol=1e-5, atol=1e-5)


# --- fuse_residual_add ------------------------------------------------------------------------
def _residual_graph(order):
    convs = [conv_node("conv", "x", 4, 4)]
    add = Node("Add", "add", ["conv", "x"] if order == "conv-first" else ["x", "conv"])
    return Graph({"x": (4, 5, 6)}, convs + [add], ["add"])


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("order", ["conv-first", "skip-first"])
def test_fuse_residual_add(ctx, order, precision):
    graph = _residual_graph(order)
    fused = optimised_matches_original(ctx, graph, precision, passes.fuse_residual_add)
    assert signature(fused) == ["Conv+Add"]
    assert fused.nodes[0].inputs == ["x", "x"] and fused.nodes[0].name == "add"


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("expand", [False, True], ids=["one-pass", "expanded"])
def test_fuse_residual_add_into_instancenorm(ctx, precision, expand):
    """A fast-style residual block ends conv -> InstanceNorm -> Add(x): the Add runs in the
    normalising pass's epilogue, one pass and one program fewer."""
    rng = np.random.default_rng(4)
    norm = Node("InstanceNormalization", "norm", ["conv"], {},
                {"scale": rng.uniform(0.5, 2, 4).astype(np.float32),
                 "B": rng.standard_normal(4).astype(np.float32)})
    graph = Graph({"x": (4, 5, 6)}, [conv_node("conv", "x", 4, 4), norm,
                                     Node("Add", "add", ["norm", "x"])], ["add"])
    optimise = passes.fuse_residual_add
    if expand:
        optimise = lambda g: passes.fuse_residual_add(passes.expand_reductions(g))  # noqa: E731
    fused = optimised_matches_original(ctx, graph, precision, optimise)
    assert signature(fused)[-1].endswith("+Add") and "Add" not in signature(fused)
    assert fused.nodes[-1].inputs[-1] == "x" and fused.nodes[-1].name == "add"


def test_fuse_residual_add_of_two_convs_fuses_the_later_one(ctx):
    graph = Graph({"x": (3, 5, 5)}, [
        conv_node("a", "x", 3, 5, seed=1), conv_node("b", "x", 3, 5, seed=2),
        Node("Add", "sum", ["a", "b"])], ["sum"])
    fused = optimised_matches_original(ctx, graph)
    assert signature(fused) == ["Conv", "Conv+Add"]
    assert fused.nodes[1].inputs == ["x", "a"]


# An Add after the conv's activation (YOLOv8's and CSP bottlenecks: x + SiLU(conv(x))) runs in
# the conv's epilogue after the activation: (graph id, nodes after conv "c" of x, signature).
# (c, h, w) of x; 16 channels at 32² make the conv a blocked (several pixels a fragment) pass.
def _after_graph(c, h, w, tail, act="Relu"):
    nodes = [conv_node("c", "x", c, c, seed=3)]
    if act == "Silu":  # x * sigmoid(x), as exporters write it: fuse_swish makes it Silu
        nodes += [Node("Sigmoid", "sig", ["c"]), Node("Mul", "act", ["c", "sig"])]
    else:
        nodes.append(_act("act", "c", act, **({"alpha": 0.2} if act == "LeakyRelu" else {})))
    nodes.append(Node("Add", "add", ["x", "act"] if tail == "skip-first" else ["act", "x"]))
    if tail == "affine":  # a per-channel Mul after the Add: the affine comes after the residual
        scale = np.linspace(0.5, 2.0, c, dtype=np.float32).reshape(c, 1, 1)
        nodes.append(Node("Mul", "scaled", ["add"], {}, {"B": scale}))
    return Graph({"x": (c, h, w)}, nodes, [nodes[-1].name])


AFTER = [  # (id, c, h, w, tail, act, signature)
    ("relu", 4, 5, 6, "act-first", "Relu", ["Conv+Relu+Add"]),
    ("relu-skip-first", 4, 5, 6, "skip-first", "Relu", ["Conv+Relu+Add"]),
    ("silu", 6, 7, 5, "act-first", "Silu", ["Conv+Silu+Add"]),
    ("leaky-affine", 5, 6, 7, "affine", "LeakyRelu", ["Conv+LeakyRelu+Add+Affine"]),
    ("silu-blocked", 16, 32, 32, "act-first", "Silu", ["Conv+Silu+Add"]),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("c", "h", "w", "tail", "act", "expected"), [a[1:] for a in AFTER],
                         ids=[a[0] for a in AFTER])
def test_fuse_residual_add_after_the_activation(ctx, c, h, w, tail, act, expected, precision):
    """GPU output of the fused graph against the reference of the unfused one, which adds x
    after the activation: a residual added before it would differ wherever the activation
    is not the identity (negative sums)."""
    fused = optimised_matches_original(ctx, _after_graph(c, h, w, tail, act), precision)
    assert signature(fused) == expected
    assert fused.nodes[0].inputs == ["x", "x"] and fused.nodes[0].residual_after_activation


@pytest.mark.parametrize(("c", "h", "w", "tail", "act"), [(5, 6, 7, "affine", "LeakyRelu"),
                                                         (16, 32, 32, "act-first", "Silu")],
                         ids=["leaky-affine", "silu-blocked"])
def test_residual_after_the_activation_in_u8(ctx, c, h, w, tail, act):
    """u8 storage (range-scaled RGBA8, calibrated on the fused graph): the residual is read
    through its ranges and added after the activation, before the affine."""
    original = _after_graph(c, h, w, tail, act)
    graph = passes.optimize(copy.deepcopy(original))
    assert graph.nodes[0].residual_after_activation
    rng = np.random.default_rng(7)
    feeds = [{"x": rng.standard_normal((c, h, w)).astype(np.float32)} for _ in range(3)]
    glcnn.calibrate(graph, feeds, ctx)
    x = storable(feeds[0]["x"], "u8")
    with glcnn.Pipeline(graph, ctx, precision="u8") as pipe:
        y = pipe.run({"x": x})
    name = original.outputs[0]
    assert_close(y, reference.run(original, {"x": x})[name], "u8", f"{act} {tail} {c}x{h}x{w}")


def test_the_residual_before_and_after_the_activation_differ():
    """GL-free: the reference of a residual added after the activation is not the one added
    before it, so the test above can tell the two apart."""
    graph = passes.optimize(_after_graph(4, 5, 6, "act-first"))
    feeds = _feeds(graph, "fp32")
    before = copy.deepcopy(graph)
    before.nodes[0].attrs["residual"] = True
    after, other = reference.run(graph, feeds)["add"], reference.run(before, feeds)["add"]
    assert np.abs(after - other).max() > 0.1


def test_a_residual_attribute_of_another_value_is_refused():
    graph = Graph({"x": (4, 5, 6)}, [conv_node("c", "x", 4, 4)], ["c"])
    graph.nodes[0].inputs.append("x")
    graph.nodes[0].attrs["residual"] = "sideways"
    with pytest.raises(glcnn.GlcnnError, match=r"'c'.*residual 'sideways' unknown; expected "
                                               r"true .* or 'after'"):
        build_ops(graph)


# --- fuse_activations -------------------------------------------------------------------------
HOSTS = {
    "Conv": lambda: [conv_node("host", "x", 5, 5)],
    "ConvTranspose": lambda: [conv_node("host", "x", 5, 5, transposed=True, strides=[2, 1])],
    "BatchNormalization": lambda: [_bn("host", "x", 5)],
    "Add": lambda: [Node("Add", "host", ["x"], {}, {"B": np.arange(5, dtype=np.float32)})],
    "Mul": lambda: [Node("Mul", "host", ["x", "x"])],
    "Concat": lambda: [conv_node("a", "x", 5, 2), conv_node("b", "x", 5, 3, seed=1),
                       Node("Concat", "host", ["a", "b"], {"axis": 1})],
    "Pad": lambda: [Node("Pad", "host", ["x"], {"mode": "reflect",
                                                "pads": [0, 0, 1, 2, 0, 0, 2, 1]})],
    "Resize": lambda: [Node("Resize", "host", ["x"], {"scales": [2.0, 2.0]})],
    "MaxPool": lambda: [Node("MaxPool", "host", ["x"], {"kernel_shape": [2, 2],
                                                        "strides": [2, 2]})],
    "AveragePool": lambda: [Node("AveragePool", "host", ["x"], {"kernel_shape": [3, 3],
                                                                "pads": [1, 1, 1, 1]})],
    "DepthToSpace": lambda: [conv_node("c", "x", 5, 20),
                             Node("DepthToSpace", "host", ["c"], {"blocksize": 2})],
}
FUSED_ACTS = [
    ("LeakyRelu", {"alpha": 0.2}, {}),
    ("PRelu", {}, {"slope": np.linspace(-1, 1, 5, dtype=np.float32)}),
    ("Clip", {"min": -0.5, "max": 0.75}, {}),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.6}, {}),
    ("Elu", {"alpha": 0.5}, {}),
    ("Silu", {}, {}),
]


@pytest.mark.parametrize(("act", "attrs", "weights"), FUSED_ACTS, ids=[a[0] for a in FUSED_ACTS])
@pytest.mark.parametrize("host", HOSTS)
def test_fuse_activation(ctx, host, act, attrs, weights):
    graph = Graph({"x": (5, 4, 7)}, HOSTS[host]() + [Node(act, "act", ["host"], attrs,
                                                          dict(weights))], ["act"])
    fused = optimised_matches_original(ctx, graph, optimise=passes.fuse_activations)
    assert signature(fused)[-1] == f"{host}+{act}" and len(fused.nodes) == len(graph.nodes) - 1
    assert fused.nodes[-1].attrs["activation"] == {"op": act, **attrs}


# --- fuse_input_activations -------------------------------------------------------------------
# (id, conv reading the activation): DENSE with column sharing (CG > 4) and with the tap loop
# (CG = 4), a strided transposed conv, a 5x5 depthwise conv (blocked) and a 3x3 one (direct
# only: too little work per pixel to block).
INPUT_ACT_CONVS = [
    ("conv-c8", lambda: conv_node("b", "act", 8, 8, seed=3)),
    ("conv-c4-s2", lambda: conv_node("b", "act", 8, 8, seed=3, group=2, strides=[2, 2])),
    ("convT-s2", lambda: conv_node("b", "act", 8, 4, k=4, transposed=True, seed=3, strides=[2, 2],
                               pads=[1, 1, 1, 1])),
    ("depthwise-k5", lambda: conv_node("b", "act", 8, 8, k=5, group=8, seed=3)),
    ("depthwise-k3", lambda: conv_node("b", "act", 8, 8, group=8, seed=3)),
]
INPUT_ACTS = [("Relu", {}), ("LeakyRelu", {"alpha": 0.2})]


@pytest.mark.parametrize("strategy", ["direct", "blocked"])
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("act", "attrs"), INPUT_ACTS, ids=[a[0] for a in INPUT_ACTS])
@pytest.mark.parametrize("make", [c[1] for c in INPUT_ACT_CONVS],
                         ids=[c[0] for c in INPUT_ACT_CONVS])
def test_input_activation_runs_in_the_conv(ctx, make, act, attrs, precision, strategy):
    # A U-Net down step: "a" is needed as it is (here: an output), its activation only by "b".
    graph = Graph({"x": (8, 9, 10)}, [conv_node("a", "x", 8, 8, seed=1),
                                      _act("act", "a", act, **attrs), make()], ["a", "b"])
    fused = optimised_matches_original(ctx, graph, precision, strategy=strategy)
    assert signature(fused) == ["Conv", f"{act}+{graph.nodes[-1].op}"]
    assert fused.nodes[-1].inputs[0] == "a"


def test_input_activation_shared_by_two_convs(ctx):
    graph = Graph({"x": (8, 6, 6)}, [
        conv_node("a", "x", 8, 8, seed=1), _act("act", "a", "LeakyRelu", alpha=0.1),
        conv_node("b", "act", 8, 4, seed=2), conv_node("c", "act", 8, 8, k=1, seed=3),
        Node("Concat", "cat", ["a", "b", "c"], {"axis": 1})], ["cat"])
    fused = optimised_matches_original(ctx, graph)
    assert signature(fused) == ["Conv", "LeakyRelu+Conv", "LeakyRelu+Conv", "Concat"]


def _input_activation_also_read_by_add():
    return Graph({"x": (8, 6, 6)}, [
        conv_node("a", "x", 8, 8, seed=1), _act("act", "a"), conv_node("b", "act", 8, 8, seed=2),
        Node("Add", "sum", ["b", "act"]), Node("Concat", "cat", ["a", "sum"], {"axis": 1})],
        ["cat"])


def _input_activation_of_a_generic_conv():  # groups of 3 channels: lanes gather one by one
    return Graph({"x": (6, 6, 6)}, [
        conv_node("a", "x", 6, 6, seed=1), _act("act", "a"), conv_node("b", "act", 6, 6, group=2),
        Node("Concat", "cat", ["a", "b"], {"axis": 1})], ["cat"])


def _input_sigmoid():  # f(0) != 0: a padding tap would read sigmoid(0)
    return Graph({"x": (8, 6, 6)}, [
        conv_node("a", "x", 8, 8, seed=1), _act("act", "a", "Sigmoid"), conv_node("b", "act", 8, 8),
        Node("Concat", "cat", ["a", "b"], {"axis": 1})], ["cat"])


# --- optimize: whole blocks -------------------------------------------------------------------
@pytest.mark.parametrize("precision", PRECISIONS)
def test_resnet_block_tail_is_one_pass(ctx, precision):
    graph = Graph({"x": (6, 7, 5)}, [
        conv_node("conv", "x", 6, 6), _bn("bn", "conv", 6), Node("Add", "add", ["bn", "x"]),
        _act("relu", "add")], ["relu"])
    optimised = optimised_matches_original(ctx, graph, precision)
    assert signature(optimised) == ["Conv+Add+Relu"]
    assert optimised.nodes[0].name == "relu"


@pytest.mark.parametrize("precision", PRECISIONS)
def test_resnet_basic_block_is_two_passes(ctx, precision):
    graph = Graph({"x": (5, 6, 6)}, [
        conv_node("conv1", "x", 5, 5, seed=1), _bn("bn1", "conv1", 5, seed=2), _act("relu1", "bn1"),
        conv_node("conv2", "relu1", 5, 5, seed=3), _bn("bn2", "conv2", 5, seed=4),
        Node("Add", "add", ["x", "bn2"]), _act("relu2", "add")], ["relu2"])
    optimised = optimised_matches_original(ctx, graph, precision)
    assert signature(optimised) == ["Conv+Relu", "Conv+Add+Relu"]
    assert [n.name for n in optimised.nodes] == ["relu1", "relu2"]


def test_transposed_decoder_stage_is_one_pass(ctx):
    graph = Graph({"z": (8, 3, 3)}, [
        conv_node("up", "z", 8, 6, k=4, transposed=True, bias=False, strides=[2, 2],
              pads=[1, 1, 1, 1]),
        _bn("bn", "up", 6), _act("relu", "bn")], ["relu"])
    assert signature(optimised_matches_original(ctx, graph)) == ["ConvTranspose+Relu"]


# --- where fusion must not happen -------------------------------------------------------------
def _conv_used_twice():
    return Graph({"x": (4, 5, 5)}, [
        conv_node("conv", "x", 4, 4), _bn("bn", "conv", 4), _act("relu", "conv"),
        Node("Add", "add", ["bn", "relu"])], ["add"])


def _conv_is_output_bn():
    return Graph({"x": (4, 5, 5)}, [conv_node("conv", "x", 4, 4), _bn("bn", "conv", 4)],
                 ["conv", "bn"])


def _conv_is_output_act():
    return Graph({"x": (4, 5, 5)}, [conv_node("conv", "x", 4, 4), _act("relu", "conv")],
                 ["relu", "conv"])


def _conv_is_output_add():
    return Graph({"x": (4, 5, 5)},
                 [conv_node("conv", "x", 4, 4), Node("Add", "add", ["conv", "x"])],
                 ["conv", "add"])


def _conv_added_to_itself():
    return Graph({"x": (4, 5, 5)},
                 [conv_node("conv", "x", 4, 4), Node("Add", "add", ["conv", "conv"])],
                 ["add"])


def _broadcast_skip():
    return Graph({"x": (4, 5, 5), "se": (4, 1, 1)}, [
        conv_node("conv", "x", 4, 4), Node("Add", "add", ["conv", "se"]), _act("relu", "add")],
        ["relu"])


def _skip_computed_after_conv():
    return Graph({"x": (4, 5, 5)}, [
        conv_node("conv", "x", 4, 4), _act("skip", "x", "Tanh"),
        Node("Add", "add", ["conv", "skip"])],
        ["add"])


def _activation_after_slice():
    crop = Node("Slice", "crop", ["x"], {"starts": [1, 1], "ends": [4, 5]})
    return Graph({"x": (4, 5, 5)}, [crop, _act("relu", "crop")], ["relu"])


UNFUSED = [
    (_conv_used_twice, ["Conv", "BatchNormalization", "Relu", "Add"]),
    (_conv_is_output_bn, ["Conv", "BatchNormalization"]),
    (_conv_is_output_act, ["Conv", "Relu"]),
    (_conv_is_output_add, ["Conv", "Add"]),
    (_conv_added_to_itself, ["Conv", "Add"]),
    (_broadcast_skip, ["Conv", "Add+Relu"]),
    (_skip_computed_after_conv, ["Conv", "Tanh", "Add"]),
    (_activation_after_slice, ["Slice", "Relu"]),
    (_input_activation_also_read_by_add, ["Conv", "Relu", "Conv+Add", "Concat"]),
    (_input_activation_of_a_generic_conv, ["Conv", "Relu", "Conv", "Concat"]),
    (_input_sigmoid, ["Conv", "Sigmoid", "Conv", "Concat"]),
]


@pytest.mark.parametrize(("make", "expected"), UNFUSED, ids=[u[0].__name__[1:] for u in UNFUSED])
def test_no_fusion_where_it_would_change_results(ctx, make, expected):
    optimised = optimised_matches_original(ctx, make())
    assert signature(optimised) == expected


@pytest.mark.parametrize("attrs,label", [
    ({}, "Conv"),
    ({"residual": True, "activation": {"op": "Relu"}}, "Conv+Add+Relu"),
    ({"residual": "after", "activation": {"op": "Silu"}}, "Conv+Silu+Add"),
    ({"input_activation": {"op": "LeakyRelu"}, "input_gate": True}, "LeakyRelu+Mul+Conv"),
    ({"input_mean": True, "activation": {"op": "HardSigmoid"}}, "Mean+Conv+HardSigmoid"),
    ({"output_grad": {"op": "Sigmoid"}}, "Conv+dSigmoid"),
    ({"activation": {"op": "Relu"}, "affine": True}, "Conv+Relu+Affine"),
])
def test_a_nodes_label_names_what_was_fused_in_order(attrs, label):
    from glcnn.graph import Node
    assert Node("Conv", "c", ["x"], attrs).label == label


# --- fold_flatten_order -----------------------------------------------------------------------
def _flatten_dense(perm, op="MatMul", reads_twice=False):
    """x (5, 3, 4) → Transpose(perm) → Flatten → dense of 60 → 7 features (→ Relu)."""
    rng = np.random.default_rng(6)
    b = rng.standard_normal((7, 60) if op == "Gemm" else (60, 7)).astype(np.float32)
    dense = Node(op, "fc", ["flat"], {"transB": 1} if op == "Gemm" else {},
                 {"B": b} | ({"C": rng.standard_normal(7).astype(np.float32)} if op == "Gemm"
                            else {}))
    nodes = [Node("Transpose", "t", ["x"], {"perm": perm}), Node("Flatten", "flat", ["t"]),
             dense, _act("y", "fc")]
    return Graph({"x": (5, 3, 4)}, nodes, ["y", "t"] if reads_twice else ["y"])


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("perm, op", [([0, 2, 3, 1], "MatMul"), ([0, 3, 1, 2], "Gemm"),
                                      ([0, 1, 3, 2], "MatMul")])
def test_transpose_before_a_flatten_folds_into_the_dense_weights(ctx, perm, op, precision):
    out = optimised_matches_original(ctx, _flatten_dense(perm, op), precision)
    assert signature(out) == ["Conv+Relu"]  # then Flatten → dense is a conv (below)


def test_transpose_read_elsewhere_stays(ctx):
    out = optimised_matches_original(ctx, _flatten_dense([0, 2, 3, 1], reads_twice=True))
    assert signature(out) == ["Transpose", "Conv+Relu"]


# --- flatten_dense_to_conv ----------------------------------------------------------------------
def _flatten_then(op, shape=(6, 3, 4), n=9, attrs=None, flat_op="Flatten", outputs=("y",)):
    """x `shape` → Flatten → dense of C·H·W → n features → PRelu (MTCNN's head)."""
    rng = np.random.default_rng(8)
    k = int(np.prod(shape))
    attrs = attrs or {}
    b = rng.standard_normal((n, k) if attrs.get("transB") else (k, n)).astype(np.float32)
    weights = {"B": b} | ({"C": rng.standard_normal(n).astype(np.float32)} if op == "Gemm" else {})
    flat_attrs = {"shape": [1, k]} if flat_op == "Reshape" else {}
    slope = {"slope": rng.uniform(0.1, 0.3, n).astype(np.float32)}
    nodes = [Node(flat_op, "flat", ["x"], flat_attrs), Node(op, "fc", ["flat"], attrs, weights),
             Node("PRelu", "y", ["fc"], {}, slope)]
    return Graph({"x": shape}, nodes, list(outputs))


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("op, attrs, flat_op", [
    ("Gemm", {"transB": 1, "alpha": 0.5, "beta": 2.0}, "Flatten"),
    ("Gemm", {}, "Reshape"),
    ("MatMul", {}, "Flatten"),
])
def test_flatten_then_dense_becomes_one_conv(ctx, op, attrs, flat_op, precision):
    out = optimised_matches_original(ctx, _flatten_then(op, attrs=attrs, flat_op=flat_op),
                                     precision)
    assert signature(out) == ["Conv+PRelu"]
    assert out.nodes[0].attrs["kernel_shape"] == [3, 4] and out.nodes[0].inputs == ["x"]


def test_flatten_dense_stays_where_a_conv_would_not_do(ctx, monkeypatch):
    """The Flatten read elsewhere (here a graph output), a dense layer over (K, 1, 1) (no
    Flatten pass to save), and one with more weights than FLATTEN_CONV_MAX_WEIGHTS."""
    out = optimised_matches_original(ctx, _flatten_then("Gemm", outputs=("y", "flat")))
    assert signature(out) == ["Flatten", "Gemm+PRelu"]
    out = optimised_matches_original(ctx, _flatten_then("Gemm", shape=(72, 1, 1)))
    assert signature(out) == ["Gemm+PRelu"]
    monkeypatch.setattr(passes, "FLATTEN_CONV_MAX_WEIGHTS", 72 * 9 - 1)
    out = optimised_matches_original(ctx, _flatten_then("Gemm"))
    assert signature(out) == ["Flatten", "Gemm+PRelu"]


# --- fuse_space_to_depth ----------------------------------------------------------------------
END = 2 ** 63 - 1  # ONNX's "to the end", as exporters write it


def _focus(order, chained=True, shape=(3, 8, 10), extra_reader=False):
    """Concat along C of x[:, a::2, b::2] for (a, b) in `order`, each part two Slices (H, then
    W: PyTorch's export) or one Slice of both axes."""
    nodes, parts = [], []
    for i, (a, b) in enumerate(order):
        if chained:
            nodes += [Node("Slice", f"h{i}", ["x"], {"starts": [a], "ends": [END], "axes": [2],
                                                     "steps": [2]}),
                      Node("Slice", f"p{i}", [f"h{i}"], {"starts": [b], "ends": [END],
                                                         "axes": [3], "steps": [2]})]
        else:
            nodes.append(Node("Slice", f"p{i}", ["x"], {"starts": [a, b], "ends": [END, END],
                                                        "axes": [2, 3], "steps": [2, 2]}))
        parts.append(f"p{i}")
    nodes += [Node("Concat", "y", parts, {"axis": 1})]
    return Graph({"x": shape}, nodes, ["y", "p0"] if extra_reader else ["y"])


ROW_MAJOR, COLUMN_MAJOR = [(0, 0), (0, 1), (1, 0), (1, 1)], [(0, 0), (1, 0), (0, 1), (1, 1)]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("order, chained", [(ROW_MAJOR, True), (COLUMN_MAJOR, True),
                                            (COLUMN_MAJOR, False)],
                         ids=["row-major", "column-major (YOLOv5, YOLOX)", "one-slice-parts"])
def test_focus_slices_and_concat_become_one_rearrange(ctx, order, chained, precision):
    out = optimised_matches_original(ctx, _focus(order, chained), precision)
    assert signature(out) == ["Rearrange"]


@pytest.mark.parametrize("graph", [
    _focus([(0, 0), (1, 1), (0, 1), (1, 0)]),  # neither order
    _focus(ROW_MAJOR[:3]),  # a part missing
    _focus(ROW_MAJOR, extra_reader=True),  # a part is also an output
], ids=["other-order", "three-parts", "part-read-twice"])
def test_focus_forms_that_stay_slices(ctx, graph):
    assert "Rearrange" not in signature(optimised_matches_original(ctx, graph))


@pytest.mark.parametrize("residual", [True, "after"])
def test_the_torch_runner_adds_the_residual_where_the_reference_does(residual):
    """glcnn diff's torch side (glcnn/commands/torch_runner.py) against the float64 reference,
    for a residual added before and after a Sigmoid (they differ by far more than the
    tolerance)."""
    from glcnn.commands.torch_runner import TorchRunner
    graph = Graph({"x": (4, 5, 6)}, [conv_node("c", "x", 4, 4, seed=3)], ["c"])
    graph.nodes[0].inputs.append("x")
    graph.nodes[0].attrs |= {"residual": residual, "activation": {"op": "Sigmoid"}}
    feeds = _feeds(graph, "fp32")
    got = TorchRunner(graph, threads=1)(feeds)["c"]
    np.testing.assert_allclose(got.reshape(4, 5, 6), reference.run(graph, feeds)["c"],
                               rtol=1e-5, atol=1e-5)
