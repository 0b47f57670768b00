"""Rearrange (glcnn/ops/rearrange.py), the general element gather, on the GPU (fp32, fp16, u8)
and in the reference, each against the move written directly in numpy (reshape, transpose,
slicing, broadcast_to), never against glcnn's own index arithmetic; its attribute checks."""

import itertools

import numpy as np
import pytest
from helpers import assert_close, single_op_graph

import glcnn
from glcnn.commands.torch_runner import TorchRunner
from glcnn.graph import Node, reference
from glcnn.graph.reference_ops import rearrange_indices
from glcnn.ops import make_op
from glcnn.ops.rearrange import merge_dims


def onnx_strides(dims):
    """Row-major element strides of an array of `dims`."""
    return [int(np.prod(dims[k + 1:])) for k in range(len(dims))]


def transpose_case(dims, perm):
    """A rank-5/6 ONNX (d0, ..., dk) stored flat as glcnn (d0·…·d(k-2), d(k-1), dk), transposed."""
    out = [dims[p] for p in perm]
    attrs = {"shape": [int(np.prod(out[:-2])), out[-2], out[-1]], "dims": out,
             "strides": [onnx_strides(dims)[p] for p in perm], "offset": 0}
    in_shape = (int(np.prod(dims[:-2])), dims[-2], dims[-1])
    return in_shape, attrs, lambda x: x.reshape(dims).transpose(perm).reshape(attrs["shape"])


def seq_transpose_case(c, length):
    """ONNX (1, C, L) stored (C, 1, L) → (1, L, C) stored flat as (L, 1, C)."""
    attrs = {"shape": [length, 1, c], "dims": [length, c], "strides": [1, length]}
    return (c, 1, length), attrs, lambda x: x[:, 0, :].T[:, None, :]


def slice_case():
    """x[1:12:3, 1::2, 2:9:3] of a (13, 5, 9) tensor."""
    attrs = {"shape": [4, 2, 3], "dims": [4, 2, 3], "strides": [3 * 45, 2 * 9, 3],
             "offset": 45 + 9 + 2}
    return (13, 5, 9), attrs, lambda x: x[1:12:3, 1::2, 2:9:3]


def gather_row_case():
    """ONNX Gather(axis=2, index 2) of (1, 5, 4, 6) → (1, 5, 6), stored flat as (5, 1, 6)."""
    attrs = {"shape": [5, 1, 6], "dims": [5, 6], "strides": [24, 1], "offset": 2 * 6}
    return (5, 4, 6), attrs, lambda x: x[:, 2, :][:, None, :]


def gather_channel_case():
    """ONNX Gather(axis=1, index 3) of (1, 5, 4, 6) → (1, 4, 6), stored flat as (4, 1, 6)."""
    attrs = {"shape": [4, 1, 6], "dims": [4, 6], "strides": [6, 1], "offset": 3 * 24}
    return (5, 4, 6), attrs, lambda x: x[3][:, None, :]


def expand_case(in_shape, out_shape):
    """ONNX Expand of (1, C, H, W) to (1, C', H', W'): stride 0 on the broadcast axes."""
    strides = [0 if n == 1 and m > 1 else s
               for n, m, s in zip(in_shape, out_shape, onnx_strides(in_shape))]
    attrs = {"shape": list(out_shape), "dims": list(out_shape), "strides": strides}
    return in_shape, attrs, lambda x: np.broadcast_to(x, out_shape)


def channels_last_reshape_case(length, c, target):
    """ONNX (1, L, C) channels last, stored (C, 1, L) (element (l, c) at c·L + l), reshaped to
    ONNX (1, *target) stored flat: output index → ONNX flat index l·C + c → storage."""
    shape = [target[0], 1, target[1]] if len(target) == 2 else list(target)
    attrs = {"shape": shape, "dims": [length * c], "strides": [1],
             "dims2": [length, c], "strides2": [1, length]}
    return (c, 1, length), attrs, lambda x: x[:, 0, :].T.reshape(shape)


def split_case():
    """The second part of ONNX Split(axis=3, [4, 5]) of (1, 3, 2, 9): (1, 3, 2, 5)."""
    attrs = {"shape": [3, 2, 5], "dims": [3, 2, 5], "strides": [18, 9, 1], "offset": 4}
    return (3, 2, 9), attrs, lambda x: x[:, :, 4:]


