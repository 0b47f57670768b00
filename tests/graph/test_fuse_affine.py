"""fuse_swish, drop_identity_affine and fold_affine (glcnn/graph/fuse_affine.py): each rewritten graph runs on the GPU
and is compared with the numpy reference of the *original* graph, at every precision."""

import numpy as np
import pytest
from helpers import PRECISIONS, conv_node, optimised_matches_original, signature

from glcnn.graph import Graph, Node
from glcnn.graph.fuse_affine import drop_identity_affine, fold_affine, fuse_swish

pytestmark = pytest.mark.gl


def _const(op, name, x, value, **attrs):
    return Node(op, name, [x], attrs, {"B": np.asarray(value, np.float32)})


def _silu():
    return [Node("Sigmoid", "s", ["conv"]), Node("Mul", "y", ["conv", "s"])]


def _silu_swapped():
    return [Node("Sigmoid", "s", ["conv"]), Node("Mul", "y", ["s", "conv"])]


def _silu_of_x_times_one():  # PP-OCRv4 rec's export of Paddle's swish: x * sigmoid(x * 1)
    return [_const("Mul", "one", "conv", [1.0]), Node("Sigmoid", "s", ["one"]),
            Node("Mul", "y", ["conv", "s"])]


def _hardsigmoid_gate():
    return [Node("HardSigmoid", "h", ["conv"], {"alpha": 1 / 6, "beta": 0.5}),
            Node("Mul", "y", ["conv", "h"])]


def _relu6_then_div():  # Paddle's export: x * clip(x + 3, 0, 6) / 6
    return [_const("Add", "a", "conv", [3.0]), Node("Clip", "c", ["a"], {"min": 0.0, "max": 6.0}),
            Node("Mul", "m", ["conv", "c"]), _const("Div", "y", "m", [6.0])]


def _relu6_div_first():  # torch's hardsigmoid written out: x * (clip(x + 3, 0, 6) / 6)
    return [_const("Add", "a", "conv", 3.0), Node("Clip", "c", ["a"], {"min": 0.0, "max": 6.0}),
            _const("Mul", "d", "c", 1 / 6), Node("Mul", "y", ["d", "conv"])]


SWISH = [(_silu, "Silu"), (_silu_swapped, "Silu"), (_silu_of_x_times_one, "Silu"),
         (_hardsigmoid_gate, "HardSwish"),
         (_relu6_then_div, "HardSwish"), (_relu6_div_first, "HardSwish")]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("make", "op"), SWISH, ids=[m.__name__[1:] for m, _ in SWISH])
def test_swish_chain_becomes_one_conv_pass(ctx, make, op, precision):
    graph = Graph({"x": (5, 6, 7)}, [conv_node("conv", "x", 5, 6), *make()], ["y"])
    out = optimised_matches_original(ctx, graph, precision)
    assert signature(out) == [f"Conv+{op}"] and out.nodes[0].name == "y"


def test_swish_of_another_tensor_is_left_alone(ctx):
    graph = Graph({"x": (4, 5, 5)}, [conv_node("conv", "x", 4, 4), Node("Sigmoid", "s", ["x"]),
                                     Node("Mul", "y", ["conv", "s"])], ["y"])
    out = optimised_matches_original(ctx, graph, optimise=fuse_swish)
    assert signature(out) == ["Conv", "Sigmoid", "Mul"]


def test_hardswish_with_other_bounds_is_left_alone(ctx):
    chain = _relu6_then_div()
    chain[1].attrs["max"] = 5.0
    graph = Graph({"x": (4, 5, 5)}, [conv_node("conv", "x", 4, 4), *chain], ["y"])
    out = optimised_matches_original(ctx, graph, optimise=fuse_swish)
    assert signature(out) == ["Conv", "Add", "Clip", "Mul", "Div"]


IDENTITIES = [  # (id, op, constant B, swapped (B op x), dropped?)
    ("mul-one", "Mul", [1.0], False, True), ("div-ones", "Div", np.ones((4, 1, 1)), False, True),
    ("add-zero", "Add", 0.0, False, True), ("sub-zeros", "Sub", np.zeros(4), False, True),
    ("mul-almost-one", "Mul", [1.0 + 2.0 ** -23], False, False),
    ("add-zero-but-one", "Add", [0.0, 0.0, 0.5, 0.0], False, False),
    ("zero-minus-x", "Sub", 0.0, True, False),
    ("mul-widening", "Mul", np.ones((4, 5, 6)), False, False),  # broadcasts x (4, 1, 1) up
]


