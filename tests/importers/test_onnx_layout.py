"""ONNX tensors of rank 3, 5 and 6 (glcnn/importers/onnx_layout.py) and the ops that only
move elements (onnx_moves.py), against onnxruntime at fp32.

Each model is made with onnx.helper: a 4-D image input, a Conv so the data is not the input
itself, then the layout ops, and often a Conv or elementwise op after them so that a wrong
layout shows in the values. Also: which layout ops run no pass at all (aliases), and the
errors for what stays unsupported.
"""

import numpy as np
import pytest
from onnx import helper, numpy_helper
from onnx_models import conv_then, matches_onnxruntime
from onnx_models import int_const as const

from glcnn.errors import UnsupportedOpError
from glcnn.importers import onnx as onnx_importer

pytestmark = pytest.mark.gl

RNG = np.random.default_rng(7)


def model(tmp_path, nodes, out_shape, inits=(), x_shape=(1, 3, 8, 10), name="m.onnx"):
    return conv_then(tmp_path, nodes, out_shape, inits, x_shape, name=name, rng=RNG)


def check(path, x_shape=(1, 3, 8, 10)):
    return matches_onnxruntime(path, x_shape, RNG)


def test_reshape_to_rank3_and_transpose_flips_layout_for_free(tmp_path):
    """(1, 6, 8, 10) -> (1, 6, 80) -> Transpose (1, 80, 6): one Rearrange, the transpose is
    an alias, and the output comes back as ONNX's (1, 80, 6)."""
    nodes = [helper.make_node("Reshape", ["c", "s"], ["r"]),
             helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 1])]
    ops = check(model(tmp_path, nodes, [1, 80, 6], [const("s", [1, 6, 80])]))
    assert ops.count("Rearrange") == 1 and "Transpose" not in ops


