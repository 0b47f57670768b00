"""Concat: on the channel axis the GPU against glcnn.graph.reference for any channel counts
(slices straddling inputs); along H and W against np.concatenate (fp32, fp16, u8); the reference
against torch.cat; the variant choice; which concats run as tile copies, and that those leave
the whole output atlas as the shader would; refusals."""

import numpy as np
import pytest
import torch
from helpers import PRECISIONS, assert_close, check_op, single_op_graph

import glcnn
from glcnn.commands.torch_runner import TorchRunner
from glcnn.graph import Node, reference
from glcnn.layout import Atlas
from glcnn.ops import make_op

# (channel counts of the inputs, H, W, axis)
CASES = [
    ((1, 3), 3, 4, 1),
    ((1, 3, 5), 5, 3, 1),
    ((13, 1), 4, 4, -3),
    ((5, 4), 3, 5, 1),
    ((4, 8), 3, 5, 1),
    ((4, 8, 5), 2, 7, 1),
    ((2,) * 8, 3, 3, 1),
    ((1, 3, 1, 5, 2, 4, 7, 1), 2, 3, 1),
    ((3,), 3, 4, 1),
    ((1, 1, 1, 1, 1), 1, 1, 1),
]
CASE_IDS = [f"concat-c{'_'.join(map(str, cs))}-hw{h}x{w}" + ("-axis-3" if axis < 0 else "")
            for cs, h, w, axis in CASES]


def _shapes(channels, h, w):
    return [(c, h, w) for c in channels]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("channels", "h", "w", "axis"), CASES, ids=CASE_IDS)
def test_concat_matches_reference(ctx, channels, h, w, axis, precision):
    check_op(ctx, "Concat", {"axis": axis}, _shapes(channels, h, w), precision=precision,
             seed=len(channels))


@pytest.mark.parametrize(("channels", "h", "w", "axis"), CASES, ids=CASE_IDS)
def test_reference_matches_torch(channels, h, w, axis):
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s) for s in _shapes(channels, h, w)]
    names = [f"x{i}" for i in range(len(xs))]
    y = reference.evaluate(Node("Concat", "y", names, {"axis": axis}), dict(zip(names, xs)))
    expected = torch.cat([torch.from_numpy(x)[None] for x in xs], dim=axis)[0].numpy()
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize(("channels", "aligned"), [((4, 8, 5), True), ((8, 3), True),
                                                   ((5, 4), False), ((1, 3), False)])
def test_aligned_variant_only_when_every_slice_is_whole(channels, aligned):
    names = [f"x{i}" for i in range(len(channels))]
    op = make_op(Node("Concat", "y", names, {"axis": 1}), _shapes(channels, 2, 2))
    assert ("ALIGNED" in op.defines()) == aligned
    assert op.uniforms()["u_end"] == tuple(np.cumsum(channels))


# (input shapes, axis, precision, whether the pipeline copies tiles instead of drawing)
COPIES = [
    ([(4, 3, 5), (8, 3, 5)], 1, "fp32", True),
    ([(8, 2, 7), (4, 2, 7), (5, 2, 7)], 1, "fp16", True),  # the last part's spare lanes
    ([(5, 3, 5), (4, 3, 5)], 1, "fp32", False),  # slice 1 mixes both inputs
    ([(13, 3, 5), (13, 1, 5)], 2, "fp32", True),
    ([(3, 2, 9), (3, 2, 4)], 3, "fp16", True),
    ([(4, 3, 5), (8, 3, 5)], 1, "u8", False),  # each tensor has its own ranges
]