@pytest.mark.parametrize(("op", "value", "swap", "dropped"), [i[1:] for i in IDENTITIES],
                         ids=[i[0] for i in IDENTITIES])
def test_identity_arithmetic_goes(ctx, op, value, swap, dropped):
    """x · 1, x / 1, x + 0, x − 0 go, their readers reading x; a value that is not the
    identity everywhere, 0 − x, and a constant that widens x stay."""
    x = (4, 1, 1) if np.ndim(value) == 3 else (4, 5, 6)
    node = _const(op, "id", "conv", value, **({"swap": 1} if swap else {}))
    graph = Graph({"x": x}, [conv_node("conv", "x", 4, 4, k=1), node,
                             Node("Relu", "y", ["id"])], ["y"])
    out = optimised_matches_original(ctx, graph, optimise=drop_identity_affine)
    assert signature(out) == (["Conv", "Relu"] if dropped else ["Conv", op, "Relu"])
    assert out.nodes[-1].inputs == (["conv"] if dropped else ["id"])


def test_identity_arithmetic_that_is_an_output_stays(ctx):
    graph = Graph({"x": (4, 5, 6)}, [conv_node("conv", "x", 4, 4), _const("Mul", "y", "conv", 1.0)],
                  ["y"])
    out = optimised_matches_original(ctx, graph, optimise=drop_identity_affine)
    assert signature(out) == ["Conv", "Mul"]


AFFINES = [  # (id, op, constant per channel?)
    ("mul-scalar", "Mul", False), ("mul-channel", "Mul", True), ("add-scalar", "Add", False),
    ("add-channel", "Add", True), ("sub-channel", "Sub", True), ("div-scalar", "Div", False),
]


def _value(per_channel, c, seed=3):
    rng = np.random.default_rng(seed)
    v = rng.uniform(0.5, 2.0, c) * rng.choice([-1, 1], c)
    return v.reshape(c, 1, 1) if per_channel else v[:1]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("transposed", [False, True], ids=["conv", "convT-g2"])
@pytest.mark.parametrize(("op", "per_channel"), [a[1:] for a in AFFINES],
                         ids=[a[0] for a in AFFINES])
def test_affine_folds_into_conv_weights(ctx, op, per_channel, transposed, precision):
    conv = conv_node("conv", "x", 4, 6, group=2 if transposed else 1, transposed=transposed,
                     **({"strides": [2, 2]} if transposed else {}))
    graph = Graph({"x": (4, 5, 6)}, [conv, _const(op, "y", "conv", _value(per_channel, 6)),
                                     Node("Relu", "r", ["y"])], ["r"])
    out = optimised_matches_original(ctx, graph, precision)
    assert signature(out) == [("ConvTranspose" if transposed else "Conv") + "+Relu"]


@pytest.mark.parametrize("precision", PRECISIONS)
def test_affine_after_activation_is_the_epilogue(ctx, precision):
    # PP-LCNet: conv -> ·a + b -> hardswish (written out) -> ·c + d, one pass.
    graph = Graph({"x": (5, 6, 7)}, [
        conv_node("conv", "x", 5, 6), _const("Mul", "m0", "conv", [2.1]),
        _const("Add", "a0", "m0", [0.9]), *[
            Node(n.op, n.name, [("a0" if i == "conv" else i) for i in n.inputs], n.attrs,
                 n.weights) for n in _relu6_then_div()],
        _const("Mul", "m1", "y", _value(True, 6)), _const("Add", "a1", "m1", [-0.3])], ["a1"])
    out = optimised_matches_original(ctx, graph, precision)
    assert signature(out) == ["Conv+HardSwish+Affine"] and out.nodes[0].name == "a1"


