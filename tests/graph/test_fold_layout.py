"""fold_layout: an NHWC model input's Transpose to NCHW (tf2onnx's first node) and an output's
Transpose back to NHWC leave the graph; glcnn holds both (C, H, W), transposes the model's own
(1, H, W, C) input arrays as it uploads them and the outputs as it returns them. A Softmax
after an output's Transpose moves before it.

The GPU checks run the folded graph and compare it with the reference of the original graph
(the Transposes included) on the same NHWC array; onnxruntime and torch check `glcnn bench` and
`glcnn diff`, which feed onnxruntime the model's own layout back from glcnn's (C, H, W) and
torch the graph it runs with the same folds.
"""

import copy

import numpy as np
import onnx
import pytest
from helpers import PRECISIONS, assert_close, conv_node, optimised_matches_original, signature
from onnx import helper
from onnx_models import make_model, rand

import glcnn
from glcnn.commands.bench import Settings, bench
from glcnn.commands.diff import diff
from glcnn.graph import Graph, Node, passes, reference
from glcnn.graph.fold_layout import fold_input_transposes, fold_layout
from glcnn.inputs import channels_last, own_input

H, W, C = 6, 5, 3


def nhwc_graph(perm=(0, 3, 1, 2), own=(1, H, W, C), outputs=("y",), meta=None,
               second_reader=False) -> Graph:
    """Input x, (1, H, W, C) in the model file (held (H, W, C) as imported) → Transpose →
    3×3 conv 3 → 4 → Relu; optionally another reader of x (a Relu, output "r")."""
    nodes = [Node("Transpose", "t", ["x"], {"perm": list(perm)}),
             conv_node("conv", "t", (H, W, C)[perm[1] - 1], 4),
             Node("Relu", "y", ["conv"])]
    if second_reader:
        nodes.append(Node("Relu", "r", ["x"]))
    graph = Graph({"x": (H, W, C)}, nodes, list(outputs) + (["r"] if second_reader else []))
    graph.meta.update({"onnx_input_shapes": {"x": list(own)}} if own else {})
    graph.meta.update(meta or {})
    return graph


def nhwc_array(seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, H, W, C)).astype(np.float32)


@pytest.mark.gl
@pytest.mark.parametrize("precision", PRECISIONS)
def test_input_transpose_folds_into_the_upload(ctx, precision):
    graph = nhwc_graph()
    x = nhwc_array()
    if precision == "fp16":
        x = x.astype(np.float16).astype(np.float32)
    ref = reference.run(graph, {"x": x[0]})["y"]  # the original graph holds x (H, W, C)
    folded = passes.optimize(copy.deepcopy(graph))
    assert folded.inputs == {"x": (C, H, W)}
    assert folded.meta["channels_last_inputs"] == ["x"]
    assert signature(folded) == ["Conv+Relu"] and folded.nodes[0].inputs[0] == "x"
    with glcnn.Pipeline(folded, ctx, precision) as pipe:
        what = f"folded NHWC input, {precision}"
        assert_close(pipe.run(x), ref[None], precision, what)  # own (1, H, W, C) in, batched out
        assert_close(pipe.run(x[0].transpose(2, 0, 1)), ref, precision, what + ", (C, H, W)")
        with pytest.raises(glcnn.ShapeError, match=r"expected \(3, 6, 5\)"):
            pipe.run(x[0])  # (H, W, C) is neither the own shape nor glcnn's


@pytest.mark.gl
@pytest.mark.parametrize("case", ["other perm", "transpose is an output", "x read elsewhere",
                                  "no own shape", "own shape not NHWC", "tfjs layout"])
def test_input_transpose_stays(ctx, case):
    graph = {"other perm": lambda: nhwc_graph(perm=(0, 2, 1, 3)),
             "transpose is an output": lambda: nhwc_graph(outputs=("y", "t")),
             "x read elsewhere": lambda: nhwc_graph(second_reader=True),
             "no own shape": lambda: nhwc_graph(own=None),
             "own shape not NHWC": lambda: nhwc_graph(own=(H, W, C)),
             "tfjs layout": lambda: nhwc_graph(meta={"layout": "NHWC"})}[case]()
    out = optimised_matches_original(ctx, graph)
    assert out.inputs == {"x": (H, W, C)} and "channels_last_inputs" not in out.meta
    assert "Transpose" in signature(out)


