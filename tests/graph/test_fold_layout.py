"""fold_layout.fold_input_transposes: an NHWC model input's Transpose to NCHW (tf2onnx's first
node) leaves the graph; glcnn holds the input (C, H, W) and transposes the model's own
(1, H, W, C) arrays as it uploads them.

The GPU checks run the folded graph and compare it with the reference of the original graph
(the Transpose included) on the same NHWC array; onnxruntime and torch check `glcnn bench` and
`glcnn diff`, which feed onnxruntime the model's own layout back from glcnn's (C, H, W) and
torch the graph it runs with the same fold.
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
from glcnn.graph.fold_layout import fold_input_transposes
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
    assert first is None and [r.layer for r in rows if r.compared] == ["x", "relu", "y"]
