"""Add, Sub, Mul, Div, Max and Min with general broadcasting on glcnn shapes (either side, any
axis of size 1), constant glcnn-shaped operands (atlas textures) and `swap`: GPU vs the float64
reference at fp32, fp16 and u8, the reference vs PyTorch, the torch runner, and the errors.
The same-shape, (C,1,1) and per-channel fast paths are tested in test_ops.py / test_math.py
(Max and Min's here: test_max_min_fast_paths)."""

import numpy as np
import pytest
import torch
from helpers import assert_close, single_op_graph
from precision_check import PRECISIONS
from precision_check import check as check_inputs

import glcnn
from glcnn.graph import Node, reference
from glcnn.ops import make_op

OPS = ("Add", "Sub", "Mul", "Div", "Max", "Min")


def check(ctx, op, attrs, shapes, precision, weights=None, inputs=None):
    xs = inputs if inputs is not None else inputs_for(shapes, op=op)
    return check_inputs(ctx, op, attrs, shapes, precision, weights, xs)


def inputs_for(shapes, seed=0, op="Add"):
    """Seeded normal inputs; a divisor keeps 1 <= |b| <= 3 (u8 rounding would blow up 1/b)."""
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    if op == "Div":
        last = rng.uniform(1, 3, shapes[-1]) * rng.choice([-1, 1], shapes[-1])
        xs[-1] = last.astype(np.float32)
    return xs


PAIRS = [  # (a, b): broadcasting on either side, any axis
    ((3, 1, 17), (1, 1, 17)),       # a channel-less row against C rows
    ((1, 1, 17), (3, 1, 17)),       # the first operand broadcasts
    ((5, 4, 1), (5, 4, 7)),         # W of a
    ((13, 1, 9), (13, 6, 1)),       # both broadcast: (13, 6, 9)
    ((5, 1, 1), (5, 3, 4)),         # a (C,1,1) first operand
    ((13, 7, 5), (1, 7, 5)),        # one channel against 13
    ((40, 1, 33), (40, 1, 1)),      # LayerNorm's x − mean over W of a CL sequence
    ((1, 1, 1), (6, 2, 3)),
]
PAIR_IDS = ["{}x{}x{}-{}x{}x{}".format(*a, *b) for a, b in PAIRS]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("a", "b"), PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("op", OPS)
def test_broadcast_tensors(ctx, op, a, b, precision):
    check(ctx, op, {}, [a, b], precision)


CONSTANTS = [  # (input, constant B as a glcnn-shaped array)
    ((3, 1, 17), (1, 1, 17)),       # LayerNorm's scale on a CL sequence (W)
    ((5, 9, 1), (1, 9, 1)),         # along H
    ((13, 2, 3), (13, 2, 3)),       # a full constant
    ((5, 1, 7), (5, 3, 7)),         # the constant widens the output
    ((1, 4, 5), (3, 1, 5)),
]
CONSTANT_IDS = ["{}x{}x{}-B{}x{}x{}".format(*a, *b) for a, b in CONSTANTS]


def _constant(shape, op, seed=5):
    rng = np.random.default_rng(seed)
    b = rng.uniform(0.5, 2.0, shape) * rng.choice([-1, 1], shape)
    return np.asarray(b, np.float32)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("a", "b"), CONSTANTS, ids=CONSTANT_IDS)
@pytest.mark.parametrize("op", OPS)
def test_constant_atlas(ctx, op, a, b, precision):
    check(ctx, op, {}, [a], precision, {"B": _constant(b, op)})


SWAPS = [  # (input shapes, weights): c − x and c / x, constant or tensor
    ([(3, 1, 17)], {"B": (1, 1, 17)}), ([(5, 3, 4)], {"B": (5,)}), ([(4, 2, 2)], {"B": ()}),
    ([(5, 3, 4), (5, 1, 1)], None), ([(5, 3, 4), (5, 3, 4)], None),
    ([(1, 3, 4), (5, 1, 4)], None),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("shapes", "weights"), SWAPS,
                         ids=["atlas", "channel", "scalar", "channel-tensor", "same", "broadcast"])
@pytest.mark.parametrize("op", ["Sub", "Div"])
def test_swap(ctx, op, shapes, weights, precision):
    rng = np.random.default_rng(3)
    xs = [(rng.uniform(1, 3, s) * rng.choice([-1, 1], s)).astype(np.float32) for s in shapes]
    w = None if weights is None else {"B": _constant(weights["B"], op)}
    check(ctx, op, {"swap": 1}, shapes, precision, w, inputs=xs)


FAST = [([(7, 5, 6), (7, 5, 6)], None), ([(7, 5, 6), (7, 1, 1)], None),
        ([(7, 5, 6)], {"B": (7,)}), ([(7, 5, 6)], {"B": ()})]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("shapes", "weights"), FAST,
                         ids=["same", "channel-tensor", "channel-constant", "scalar"])
@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_min_fast_paths(ctx, op, shapes, weights, precision):
    w = None if weights is None else {"B": np.asarray(_constant(weights["B"], op) * 0.5)}
    check(ctx, op, {}, shapes, precision, w)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("mode", ["tensor", "atlas"])