def test_fold_keeps_other_inputs_and_lists_each_folded_one():
    graph = nhwc_graph()
    graph.inputs["z"] = (H, W, C)  # a second NHWC input, read by its own Transpose
    graph.meta["onnx_input_shapes"]["z"] = [1, H, W, C]
    graph.nodes.insert(1, Node("Transpose", "tz", ["z"], {"perm": [0, 3, 1, 2]}))
    graph.nodes.append(Node("Add", "sum", ["t", "tz"]))
    graph.outputs.append("sum")
    graph.validate()
    fold_input_transposes(graph)
    graph.validate()
    assert graph.inputs == {"x": (C, H, W), "z": (C, H, W)}
    assert graph.meta["channels_last_inputs"] == ["x", "z"]
    assert [n.op for n in graph.nodes] == ["Conv", "Relu", "Add"]
    assert graph.nodes[-1].inputs == ["x", "z"]


def test_own_input_and_channels_last():
    x = np.arange(C * H * W, dtype=np.float32).reshape(C, H, W)
    folded = {"onnx_input_shapes": {"x": [1, H, W, C]}, "channels_last_inputs": ["x"]}
    assert channels_last(folded, "x") and not channels_last(folded, "other")
    assert channels_last({"layout": "NHWC"}, "anything")
    assert np.array_equal(own_input(folded, "x", x), x.transpose(1, 2, 0)[None])
    plain = {"onnx_input_shapes": {"x": [1, C, H, W]}}
    assert np.array_equal(own_input(plain, "x", x), x[None])
    assert own_input({}, "x", x).shape == (1, C, H, W)
    vector = {"onnx_input_shapes": {"v": [1, 12]}}
    assert own_input(vector, "v", np.ones((12, 1, 1), np.float32)).shape == (1, 12)


def nhwc_onnx(path):
    """Transpose NHWC → NCHW → Conv 3 → 4 (3×3, pads 1) → Relu → Transpose back (tf2onnx)."""
    n = helper.make_node
    nodes = [n("Transpose", ["x"], ["nchw"], perm=[0, 3, 1, 2]),
             n("Conv", ["nchw", "W", "B"], ["conv"], pads=[1, 1, 1, 1]),
             n("Relu", ["conv"], ["relu"]),
             n("Transpose", ["relu"], ["y"], perm=[0, 2, 3, 1])]
    onnx.save(make_model(nodes, {"x": [1, H, W, C]}, {"y": None},
                         {"W": rand(4, C, 3, 3), "B": rand(4, seed=1)}), str(path))
    return path


@pytest.mark.gl
def test_bench_and_diff_feed_onnxruntime_the_own_layout(ctx, tmp_path):
    path = nhwc_onnx(tmp_path / "nhwc.onnx")
    assert glcnn.load_optimized(path).meta["channels_last_inputs"] == ["x"]
    x = nhwc_array(seed=3)
    report = bench(path, x, against=("onnxruntime", "torch"), ctx=ctx, report_progress=print,
                   settings=Settings(runs=2, warmup=1, budget=1.0, load_times=False, settle=0))
    assert [a["ok"] for a in report["agreement"]] == [True] * 3  # each pair of three
    rows, first = diff(path, x, against="onnxruntime", ctx=ctx)
    assert glcnn.load_optimized(path).meta["channels_last_outputs"] == ["y"]
    assert first is None and [r.layer for r in rows if r.compared] == ["x", "y"]


# --- outputs --------------------------------------------------------------------------------
def nhwc_outputs_graph(outputs=("y", "s"), own=True, extra_reader=False) -> Graph:
    """x (C, H, W) → conv 3 → 4 → Transpose NCHW → NHWC = output y (1, H, W, 4); conv 3 → 2 →
    Transpose → Softmax over the last axis = output s (1, H, W, 2), as P-Net ends (without s
    when `outputs` leaves it out)."""
    nhwc = {"perm": [0, 2, 3, 1]}
    nodes = [conv_node("box", "x", C, 4), Node("Transpose", "y", ["box"], nhwc)]
    if "s" in outputs:
        nodes += [conv_node("score", "x", C, 2, seed=1), Node("Transpose", "t", ["score"], nhwc),
                  Node("Softmax", "s", ["t"], {"axis": 3})]
    if extra_reader:
        nodes.append(Node("Relu", "r", ["box"]))
    graph = Graph({"x": (C, H, W)}, nodes, list(outputs) + (["r"] if extra_reader else []))
    if own:
        graph.meta["onnx_output_shapes"] = {"y": [1, H, W, 4], "s": [1, H, W, 2]}
    return graph


