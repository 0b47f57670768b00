"""Sub, Div, Sqrt, Erf, Pow and Slice with steps against glcnn.graph.reference (fp32, fp16, u8),
their edge cases (zero divisors, negative bases), errors, and the ONNX converters against
onnxruntime (a GELU export, a YOLOv5 Focus layer, Pow, tensor Sub and Div)."""

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from helpers import assert_close, check_op, single_op_graph, storable
from onnx import helper

import glcnn
from glcnn.graph import Node, reference
from glcnn.ops import make_op

PRECISIONS = ("fp32", "fp16", "u8")
SHAPES = [(3, 5, 7), (5, 1, 1), (6, 9, 4), (1, 11, 3)]
SHAPE_IDS = ["c" + "x".join(map(str, s)) for s in SHAPES]
BIG = 2**63 - 1  # ONNX's "to the end"


def inputs_for(shapes, seed=0, scale=2.0, low=None):
    """Seeded normal inputs; `low` keeps the last input's |x| >= low (for divisors, negative
    exponents)."""
    rng = np.random.default_rng(seed)
    xs = [(rng.standard_normal(s) * scale).astype(np.float32) for s in shapes]
    if low is not None:
        xs[-1] = np.where(np.abs(xs[-1]) < low, np.copysign(low, xs[-1]), xs[-1])
    return [x.astype(np.float32) for x in xs]


def divisor_inputs(shapes, seed=0):
    """A normal numerator and divisors of both signs with 1 <= |b| <= 3: u8 storage rounds
    b by up to 1/85 of its range, which 1 / b would amplify without bound near 0."""
    rng = np.random.default_rng(seed)
    xs = inputs_for(shapes, seed)
    xs[-1] = (rng.uniform(1, 3, shapes[-1]) * rng.choice([-1, 1], shapes[-1]))
    return [x.astype(np.float32) for x in xs]


def check(ctx, op, attrs, shapes, precision, weights=None, make=inputs_for):
    """check_op for fp32 / fp16; for u8, calibrate on the evaluated sample (on a 1x1 image,
    other samples would set ranges far wider than this one's values) and give the reference
    the inputs as their u8 textures hold them, as check_op does for fp16: this measures the
    op's own error and its output's 8-bit storage, not how Sqrt near 0 or x^17 amplify the
    rounding of its input."""
    if precision != "u8":
        return check_op(ctx, op, attrs, shapes, weights, precision, inputs=make(shapes))
    graph = single_op_graph(op, attrs, shapes, weights)
    feeds = [dict(zip(graph.inputs, make(shapes)))]
    glcnn.calibrate(graph, feeds, ctx)
    with glcnn.Pipeline(graph, ctx, precision="u8", keep="all") as pipe:
        y = pipe.run(feeds[0])
        stored = {name: pipe.read(name) for name in graph.inputs}
    ref = reference.run(graph, stored)["y"]
    return assert_close(y, ref, "u8", f"{op} {attrs} {shapes} u8")


# --- Sub and Div ------------------------------------------------------------------------------
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("form", ["same-shape", "channel-tensor", "constant"])
@pytest.mark.parametrize("op", ["Sub", "Div"])
def test_sub_div(ctx, op, form, shape, precision):
    c = shape[0]
    shapes = [shape] if form == "constant" else [shape, shape if form == "same-shape" else
                                                  (c, 1, 1)]
    weights = None
    if form == "constant":
        b = np.random.default_rng(5).uniform(0.5, 2.0, c) * np.where(np.arange(c) % 2, -1, 1)
        weights = {"B": b.astype(np.float32)}
    check(ctx, op, {}, shapes, precision, weights,
          make=divisor_inputs if op == "Div" and form != "constant" else inputs_for)