CASES = {
    "transpose5-c30": transpose_case((2, 3, 5, 4, 7), (0, 3, 1, 4, 2)),
    "transpose5-c13": transpose_case((1, 13, 3, 2, 5), (0, 4, 2, 1, 3)),
    "transpose6-shuffle": transpose_case((1, 2, 2, 3, 4, 5), (0, 3, 4, 1, 5, 2)),
    # long sequences (a YOLOX head is 6 × 3549) kept within the 4096-texel side of
    # tests/runtime/test_drivers.py's small-limits driver: 2 slices × 2000 = 4000
    "seq-6x2000": seq_transpose_case(6, 2000),
    "seq-2000x6": transpose_case((1, 2000, 1, 1, 6), (0, 4, 2, 3, 1)),
    "seq-5x13": seq_transpose_case(5, 13),
    "slice-strided": slice_case(),
    "gather-row": gather_row_case(),
    "gather-channel": gather_channel_case(),
    "expand-c3": expand_case((3, 1, 1), (3, 4, 5)),
    "expand-w7": expand_case((1, 1, 7), (5, 2, 7)),
    "reshape-cl-6x10": channels_last_reshape_case(6, 10, (4, 3, 5)),
    "reshape-cl-7x13": channels_last_reshape_case(7, 13, (13, 7)),
    "split": split_case(),
}


def run_gpu(ctx, in_shape, attrs, precision):
    """The Rearrange alone on the GPU: (output, the input as its texture holds it); u8 is
    calibrated on the sample it runs (as tests/ops/test_transpose.py)."""
    graph = single_op_graph("Rearrange", attrs, [in_shape])
    x = np.random.default_rng(len(in_shape) + sum(in_shape)).standard_normal(in_shape) * 3
    feeds = {"x0": x.astype(np.float32)}
    if precision == "u8":
        glcnn.calibrate(graph, [feeds], ctx)
    with glcnn.Pipeline(graph, ctx, precision=precision, keep="all") as pipe:
        return pipe.run(feeds), pipe.read("x0")


@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
@pytest.mark.parametrize("case", CASES)
def test_rearrange_matches_numpy(ctx, case, precision):
    in_shape, attrs, expected = CASES[case]
    y, stored = run_gpu(ctx, in_shape, attrs, precision)
    assert_close(y, expected(stored.astype(np.float64)), precision,
                 f"Rearrange {case} input {in_shape} attrs {attrs}")


@pytest.mark.parametrize("case", ["transpose5-c30", "slice-strided", "reshape-cl-6x10"])
def test_rearrange_is_exact_in_fp32(ctx, case):
    """A gather: every value moves unchanged."""
    in_shape, attrs, expected = CASES[case]
    y, stored = run_gpu(ctx, in_shape, attrs, "fp32")
    np.testing.assert_array_equal(y, expected(stored))


@pytest.mark.parametrize("case", CASES)
def test_reference_matches_numpy(case):
    in_shape, attrs, expected = CASES[case]
    x = np.random.default_rng(0).standard_normal(in_shape)
    y = reference.evaluate(Node("Rearrange", "y", ["x"], attrs), {"x": x})
    np.testing.assert_array_equal(y, expected(x))


@pytest.mark.parametrize("case", CASES)
def test_torch_runner_matches_numpy(case):
    in_shape, attrs, expected = CASES[case]
    x = np.random.default_rng(1).standard_normal(in_shape).astype(np.float32)
    y = TorchRunner(single_op_graph("Rearrange", attrs, [in_shape]), threads=1)({"x0": x})["y"]
    np.testing.assert_array_equal(y, expected(x))


@pytest.mark.parametrize("case", CASES)
def test_merged_index_map_is_the_same_map(case):
    """What the shader gets (dims merged, a one-dim second stage folded) indexes as given."""
    in_shape, attrs, _ = CASES[case]
    op = make_op(Node("Rearrange", "y", ["x"], attrs), [in_shape])
    dims, strides, offset, dims2, strides2 = op.index_map()
    count = int(np.prod(attrs["shape"]))
    given = rearrange_indices(count, attrs["dims"], attrs["strides"], attrs.get("offset", 0),
                              attrs.get("dims2"), attrs.get("strides2"))
    merged = rearrange_indices(count, dims, strides, offset, dims2 or None, strides2 or None)
    np.testing.assert_array_equal(merged, given)
    assert len(dims) <= len(attrs["dims"])
    assert (op.defines()["RANK"], op.defines()["RANK2"]) == (len(dims), len(dims2))