@pytest.mark.gl
@pytest.mark.parametrize("precision", PRECISIONS)
def test_output_transposes_fold_into_the_readback(ctx, precision):
    graph = nhwc_outputs_graph()
    x = np.random.default_rng(4).standard_normal((1, C, H, W)).astype(np.float32)
    if precision == "fp16":
        x = x.astype(np.float16).astype(np.float32)
    ref = reference.run(graph, {"x": x[0]})  # y and s as (H, W, C') glcnn tensors
    folded = passes.optimize(copy.deepcopy(graph))
    assert signature(folded) == ["Conv", "Conv", "Softmax"]
    assert [n.name for n in folded.nodes][0] == "y" and folded.nodes[-1].attrs["axis"] == 1
    assert folded.meta["channels_last_outputs"] == ["y", "s"]
    with glcnn.Pipeline(folded, ctx, precision) as pipe:
        got = pipe.run(x)  # batched: each output in its own (1, H, W, C')
        for name in ("y", "s"):
            what = f"folded NHWC output {name}, {precision}"
            assert_close(got[name], ref[name][None], precision, what)
            assert_close(pipe.read(name), ref[name].transpose(2, 0, 1), precision,
                         what + " read as (C, H, W)")


@pytest.mark.gl
@pytest.mark.parametrize("case", ["no own shapes", "source read elsewhere", "not an output"])
def test_output_transposes_stay(ctx, case):
    graph = nhwc_outputs_graph(("y",), own=case != "no own shapes",
                               extra_reader=case == "source read elsewhere")
    if case == "not an output":  # y read by a node after it instead
        graph.nodes.append(Node("Relu", "after", ["y"]))
        graph.outputs = ["after"]
    out = optimised_matches_original(ctx, graph)
    assert "Transpose" in signature(out) and "channels_last_outputs" not in out.meta


@pytest.mark.gl
@pytest.mark.parametrize("axis", [3, -1, 2, 1])
def test_softmax_moves_before_its_transpose(ctx, axis):
    """Transpose → Softmax over any axis is the same values as Softmax over the Transpose
    input's axis → Transpose; here the Transpose stays (no own output shape to fold into)."""
    graph = Graph({"x": (C, H, W)}, [
        conv_node("conv", "x", C, 5),
        Node("Transpose", "t", ["conv"], {"perm": [0, 2, 3, 1]}),
        Node("Softmax", "s", ["t"], {"axis": axis}), Node("Relu", "y", ["s"])], ["y"])
    out = optimised_matches_original(ctx, graph, optimise=fold_layout)
    assert [n.op for n in out.nodes] == ["Conv", "Softmax", "Transpose", "Relu"]
    assert out.nodes[1].attrs["axis"] == [0, 2, 3, 1][axis % 4]


# --- a sequence's MatMul by a constant, rearranged to channels last: a 1×1 conv ---------------
def projection(bias=True, reshape=False, residual=True, extra_reader=False) -> Graph:
    """a (8, 1, 12) (8 tokens on the channels, 12 features along W) → MatMul by B (12, 20) →
    + bias (1, 1, 20) → Rearrange to channels last (20, 1, 8) (or, `reshape`, the same values
    in their order) → + r, as SVTR's attention output projection and residual."""
    target = (20, 1, 8)
    rng = np.random.default_rng(5)
    rows, k, n = 8, 12, 20
    nodes = [Node("MatMul", "mm", ["a"], {"a_axes": [1, 0, 2], "out_axes": [1, 0, 2]},
                  {"B": rng.standard_normal((k, n)).astype(np.float32)})]
    last = "mm"
    if bias:
        nodes.append(Node("Add", "biased", ["mm"], {},
                          {"B": rng.standard_normal((1, 1, n)).astype(np.float32)}))
        last = "biased"
    order = {"dims": [160], "strides": [1]} if reshape else {"dims": [n, rows], "strides": [1, n]}
    nodes.append(Node("Rearrange", "lc", [last], {"shape": list(target), "offset": 0, **order}))
    outputs = ["y" if residual else "lc"] + (["mm"] if extra_reader else [])
    if residual:
        nodes.append(Node("Add", "y", ["r", "lc"]))
    return Graph({"a": (rows, 1, k), "r": target}, nodes, outputs)


@pytest.mark.gl
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("bias", [True, False])
def test_projection_to_channels_last_is_a_conv(ctx, bias, precision):
    out = optimised_matches_original(ctx, projection(bias=bias), precision)
    assert signature(out) == ["Rearrange", "Conv+Add"]
    conv = out.nodes[1]
    assert conv.name == "y" and conv.weights["W"].shape == (20, 12, 1, 1)
    assert ("B" in conv.weights) == bias


@pytest.mark.gl
@pytest.mark.parametrize("case", ["another layout", "read elsewhere"])
def test_projection_stays_a_matmul(ctx, case):
    graph = projection(reshape=True) if case == "another layout" else \
        projection(extra_reader=True)
    out = optimised_matches_original(ctx, graph)
    assert "MatMul" in signature(out)