def _inf_equal(y, ref):
    """Same Infs (with signs) at the same places, the rest close in fp32."""
    y, ref = np.asarray(y, np.float64), np.asarray(ref, np.float64)
    np.testing.assert_array_equal(np.isinf(y), np.isinf(ref))
    np.testing.assert_array_equal(y[np.isinf(y)], ref[np.isinf(ref)])
    finite = np.isfinite(ref)
    assert_close(y[finite], ref[finite], "fp32", "finite part")


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_div_by_zero_is_defined(ctx, precision):
    """x / ±0 = ±Inf by the sign of x, 0 / 0 = 0, subnormal divisors count as 0, and
    quotients beyond float32 are ±Inf: the same on every driver (no GLSL division by 0)."""
    a = np.array([1, -2, 0, 3, -0.0, 5, 1e30, -1e30, 7, 0, -1, 2], np.float32)
    b = np.array([0, 0, 0, -0.0, -0.0, 1e-40, 1e-10, 1e-10, 2, 1e-40, -1e-39, -4], np.float32)
    if precision == "fp16":  # what fp16 textures hold: no 1e30; 1e-10 is 0 there
        a, b = storable(np.clip(a, -6e4, 6e4), "fp16"), storable(b, "fp16")
    graph = single_op_graph("Div", {}, [(3, 2, 2), (3, 2, 2)])
    feeds = {"x0": a.reshape(3, 2, 2), "x1": b.reshape(3, 2, 2)}
    with glcnn.Pipeline(graph, ctx, precision=precision) as pipe:
        y = pipe.run(feeds)
    ref = reference.run(graph, feeds)["y"]
    assert not np.isnan(ref).any()
    _inf_equal(y, ref)


# --- Sqrt, Erf, Pow ---------------------------------------------------------------------------
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("op", ["Sqrt", "Erf"])
def test_sqrt_erf(ctx, op, shape, precision):
    check(ctx, op, {}, [shape], precision)  # Sqrt: the negative half reads as 0


EXPONENTS = [2, 0.5, 3, -1, 1.5, 0, -0.5, 4, 1, -3, 2.5, 17, -0.25]


def _pow_inputs(p):
    """Bases where x^p is finite: positive for negative non-integer p, |x| >= 0.5 for p < 0,
    |x| <= 1.5 for large p."""
    def make(shapes, seed=0):
        x = inputs_for(shapes, seed, low=0.5 if p < 0 else None)[0]
        if p < 0 and p != int(p):
            x = np.abs(x)
        return [np.clip(x, -1.5, 1.5) if abs(p) > 4 else x]
    return make


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", SHAPES[:3], ids=SHAPE_IDS[:3])
@pytest.mark.parametrize("p", EXPONENTS, ids=[f"p{p}" for p in EXPONENTS])
def test_pow(ctx, p, shape, precision):
    check(ctx, "Pow", {"exponent": p}, [shape], precision, make=_pow_inputs(p))


def _run_fp32(ctx, op, attrs, x):
    graph = single_op_graph(op, attrs, [x.shape])
    with glcnn.Pipeline(graph, ctx, precision="fp32") as pipe:
        return pipe.run(x), reference.run(graph, {"x0": x})["y"]


@pytest.mark.parametrize("p", [2, 0.5, 3, -1, -2, 1.5, -0.5, 0, 200, -200])
def test_pow_edges_are_defined(ctx, p):
    """Zeros, negative bases with non-integer p (read as 0), overflow to ±Inf, 0^-p = +Inf."""
    x = np.array([0, -0.0, -2, 2, -0.5, 0.5, 1e-40, -1e-40, 3, -3, 1, -1], np.float32)
    y, ref = _run_fp32(ctx, "Pow", {"exponent": p}, x.reshape(3, 2, 2))
    assert not np.isnan(ref).any()
    _inf_equal(y, ref)


def test_pow_two_is_exact_and_sqrt_matches_numpy(ctx):
    x = inputs_for([(4, 16, 16)], seed=3, scale=100.0)[0]
    y, _ = _run_fp32(ctx, "Pow", {"exponent": 2}, x)
    np.testing.assert_array_equal(y, x * x)
    y, _ = _run_fp32(ctx, "Sqrt", {}, np.abs(x))
    np.testing.assert_allclose(y, np.sqrt(np.abs(x)), rtol=4e-7)


def test_erf_is_accurate_to_2e_7_relative(ctx):
    """A dense sweep of [-5, 5] against math.erf in fp32 storage."""
    x = np.linspace(-5, 5, 4 * 64 * 64, dtype=np.float32).reshape(4, 64, 64)
    y, _ = _run_fp32(ctx, "Erf", {}, x)
    ref = np.vectorize(math.erf)(x.astype(np.float64))
    rel = np.abs(y - ref) / np.maximum(np.abs(ref), 1e-30)
    assert rel[x != 0].max() <= 2e-7, f"Erf relative error {rel.max():.3g}"