@pytest.mark.parametrize("precision", PRECISIONS)
def test_batchnorm_after_fused_activation_is_the_epilogue(ctx, precision):
    rng = np.random.default_rng(1)
    conv = conv_node("conv", "x", 4, 4)
    conv.attrs["activation"] = {"op": "Relu"}
    bn = Node("BatchNormalization", "bn", ["conv"], {"epsilon": 1e-3}, {
        k: rng.uniform(0.5, 2, 4).astype(np.float32) for k in ("scale", "B", "mean", "var")})
    out = optimised_matches_original(ctx, Graph({"x": (4, 5, 5)}, [conv, bn], ["bn"]), precision)
    assert signature(out) == ["Conv+Relu+Affine"]


def test_affine_after_an_elementwise_host(ctx):
    graph = Graph({"x": (4, 5, 5), "z": (4, 5, 5)}, [
        Node("Add", "s", ["x", "z"], {"activation": {"op": "Tanh"}}),
        _const("Mul", "y", "s", _value(True, 4))], ["y"])
    out = optimised_matches_original(ctx, graph)
    assert signature(out) == ["Add+Tanh+Affine"]


def _dense(op, **attrs):
    rng = np.random.default_rng(3)
    b = rng.standard_normal((6, 10) if attrs.get("transB") else (10, 6)).astype(np.float32)
    weights = {"B": b} | ({"C": rng.standard_normal(6).astype(np.float32)} if op == "Gemm" else {})
    return Node(op, "fc", ["x"], attrs, weights)


DENSE = [("matmul", lambda: _dense("MatMul")),
         ("gemm-transB-alpha-beta", lambda: _dense("Gemm", transB=1, alpha=0.5, beta=2.0))]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("make", [d[1] for d in DENSE], ids=[d[0] for d in DENSE])
def test_bias_and_scale_fold_into_a_dense_layer_before_its_activation(ctx, make, precision):
    """Keras Dense → ONNX: MatMul, then the bias Add, then the activation; here also a
    per-output scale, all one Gemm pass."""
    rng = np.random.default_rng(4)
    graph = Graph({"x": (10, 1, 1)}, [
        make(), _const("Add", "biased", "fc", rng.standard_normal(6)),
        _const("Mul", "scaled", "biased", rng.uniform(0.5, 2, 6)),
        Node("PRelu", "y", ["scaled"], {}, {"slope": rng.uniform(0, 0.5, (6, 1, 1)).astype(
            np.float32)})], ["y"])
    out = optimised_matches_original(ctx, graph, precision)
    assert signature(out) == ["Gemm+PRelu"]


def test_affine_after_a_matmul_of_a_matrix_stays_an_epilogue(ctx):
    b = np.random.default_rng(5).standard_normal((7, 3)).astype(np.float32)
    graph = Graph({"x": (2, 5, 7)}, [Node("MatMul", "mm", ["x"], {}, {"B": b}),
                                     _const("Add", "y", "mm", [0.25])], ["y"])
    out = optimised_matches_original(ctx, graph)
    assert [n.op for n in out.nodes] == ["MatMul"] and out.nodes[0].attrs.get("affine")


UNFOLDED = [  # (id, second node, why it stays)
    ("swap-sub", lambda: _const("Sub", "y", "conv", [1.5], swap=1), "c - x"),
    ("spatial-constant", lambda: _const("Mul", "y", "conv", np.full((6, 5, 6), 2.0)), "(C, H, W)"),
    ("div-by-zero", lambda: _const("Div", "y", "conv", [0.0]), "x / 0"),
    ("row-constant", lambda: _const("Add", "y", "conv", np.ones((1, 5, 1))), "one per row"),
]


@pytest.mark.parametrize("make", [u[1] for u in UNFOLDED], ids=[u[0] for u in UNFOLDED])
def test_affine_forms_that_stay_passes(make):
    graph = Graph({"x": (4, 5, 6)}, [conv_node("conv", "x", 4, 6), make()], ["y"])
    out = fold_affine(fold_affine(graph, into="weights"), into="epilogue")
    assert [n.op for n in out.nodes] == ["Conv", graph.nodes[1].op]


def test_affine_of_a_tensor_read_twice_stays(ctx):
    graph = Graph({"x": (4, 5, 6)}, [conv_node("conv", "x", 4, 6),
                                     _const("Mul", "y", "conv", [2.0])], ["y", "conv"])
    out = optimised_matches_original(ctx, graph)
    assert signature(out) == ["Conv", "Mul"]