@pytest.mark.parametrize(("shapes", "axis", "precision", "copies"), COPIES)
def test_concat_of_whole_texels_runs_as_tile_copies(ctx, shapes, axis, precision, copies):
    """Tile copies where every output texel is one input texel, and then the output texture's
    atlas is exactly what the drawn shader writes, its empty cells zero even when the texture
    held other values before (the pipeline recycles textures)."""
    graph = single_op_graph("Concat", {"axis": axis}, shapes)
    rng = np.random.default_rng(1)
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in graph.inputs.items()}
    if precision == "u8":
        glcnn.calibrate(graph, [feeds], ctx)
    with glcnn.Pipeline(graph, ctx, precision=precision, keep="all") as pipe:
        assert (pipe.passes[0].copies is not None) == copies
        assert (pipe.passes[0].program is None) == copies
        out = pipe.texture("y")
        dtype = {"f4": np.float32, "f2": np.float16, "f1": np.uint8}[out.dtype]
        out.write(np.full((out.height, out.width, 4), 7, dtype))  # stale values
        y = pipe.run(feeds)
        stored = [pipe.read(name) for name in graph.inputs]
        texels = np.frombuffer(out.read(), dtype)
    assert_close(y, np.concatenate([x[None] for x in stored], axis=axis)[0], precision,
                 f"Concat {shapes} axis={axis}")
    if precision != "u8":
        width, height = Atlas.of(y.shape).size
        atlas = texels.reshape(out.height, out.width, 4)[:height, :width]
        np.testing.assert_array_equal(atlas, glcnn.layout.pack(y).astype(atlas.dtype))


def test_tile_copies_merge_neighbouring_tiles():
    """Two 64-channel 8×8 inputs into a 128-channel atlas (6 columns of tiles): tiles next to
    each other in both atlases are one rectangle; every output slice is covered once."""
    op = make_op(Node("Concat", "y", ["a", "b"], {"axis": 1}), [(64, 8, 8), (64, 8, 8)])
    rects = op.tile_copies()
    assert rects[:2] == [(0, 0, 0, 0, 0, 32, 8), (0, 0, 8, 32, 0, 16, 8)]
    covered = np.zeros((6 * 8, 6 * 8), int)
    for _, _, _, dx, dy, w, h in rects:
        covered[dy:dy + h, dx:dx + w] += 1
    assert covered.sum() == 32 * 64 and covered.max() == 1
    assert covered[40:, 16:].sum() == 0  # slices 32-35: the atlas's empty cells


def test_fused_epilogue_keeps_the_shader():
    op = make_op(Node("Concat", "y", ["a", "b"], {"axis": 1, "activation": {"op": "Relu"}}),
                 [(4, 2, 2), (4, 2, 2)])
    assert op.tile_copies() is None


# (input shapes, axis) along H or W: the other two axes agree.
SPATIAL = [
    ([(6, 1, 1200), (6, 1, 300), (6, 1, 75)], 3),  # a YOLO head; ≤ 4096 texels wide
    ([(5, 3, 2), (5, 3, 7)], -1),
    ([(13, 3, 5), (13, 1, 5), (13, 7, 5)], 2),
    ([(3, 2, 9), (3, 5, 9)], -2),
    ([(2, k, 3) for k in range(1, 9)], 2),
    ([(7, 1, 1), (7, 1, 3)], 3),
    ([(5, 4, 3)], 2),
]
SPATIAL_IDS = ["concat-axis{}-{}".format(axis, "+".join("x".join(map(str, s)) for s in shapes))
               for shapes, axis in SPATIAL]


def run_gpu(ctx, shapes, axis, precision):
    """Concat alone on the GPU: (output, the inputs as their textures hold them); u8 is
    calibrated on the sample it runs (as tests/ops/test_transpose.py)."""
    graph = single_op_graph("Concat", {"axis": axis}, shapes)
    rng = np.random.default_rng(len(shapes))
    feeds = {name: (rng.standard_normal(s) * (i + 1)).astype(np.float32)
             for i, (name, s) in enumerate(zip(graph.inputs, shapes))}
    if precision == "u8":
        glcnn.calibrate(graph, [feeds], ctx)
    with glcnn.Pipeline(graph, ctx, precision=precision, keep="all") as pipe:
        return pipe.run(feeds), [pipe.read(name) for name in graph.inputs]