def test_merge_drops_unit_dims_and_joins_contiguous_ones():
    assert merge_dims([1, 3, 4, 1, 5], [7, 20, 5, 99, 1]) == ([60], [1])
    assert merge_dims([2, 3], [1, 2]) == ([2, 3], [1, 2])
    assert merge_dims([4, 6], [0, 0]) == ([24], [0])
    assert merge_dims([1, 1], [5, 5]) == ([1], [0])


def test_all_six_dims_reach_the_shader(ctx):
    """A map that merges to six dims: every slot of u_dims is used."""
    dims = (2, 3, 2, 3, 2, 3)
    perm = (5, 3, 1, 4, 2, 0)
    in_shape = (int(np.prod(dims[:-2])), dims[-2], dims[-1])
    out = [dims[p] for p in perm]
    attrs = {"shape": [int(np.prod(out[:-2])), out[-2], out[-1]], "dims": out,
             "strides": [onnx_strides(dims)[p] for p in perm]}
    assert make_op(Node("Rearrange", "y", ["x"], attrs), [in_shape]).defines()["RANK"] == 6
    y, stored = run_gpu(ctx, in_shape, attrs, "fp32")
    np.testing.assert_array_equal(y, stored.reshape(dims).transpose(perm).reshape(attrs["shape"]))


def test_integer_division_beyond_2_to_the_21(ctx):
    """Indices of 2^21 and more are divided as integers (no SMALL_INDICES): a (C, W, H)
    transpose of 2.1 M elements, and a two-stage (channels-last) reshape. (Graph.validate holds
    any attribute named `strides` to at most 65536.)"""
    swap = ((520, 64, 64), {"shape": [520, 64, 64], "dims": [520, 64, 64],
                            "strides": [4096, 1, 64]}, lambda x: x.transpose(0, 2, 1))
    two_stage = ((520, 64, 64), {"shape": [520, 64, 64], "dims": [520 * 4096], "strides": [1],
                                 "dims2": [4096, 520], "strides2": [1, 4096]},
                 lambda x: x.reshape(520, 4096).T.reshape(520, 64, 64))
    for in_shape, attrs, expected in [swap, two_stage]:
        assert "SMALL_INDICES" not in make_op(Node("Rearrange", "y", ["x"], attrs),
                                              [in_shape]).defines()
        y, stored = run_gpu(ctx, in_shape, attrs, "fp32")
        np.testing.assert_array_equal(y, expected(stored))


def test_every_index_pattern_of_a_small_permutation(ctx):
    """All 24 axis orders of a (2, 3, 5, 7) tensor stored as (6, 5, 7), in one pass each."""
    dims = (2, 3, 5, 7)
    for perm in itertools.permutations(range(4)):
        out = [dims[p] for p in perm]
        attrs = {"shape": [out[0] * out[1], out[2], out[3]], "dims": out,
                 "strides": [onnx_strides(dims)[p] for p in perm]}
        y, stored = run_gpu(ctx, (6, 5, 7), attrs, "fp32")
        np.testing.assert_array_equal(
            y, stored.reshape(dims).transpose(perm).reshape(attrs["shape"]), str(perm))