# --- Slice with steps and channel ranges ------------------------------------------------------
SLICES = [
    ({"starts": [0, 0], "ends": [BIG, BIG], "axes": [2, 3], "steps": [2, 2]}, "focus-0-0"),
    ({"starts": [1, 0], "ends": [BIG, BIG], "axes": [2, 3], "steps": [2, 2]}, "focus-1-0"),
    ({"starts": [0, 1], "ends": [BIG, BIG], "axes": [2, 3], "steps": [2, 2]}, "focus-0-1"),
    ({"starts": [1, 1], "ends": [BIG, BIG], "axes": [2, 3], "steps": [2, 2]}, "focus-1-1"),
    ({"starts": [1], "ends": [BIG], "axes": [-1], "steps": [3]}, "cols-step3"),
    ({"starts": [2, 1], "ends": [8, -1], "axes": [3, 2], "steps": [2, 3]}, "both-axes-reversed"),
    ({"starts": [-100], "ends": [100], "axes": [2], "steps": [4]}, "clamped-step4"),
    ({"starts": [1], "ends": [3], "axes": [1]}, "channels-1-3"),
    ({"starts": [0], "ends": [2], "axes": [1]}, "channels-0-2"),
    ({"starts": [2, 0], "ends": [BIG, BIG], "axes": [1, 2], "steps": [1, 2]}, "channels-2-end"),
    ({"starts": [-2], "ends": [BIG], "axes": [-3]}, "channels-negative"),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("shape", [(6, 9, 11), (5, 8, 8), (3, 7, 12)],
                         ids=["c6-9x11", "c5-8x8", "c3-7x12"])
@pytest.mark.parametrize("attrs", [s[0] for s in SLICES], ids=[s[1] for s in SLICES])
def test_slice_steps(ctx, attrs, shape, precision):
    check(ctx, "Slice", attrs, [shape], precision)


# --- errors name the layer --------------------------------------------------------------------
ERRORS = [
    ("Slice", {"starts": [0], "ends": [4], "axes": [2], "steps": [-1]}, "steps must be positive"),
    ("Slice", {"starts": [0], "ends": [4], "axes": [3], "steps": [0]}, "steps must be positive"),
    ("Slice", {"starts": [0], "ends": [2], "axes": [1], "steps": [2]}, "1 on the channel axis"),
    ("Slice", {"starts": [0, 0], "ends": [2, 2], "axes": [2, 2]}, "at most once"),
    ("Pow", {}, "exponent=None must be a finite number"),
    ("Pow", {"exponent": float("nan")}, "must be a finite number"),
    ("Pow", {"exponent": "2"}, "must be a finite number"),
]


@pytest.mark.parametrize(("op", "attrs", "message"), ERRORS,
                         ids=["slice-negative-step", "slice-zero-step", "slice-channel-step",
                              "slice-axis-twice", "pow-no-exponent", "pow-nan", "pow-string"])
def test_invalid_node(op, attrs, message):
    node = Node(op, "layer_under_test", ["x0"], attrs, {})
    with pytest.raises(glcnn.UnsupportedOpError, match=message) as info:
        make_op(node, [(3, 4, 4)])
    assert "'layer_under_test'" in str(info.value)


# --- ONNX converters against onnxruntime ------------------------------------------------------
def _model(nodes, inputs, initializers=(), opset=17):
    info = [helper.make_tensor_value_info(k, onnx.TensorProto.FLOAT, v) for k, v in inputs.items()]
    out = [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "math", info, out, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _compare_with_onnxruntime(ctx, model, tmp_path, make=inputs_for):
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    shapes = [[d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input]
    feeds = dict(zip([i.name for i in model.graph.input], make(shapes)))
    theirs = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    with glcnn.load(path, ctx=ctx) as pipe:
        ours = pipe.run({k: v[0] for k, v in feeds.items()})
        ops = [node.op for node in pipe.graph.nodes]
    assert_close(ours, theirs[0][0], "fp32", f"{ops} vs onnxruntime")
    return ops


def _const(name, value):
    return onnx.numpy_helper.from_array(np.asarray(value), name)


@pytest.mark.parametrize("op", ["Sub", "Div"])
def test_onnx_constant_first_operand(ctx, tmp_path, op):
    """c − x and c / x (c per channel): one glcnn Sub / Div with swap=1 (glcnn/ops/binary.py)."""
    c = np.array([2.0, -3.0, 0.5], np.float32).reshape(1, 3, 1, 1)
    model = _model([helper.make_node(op, ["c", "x"], ["y"])], {"x": [1, 3, 4, 5]},
                   [_const("c", c)])
    ops = _compare_with_onnxruntime(ctx, model, tmp_path, make=divisor_inputs)
    assert ops == [op]


def test_onnx_focus_slices_and_concat(ctx, tmp_path):
    """YOLOv5's Focus: cat(x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2],
    x[..., 1::2, 1::2]) on channels, as torch exports it (a Slice of both axes per part, opset
    13), against onnxruntime."""
    n, nodes, inits = helper.make_node, [], [_const("two", np.array([2, 2], np.int64)),
                                             _const("axes", np.array([2, 3], np.int64)),
                                             _const("end", np.array([BIG, BIG], np.int64))]
    for i, (dy, dx) in enumerate([(0, 0), (1, 0), (0, 1), (1, 1)]):
        inits.append(_const(f"s{i}", np.array([dy, dx], np.int64)))
        nodes.append(n("Slice", ["x", f"s{i}", "end", "axes", "two"], [f"q{i}"]))
    nodes.append(n("Concat", [f"q{i}" for i in range(4)], ["y"], axis=1))
    ops = _compare_with_onnxruntime(ctx, _model(nodes, {"x": [1, 3, 10, 14]}, inits, 13),
                                    tmp_path)
    assert ops == ["Rearrange"]  # passes.fuse_space_to_depth: one pass, not five


def test_onnx_gelu_export(ctx, tmp_path):
    """PyTorch's exact GELU, x·0.5·(1 + erf(x/√2)), exported at opset 17."""
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 5, 3, padding=1), torch.nn.GELU())
    torch.manual_seed(0)
    path = tmp_path / "gelu.onnx"
    torch.onnx.export(module.eval(), torch.zeros(1, 3, 7, 9), str(path), opset_version=17,
                      input_names=["x"], output_names=["y"], dynamo=False)
    ops = _compare_with_onnxruntime(ctx, onnx.load(str(path)), tmp_path)
    assert "Erf" in ops


def test_onnx_pow_sqrt_sub_div(ctx, tmp_path):
    """A normalisation written out: (x − m) / sqrt((x − m)^2 + 1) · erf(x) ... with a
    constant Pow exponent and tensor Sub / Div (the divisor (C, 1, 1) broadcast)."""
    n = helper.make_node
    nodes = [n("Sub", ["x", "m"], ["d"]), n("Pow", ["d", "two"], ["d2"]),
             n("Add", ["d2", "one"], ["v"]), n("Sqrt", ["v"], ["s"]),
             n("Div", ["d", "s"], ["q"]), n("Div", ["q", "m_pos"], ["r"]),
             n("Erf", ["r"], ["y"])]
    inits = [_const("two", np.float32(2.0)), _const("one", np.float32(1.0))]
    model = _model(nodes, {"x": [1, 5, 6, 7], "m": [1, 5, 6, 7], "m_pos": [1, 5, 1, 1]}, inits)

    def make(shapes, seed=0):
        x, m, d = inputs_for(shapes, seed)
        return [x, m, np.abs(d) + 0.5]
    ops = _compare_with_onnxruntime(ctx, model, tmp_path, make)
    assert ops == ["Sub", "Pow", "Add", "Sqrt", "Div", "Div", "Erf"]


@pytest.mark.parametrize(("nodes", "inputs", "inits", "message"), [
    ([helper.make_node("Pow", ["x", "p"], ["y"], name="pow_t")], {"x": [1, 3, 4, 4],
      "p": [1, 3, 4, 4]}, [], "'pow_t' \\(Pow\\): the exponent .* is a tensor"),
    ([helper.make_node("Pow", ["x", "p"], ["y"], name="pow_v")], {"x": [1, 3, 4, 4]},
     [_const("p", np.array([2, 3, 4], np.float32))], "'pow_v' \\(Pow\\): the exponent has shape"),
    ([helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"], name="back")],
     {"x": [1, 3, 4, 4]}, [_const("s", np.array([-1], np.int64)),
                           _const("e", np.array([-BIG], np.int64)),
                           _const("a", np.array([3], np.int64)),
                           _const("st", np.array([-1], np.int64))],
     "'back' \\(Slice\\): steps \\[-1\\]: only positive"),
], ids=["pow-tensor-exponent", "pow-vector-exponent", "slice-negative-step"])
def test_onnx_errors_name_the_node(tmp_path, nodes, inputs, inits, message):
    path = tmp_path / "bad.onnx"
    onnx.save(_model(nodes, inputs, inits), str(path))
    with pytest.raises(glcnn.UnsupportedOpError, match=message):
        glcnn.load_graph(path)