@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
@pytest.mark.parametrize(("shapes", "axis"), SPATIAL, ids=SPATIAL_IDS)
def test_concat_along_h_and_w_matches_numpy(ctx, shapes, axis, precision):
    y, stored = run_gpu(ctx, shapes, axis, precision)
    expected = np.concatenate([x[None] for x in stored], axis=axis)[0]
    assert_close(y, expected, precision, f"Concat axis={axis} inputs={shapes}")


@pytest.mark.parametrize("precision", ["u8"])
@pytest.mark.parametrize(("channels", "h", "w", "axis"), CASES[:4], ids=CASE_IDS[:4])
def test_concat_channels_in_u8(ctx, channels, h, w, axis, precision):
    y, stored = run_gpu(ctx, _shapes(channels, h, w), axis, precision)
    assert_close(y, np.concatenate(stored, axis=0), precision, f"Concat {channels} {h}x{w}")


@pytest.mark.parametrize(("shapes", "axis"), SPATIAL, ids=SPATIAL_IDS)
def test_reference_along_h_and_w_matches_torch(shapes, axis):
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s) for s in shapes]
    names = [f"x{i}" for i in range(len(xs))]
    y = reference.evaluate(Node("Concat", "y", names, {"axis": axis}), dict(zip(names, xs)))
    expected = torch.cat([torch.from_numpy(x)[None] for x in xs], dim=axis)[0].numpy()
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize(("shapes", "axis"), SPATIAL, ids=SPATIAL_IDS)
def test_torch_runner_along_h_and_w_matches_numpy(shapes, axis):
    graph = single_op_graph("Concat", {"axis": axis}, shapes)
    xs = {name: np.random.default_rng(i).standard_normal(s).astype(np.float32)
          for i, (name, s) in enumerate(graph.inputs.items())}
    y = TorchRunner(graph, threads=1)(xs)["y"]
    np.testing.assert_array_equal(y, np.concatenate([x[None] for x in xs.values()], axis)[0])


@pytest.mark.parametrize(("axis", "define"), [(2, "ALONG_H"), (-2, "ALONG_H"), (3, "ALONG_W"),
                                              (-1, "ALONG_W")])
def test_spatial_axes_pick_their_variant(axis, define):
    op = make_op(Node("Concat", "y", ["x0", "x1"], {"axis": axis}), [(4, 2, 2), (4, 2, 2)])
    assert op.defines() == {"INPUTS": 2, define: 1}
    assert op.uniforms()["u_end"] == (2, 4)
    assert op.output_shape() == ((4, 4, 2) if define == "ALONG_H" else (4, 2, 4))


ERRORS = [
    ({"axis": 4}, [(3, 4, 4)] * 2, glcnn.UnsupportedOpError, "axis=4", "axis-past-w"),
    ({"axis": 2}, [(3, 4, 4), (4, 4, 4)], glcnn.ShapeError, "differ in C, W", "h-c-mismatch"),
    ({"axis": -1}, [(3, 4, 4), (3, 5, 4)], glcnn.ShapeError, "differ in C, H", "w-h-mismatch"),
    ({"axis": 0}, [(3, 4, 4)] * 2, glcnn.UnsupportedOpError, "axis=0", "axis-batch"),
    ({"axis": 1}, [(1, 4, 4)] * 9, glcnn.UnsupportedOpError, "9 inputs", "nine-inputs"),
    ({"axis": 1}, [(3, 4, 4), (3, 4, 5)], glcnn.ShapeError, "differ in H, W", "w-mismatch"),
]


@pytest.mark.parametrize(("attrs", "shapes", "error", "message"), [e[:4] for e in ERRORS],
                         ids=[e[4] for e in ERRORS])
def test_refused(attrs, shapes, error, message):
    names = [f"x{i}" for i in range(len(shapes))]
    with pytest.raises(error, match=message) as info:
        make_op(Node("Concat", "layer_under_test", names, attrs), shapes)
    assert "'layer_under_test'" in str(info.value)