BASE = {"shape": [2, 3, 4], "dims": [24], "strides": [1]}
ERRORS = [
    ({**BASE, "dims": [5, 5], "strides": [5, 1]}, (2, 3, 4), glcnn.ShapeError, "hold 25 elements",
     "product"),
    ({**BASE, "strides": [1, 1]}, (2, 3, 4), glcnn.UnsupportedOpError, "same length",
     "lengths"),
    ({**BASE, "strides": [-1]}, (2, 3, 4), glcnn.UnsupportedOpError, "must be >= 0",
     "negative-stride"),
    ({**BASE, "offset": -2}, (2, 3, 4), glcnn.UnsupportedOpError, "offset=-2 must be >= 0",
     "negative-offset"),
    ({**BASE, "dims": [24, 0], "strides": [1, 1]}, (2, 3, 4), glcnn.UnsupportedOpError,
     "must be >= 1", "zero-dim"),
    ({**BASE, "offset": 1}, (2, 3, 4), glcnn.ShapeError, "reaches input element 24",
     "past-the-end"),
    ({**BASE, "dims": [1] * 6 + [24], "strides": [0] * 6 + [1]}, (2, 3, 4),
     glcnn.UnsupportedOpError, "1 to 6", "seven-dims"),
    ({**BASE, "shape": [2, 12]}, (2, 3, 4), glcnn.UnsupportedOpError, "output \\(C, H, W\\)",
     "shape-rank"),
    ({**BASE, "strides": [1.5]}, (2, 3, 4), glcnn.UnsupportedOpError, "list of integers",
     "float-stride"),
    ({**BASE, "dims": None}, (2, 3, 4), glcnn.UnsupportedOpError, "list of integers",
     "missing-dims"),
    ({**BASE, "dims2": [4, 5], "strides2": [1, 4]}, (2, 3, 4), glcnn.ShapeError,
     "dims2=\\[4, 5\\] hold 20", "stage-two-too-small"),
    ({**BASE, "dims2": [24]}, (2, 3, 4), glcnn.UnsupportedOpError, "strides2=None",
     "stage-two-half"),
    ({"shape": [2, 1, 1], "dims": [2], "strides": [1 << 31]}, (8, 1, 1), glcnn.ShapeError,
     "reaches input element 2147483648", "beyond-int"),
    ({**BASE, "dims2": [1 << 20, 1 << 12], "strides2": [0, 0]}, (2, 3, 4), glcnn.ShapeError,
     "at most 2\\^31 - 1", "stage-two-beyond-int"),
]


@pytest.mark.parametrize(("attrs", "in_shape", "error", "message"), [e[:4] for e in ERRORS],
                         ids=[e[4] for e in ERRORS])
def test_bad_attributes_name_the_layer(attrs, in_shape, error, message):
    node = Node("Rearrange", "layer_under_test", ["x0"], attrs)
    with pytest.raises(error, match=message) as info:
        make_op(node, [in_shape])
    assert "'layer_under_test' (Rearrange)" in str(info.value)


# (input shape, first channel, channels taken, whether the pipeline copies tiles): a window of
# whole slices is moved texel for texel (YOLOv8's C2f Split); one that mixes slices is drawn.
WINDOWS = [
    ((32, 6, 7), 16, 16, True),   # the second half
    ((32, 6, 7), 0, 12, True),    # the first 3 slices of 8
    ((14, 5, 9), 8, 6, True),     # to the last channel: the input's spare lanes are zero too
    ((14, 5, 9), 4, 6, False),    # 6 channels ending mid-slice: lanes 10, 11 of slice 2 differ
    ((16, 5, 9), 2, 8, False),    # starting mid-slice
]


@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
@pytest.mark.parametrize(("in_shape", "first", "count", "copies"), WINDOWS)
def test_channel_window_of_whole_slices_runs_as_tile_copies(ctx, in_shape, first, count, copies,
                                                            precision):
    """Channels first .. first + count - 1 (a contiguous Rearrange) against numpy; as tile
    copies where aligned (never in u8, whose tensors have their own ranges), the output atlas
    exactly what the shader writes, its empty cells zero over stale values."""
    c, h, w = in_shape
    attrs = {"shape": [count, h, w], "dims": [count * h * w], "strides": [1],
             "offset": first * h * w}
    graph = single_op_graph("Rearrange", attrs, [in_shape])
    feeds = {"x0": np.random.default_rng(c + first).standard_normal(in_shape).astype(np.float32)}
    if precision == "u8":
        glcnn.calibrate(graph, [feeds], ctx)
    with glcnn.Pipeline(graph, ctx, precision=precision, keep="all") as pipe:
        assert (pipe.passes[0].copies is not None) == (copies and precision != "u8")
        out = pipe.texture("y")
        dtype = {"f4": np.float32, "f2": np.float16, "f1": np.uint8}[out.dtype]
        out.write(np.full((out.height, out.width, 4), 7, dtype))  # stale values
        y = pipe.run(feeds)
        stored = pipe.read("x0")
        texels = np.frombuffer(out.read(), dtype)
    assert_close(y, stored[first:first + count], precision, f"window {first}+{count} {in_shape}")
    if precision != "u8":
        np.testing.assert_array_equal(y, stored[first:first + count])
        width, height = glcnn.layout.Atlas.of(y.shape).size
        atlas = texels.reshape(out.height, out.width, 4)[:height, :width]
        np.testing.assert_array_equal(atlas, glcnn.layout.pack(y).astype(atlas.dtype))