def test_arithmetic_ops_share_a_program(ctx, mode, precision):
    """Add, Sub (both ways), Mul, Max and Min of one operand form run one program (binary.glsl
    OP_ARITH, the op in u_op), each still matching the reference; Div keeps its own."""
    ops = [("Add", 0), ("Sub", 0), ("Sub", 1), ("Mul", 0), ("Max", 0), ("Min", 0), ("Div", 0)]
    rng = np.random.default_rng(5)
    shape = (6, 5, 7)
    b = _constant(shape, "Div") if mode == "atlas" else None
    inputs = ["x"] if mode == "atlas" else ["x", "z"]
    nodes = [Node(op, f"{op}{swap}", inputs, {"swap": swap} if swap else {},
                  {"B": b} if mode == "atlas" else {}) for op, swap in ops]
    feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
    if mode == "tensor":
        feeds["z"] = (rng.uniform(1, 3, shape) * rng.choice([-1, 1], shape)).astype(np.float32)
    graph = glcnn.graph.Graph({k: shape for k in feeds}, nodes, [n.name for n in nodes])
    if precision == "u8":
        glcnn.calibrate(graph, [feeds], ctx)
    with glcnn.Pipeline(graph, ctx, precision=precision) as pipe:
        programs = {p.op.node.op: id(p.program) for p in pipe.passes}
        ys = pipe.run(feeds)
    ref = reference.run(graph, feeds)
    for node in nodes:
        assert_close(ys[node.name], ref[node.name], precision, f"{node.name} {mode} {precision}")
    assert len(set(programs.values())) == 2 and programs["Div"] != programs["Add"]


def test_max_min_reference():
    a = np.array([[[1.0, -2.0, 3.0]]])
    b = np.array([[[0.5, -1.0, 4.0]]])
    for op, want in (("Max", [1.0, -1.0, 4.0]), ("Min", [0.5, -2.0, 3.0])):
        graph = single_op_graph(op, {}, [(1, 1, 3)], {"B": b})
        np.testing.assert_array_equal(reference.run(graph, {"x0": a})["y"].reshape(-1), want)


def test_swap_reference_is_b_minus_a():
    x = np.arange(6, dtype=np.float64).reshape(1, 2, 3) + 1
    b = np.full((1, 1, 3), 10.0)
    for op, want in (("Sub", b - x), ("Div", b / x)):
        graph = single_op_graph(op, {"swap": 1}, [(1, 2, 3)], {"B": b})
        np.testing.assert_allclose(reference.run(graph, {"x0": x})["y"], want)


def test_reference_matches_torch():
    rng = np.random.default_rng(1)
    for a, b in PAIRS:
        x, y = rng.standard_normal(a), rng.standard_normal(b)
        graph = single_op_graph("Mul", {}, [a, b])
        want = (torch.from_numpy(x)[None] * torch.from_numpy(y)[None])[0].numpy()
        np.testing.assert_allclose(reference.run(graph, {"x0": x, "x1": y})["y"], want)


@pytest.mark.parametrize("op", OPS)
def test_torch_runner(op):
    from glcnn.commands.torch_runner import TorchRunner
    for shapes, weights in [([(3, 1, 5), (1, 4, 1)], None), ([(3, 1, 5)], {"B": (3, 2, 1)})]:
        w = None if weights is None else {"B": _constant(weights["B"], op)}
        for swap in (0, 1):
            graph = single_op_graph(op, {"swap": swap}, shapes, w)
            xs = dict(zip(graph.inputs, inputs_for(shapes, op="Div")))
            got = TorchRunner(graph, threads=1)(xs)["y"]
            assert_close(got, reference.run(graph, xs)["y"], "fp32", f"{op} {shapes} {swap}")


ERRORS = [  # (input shapes, weights, attrs, error, message)
    ([(3, 4, 5), (3, 2, 5)], None, {}, glcnn.ShapeError,
     r"cannot broadcast input 'x1' of shape \(3, 2, 5\) with \(3, 4, 5\)"),
    ([(3, 4, 5)], {"B": np.ones((2, 4, 5))}, {}, glcnn.UnsupportedOpError,
     r"cannot broadcast constant B of shape \(2, 4, 5\)"),
    ([(3, 4, 5)], {"B": np.ones(4)}, {}, glcnn.UnsupportedOpError, "constant B has 4 values"),
    ([(3, 4, 5)], {"B": np.ones(3)}, {"swap": 2}, glcnn.UnsupportedOpError, "swap=2 must be"),
]


@pytest.mark.parametrize(("shapes", "weights", "attrs", "error", "message"), ERRORS,
                         ids=["tensors", "constant", "channel-count", "swap"])
def test_errors(shapes, weights, attrs, error, message):
    names = [f"x{i}" for i in range(len(shapes))]
    with pytest.raises(error, match=f"layer 'b' \\(Sub\\): {message}"):
        make_op(Node("Sub", "b", names, attrs, weights or {}), shapes)