def test_channels_last_sequence_feeds_per_channel_ops(tmp_path):
    """A (1, L, C) sequence: + bias over C, Softmax over C, then back to (1, C, L)."""
    bias = RNG.standard_normal(6).astype(np.float32)
    nodes = [helper.make_node("Reshape", ["c", "s"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Add", ["t", "b"], ["a"]),
             helper.make_node("Softmax", ["a"], ["sm"], axis=-1),
             helper.make_node("Transpose", ["sm"], ["y"], perm=[0, 2, 1])]
    check(model(tmp_path, nodes, [1, 6, 80], [const("s", [1, 6, 80]),
                                              numpy_helper.from_array(bias, "b")]))


def test_concat_along_sequence_of_rank3(tmp_path):
    """YOLO heads: reshape each level to (1, C, L_i), concat along L, transpose."""
    nodes = [helper.make_node("Reshape", ["c", "s1"], ["r1"]),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Reshape", ["p", "s2"], ["r2"]),
             helper.make_node("Concat", ["r1", "r2"], ["cat"], axis=2),
             helper.make_node("Transpose", ["cat"], ["y"], perm=[0, 2, 1])]
    check(model(tmp_path, nodes, [1, 100, 6], [const("s1", [1, 6, 80]),
                                               const("s2", [1, 6, 20])]))


def test_rank5_attention_split_of_heads(tmp_path):
    """The SVTR attention reshape: (1, T, 3·h·d) -> (1, T, 3, h, d) -> perm (2, 0, 3, 1, 4)
    -> slice one of q, k, v -> squeeze -> (1, h, T, d); then back to rank 4 image order."""
    x_shape = (1, 9, 1, 10)  # Conv -> 12 channels = 3·2·2, T = 10
    nodes = [helper.make_node("Squeeze", ["c", "ax2"], ["sq"]),
             helper.make_node("Transpose", ["sq"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Reshape", ["t", "s"], ["r5"]),
             helper.make_node("Transpose", ["r5"], ["p"], perm=[2, 0, 3, 1, 4]),
             helper.make_node("Slice", ["p", "st", "en", "ax0"], ["k5"]),
             helper.make_node("Squeeze", ["k5", "ax0"], ["y"])]
    inits = [const("ax2", [2]), const("s", [1, 10, 3, 2, 2]), const("st", [1]),
             const("en", [2]), const("ax0", [0])]
    ops = check(model(tmp_path, nodes, [1, 2, 10, 2], inits, x_shape), x_shape)
    assert "Rearrange" in ops


def test_slice_steps_on_channels_and_gather(tmp_path):
    """Slice with step 2 on the channel axis, then Gather of one row (drops the axis)."""
    nodes = [helper.make_node("Slice", ["c", "st", "en", "ax", "sp"], ["s"]),
             helper.make_node("Gather", ["s", "i"], ["y"], axis=2)]
    inits = [const("st", [1]), const("en", [6]), const("ax", [1]), const("sp", [2]),
             const("i", 3)]
    check(model(tmp_path, nodes, [1, 3, 10], inits))


def test_split_and_expand(tmp_path):
    """Split along H into 3 + 5 rows, a Conv-free Expand of the 3-row part along W."""
    nodes = [helper.make_node("Split", ["c", "sizes"], ["a", "b"], axis=2),
             helper.make_node("ReduceMax", ["a"], ["m"], axes=[3], keepdims=1),
             helper.make_node("Expand", ["m", "shape"], ["e"]),
             helper.make_node("Concat", ["e", "b"], ["y"], axis=2)]
    inits = [const("sizes", [3, 5]), const("shape", [1, 6, 3, 10])]
    check(model(tmp_path, nodes, [1, 6, 8, 10], inits))


def test_squeeze_to_sequence_is_an_alias(tmp_path):
    """(1, C, 1, L) -> (1, C, L) moves no element: no pass runs for it."""
    x_shape = (1, 3, 1, 12)
    nodes = [helper.make_node("Squeeze", ["c", "ax"], ["y"])]
    ops = check(model(tmp_path, nodes, [1, 6, 12], [const("ax", [2])], x_shape), x_shape)
    assert ops == ["Conv"]


def test_yolox_style_head_graph_layouts(tmp_path):
    """The importer's graph (no GL): a rank-3 output stored channels last is named in meta
    so run() and diff can restore ONNX's order."""
    nodes = [helper.make_node("Reshape", ["c", "s"], ["r"]),
             helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 1])]
    graph = onnx_importer.load(model(tmp_path, nodes, [1, 80, 6], [const("s", [1, 6, 80])]))
    assert graph.meta["channels_last_outputs"] == ["y"]


def test_unsupported_layouts_name_the_node(tmp_path):
    """Gather with scattered indices and a rank-4 tensor with batch 2 are refused clearly."""
    nodes = [helper.make_node("Gather", ["c", "i"], ["y"], axis=1)]
    path = model(tmp_path, nodes, [1, 3, 8, 10], [const("i", [0, 4, 1])])
    with pytest.raises(UnsupportedOpError, match=r"Gather.*1-D range"):
        onnx_importer.load(path)
    nodes = [helper.make_node("Reshape", ["c", "s"], ["y"])]
    path = model(tmp_path, nodes, [2, 3, 8, 10], [const("s", [2, 3, 8, 10])], name="b.onnx")
    with pytest.raises(UnsupportedOpError, match="batch size 2"):
        onnx_importer.load(path)


def test_tile_repeats_each_axis(tmp_path):
    """Tile (1, 6, 8, 10) by (1, 2, 1, 3): whole-tensor repeats along C and W."""
    nodes = [helper.make_node("Tile", ["c", "r"], ["y"])]
    check(model(tmp_path, nodes, [1, 12, 8, 30], [const("r", [1, 2, 1, 3])]))


@pytest.mark.parametrize(("block", "x_shape"), [(2, (1, 3, 8, 10)), (3, (1, 2, 9, 6)),
                                                (4, (1, 1, 8, 12))], ids=["b2", "b3", "b4"])
def test_space_to_depth(tmp_path, block, x_shape):
    """SpaceToDepth: channel (by·b + bx)·C + c of the output reads c at (y·b + by, x·b + bx),
    one Rearrange; after it a Conv mixes the channels so a wrong order shows."""
    _, c, h, w = x_shape
    c += 3  # conv_then's Conv widens C by 3
    out_c = c * block * block
    mix = RNG.standard_normal((5, out_c, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("SpaceToDepth", ["c"], ["s"], blocksize=block),
             helper.make_node("Conv", ["s", "mix"], ["y"])]
    ops = check(model(tmp_path, nodes, [1, 5, h // block, w // block],
                      [numpy_helper.from_array(mix, "mix")], x_shape), x_shape)
    assert ops.count("Rearrange") == 1


def test_space_to_depth_needs_divisible_sizes(tmp_path):
    nodes = [helper.make_node("SpaceToDepth", ["c"], ["y"], blocksize=3)]
    path = model(tmp_path, nodes, [1, 54, 2, 3])
    with pytest.raises(UnsupportedOpError, match=r"SpaceToDepth.*height 8 and width 10 must be "
                                                 r"multiples of blocksize 3"):
        onnx_importer.load(path)


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("form", ["tensors", "broadcast", "constant", "constant-first"])
def test_max_min_of_two(tmp_path, op, form):
    """Max / Min of two tensors (same shape, or a (1, C, 1, W) one broadcast), or of a
    tensor and a constant (either side): the glcnn Max / Min, no Clip."""
    inits, second = [], "c"
    nodes = []
    if form == "tensors":
        nodes.append(helper.make_node("Tanh", ["c"], ["n"]))
        second = "n"
    elif form == "broadcast":
        nodes.append(helper.make_node("ReduceMean", ["c"], ["n"], axes=[2], keepdims=1))
        second = "n"
    else:
        k = RNG.standard_normal((1, 6, 1, 10)).astype(np.float32)
        inits.append(numpy_helper.from_array(k, "k"))
        second = "k"
    pair = [second, "c"] if form == "constant-first" else ["c", second]
    nodes.append(helper.make_node(op, pair, ["y"]))
    ops = check(model(tmp_path, nodes, [1, 6, 8, 10], inits))
    assert op in ops and "Clip" not in ops


def test_max_of_three_is_refused(tmp_path):
    nodes = [helper.make_node("Max", ["c", "c", "c"], ["y"])]
    with pytest.raises(UnsupportedOpError, match=r"Max.*has 3 inputs; only Max of exactly 2"):
        onnx_importer.load(model(tmp_path, nodes, [1, 6, 8, 10]))
