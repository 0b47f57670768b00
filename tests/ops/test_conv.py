"""Conv and ConvTranspose against glcnn.graph.reference: hypothesis properties, named cases,
errors."""

import math
from dataclasses import dataclass

import moderngl
import numpy as np
import pytest
from helpers import assert_close, check_op, single_op_graph, storable
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import glcnn
from glcnn.graph import Node, reference
from glcnn.ops import make_op


@dataclass(frozen=True)
class ConvCase:
    """One Conv/ConvTranspose configuration; `ci`/`co` are input/output channels."""

    op: str
    ci: int
    co: int
    k: tuple = (3, 3)
    s: tuple = (1, 1)
    pads: tuple = (0, 0, 0, 0)
    d: tuple = (1, 1)
    group: int = 1
    out_pad: tuple = (0, 0)
    hw: tuple = (7, 7)
    bias: bool = True

    @property
    def in_shape(self):
        return (self.ci, *self.hw)

    def attrs(self):
        attrs = {"strides": list(self.s), "pads": list(self.pads), "dilations": list(self.d),
                 "group": self.group}
        if self.op == "ConvTranspose":
            attrs["output_padding"] = list(self.out_pad)
        return attrs

    def weights(self, seed=0):
        rng = np.random.default_rng(seed)
        if self.op == "Conv":
            shape = (self.co, self.ci // self.group, *self.k)
        else:
            shape = (self.ci, self.co // self.group, *self.k)
        w = {"W": rng.standard_normal(shape).astype(np.float32)}
        if self.bias:
            w["B"] = rng.standard_normal(self.co).astype(np.float32)
        return w

    def make(self):
        node = Node(self.op, "y", ["x0"], self.attrs(), self.weights())
        return make_op(node, [self.in_shape])

    def id(self, precision):
        def pair(v, sep="x"):
            return str(v[0]) if len(set(v)) == 1 else sep.join(map(str, v))
        name = "conv" if self.op == "Conv" else "convT"
        parts = [name, f"c{self.ci}", f"k{pair(self.k)}", f"s{pair(self.s)}",
                 f"p{pair(self.pads, '_')}"]
        parts += [f"o{self.co}"] if self.co != self.ci else []
        parts += [f"g{self.group}"] if self.group != 1 else []
        parts += [f"d{pair(self.d)}"] if self.d != (1, 1) else []
        parts += [f"op{pair(self.out_pad)}"] if self.out_pad != (0, 0) else []
        parts += [f"hw{self.hw[0]}x{self.hw[1]}"] if self.hw != (7, 7) else []
        parts += [] if self.bias else ["nobias"]
        return "-".join(parts + [precision])


# --- named cases: every shader variant, awkward channel counts, 1×1 images -----------------
C, T = "Conv", "ConvTranspose"
NAMED = [
    (ConvCase(C, 13, 7, s=(2, 2), pads=(1, 1, 1, 1)), "DENSE"),
    (ConvCase(C, 3, 5, k=(1, 1), hw=(1, 1)), "DENSE"),
    (ConvCase(C, 5, 3, pads=(1, 1, 1, 1), hw=(1, 1)), "DENSE"),
    (ConvCase(C, 4, 6, k=(3, 2), s=(2, 1), pads=(0, 1, 2, 0), d=(1, 2), hw=(9, 6)), "DENSE"),
    (ConvCase(C, 1, 1, k=(5, 5), s=(3, 3), hw=(12, 12), bias=False), "DENSE"),
    (ConvCase(C, 8, 8, group=2), "DENSE"),
    (ConvCase(C, 16, 8, group=2, pads=(1, 2, 1, 0)), "DENSE"),
    (ConvCase(C, 12, 12, group=3, s=(2, 2), hw=(5, 8)), "DENSE"),
    (ConvCase(C, 16, 16, group=16, pads=(1, 1, 1, 1)), "DEPTHWISE"),
    (ConvCase(C, 13, 13, k=(5, 5), group=13, pads=(2, 2, 2, 2), d=(2, 2)), "DEPTHWISE"),
    (ConvCase(C, 6, 9, group=3, s=(2, 2), pads=(1, 0, 0, 1)), "GENERIC"),
    (ConvCase(C, 4, 8, group=4, pads=(1, 1, 1, 1)), "GENERIC"),
    (ConvCase(C, 2, 4, k=(1, 3), group=2, hw=(1, 5)), "GENERIC"),
    (ConvCase(T, 13, 7, k=(4, 4), s=(2, 2), pads=(1, 1, 1, 1)), "DENSE"),
    (ConvCase(T, 8, 16, group=2, s=(2, 2), hw=(4, 5)), "DENSE"),
    (ConvCase(T, 100, 16, k=(4, 4), hw=(1, 1), bias=False), "DENSE"),
    (ConvCase(T, 3, 5, k=(2, 3), s=(1, 2), d=(2, 2), out_pad=(1, 1), hw=(1, 1)), "DENSE"),
    (ConvCase(T, 5, 2, k=(1, 1), hw=(1, 1), bias=False), "DENSE"),
    (ConvCase(T, 8, 8, group=8, s=(2, 2), pads=(1, 1, 1, 1), out_pad=(1, 1)), "DEPTHWISE"),
    (ConvCase(T, 6, 9, group=3, s=(3, 3), pads=(0, 1, 1, 0), out_pad=(2, 1)), "GENERIC"),
    (ConvCase(T, 3, 6, k=(3, 1), group=3, s=(2, 1), hw=(5, 1)), "GENERIC"),
]
# Blocked-specific shapes (shaders/common.glsl "Spatial blocking"): outputs narrower or
# shorter than a block, block-sized and ragged edges, strides that leave taps out of a phase.
NAMED += [
    (ConvCase(C, 8, 12, k=(4, 4), s=(2, 2), pads=(1, 1, 1, 1), hw=(16, 16)), "DENSE"),
    (ConvCase(C, 4, 4, hw=(3, 9), pads=(1, 1, 1, 1)), "DENSE"),
    (ConvCase(C, 9, 4, k=(1, 1), hw=(5, 2)), "DENSE"),
    (ConvCase(C, 8, 8, k=(3, 3), s=(3, 3), pads=(2, 0, 1, 2), hw=(13, 11)), "DENSE"),
    (ConvCase(C, 12, 12, k=(7, 7), group=12, s=(2, 2), pads=(3, 3, 3, 3), hw=(9, 17)),
     "DEPTHWISE"),
    (ConvCase(C, 50, 50, k=(5, 5), group=50, pads=(2, 0, 1, 2), hw=(7, 37)), "DEPTHWISE"),
    (ConvCase(C, 52, 52, k=(5, 5), group=52, pads=(2, 2, 2, 2), d=(1, 2), hw=(5, 9)),
     "DEPTHWISE"),
    (ConvCase(C, 8, 8, k=(3, 3), s=(1, 2), d=(2, 2), pads=(2, 1, 2, 1), hw=(9, 10)), "DENSE"),
    (ConvCase(C, 16, 8, k=(1, 1), hw=(6, 11)), "DENSE"),
    (ConvCase(C, 8, 6, k=(1, 1), hw=(7, 45)), "DENSE"),  # from 8 channels, just blocked
    (ConvCase(C, 8, 8, pads=(1, 1, 1, 1), hw=(3, 37)), "DENSE"),  # wide: 1×8 blocks
    (ConvCase(C, 8, 12, s=(2, 2), pads=(1, 1, 1, 1), hw=(4, 70)), "DENSE"),
    # 1×8 blocks reading 34 input columns through 13 taps: past the unrolled copies of
    # conv_block_columns.glsl's #for loops (24 columns, 12 taps), into their remainder loops.
    (ConvCase(C, 8, 8, k=(1, 13), s=(1, 3), pads=(0, 6, 0, 6), hw=(3, 96)), "DENSE"),
    (ConvCase(T, 16, 8, k=(4, 4), s=(2, 2), pads=(1, 1, 1, 1), hw=(8, 8)), "DENSE"),
    (ConvCase(T, 8, 4, k=(3, 3), s=(2, 2), pads=(1, 1, 1, 1), out_pad=(1, 1), hw=(5, 3)), "DENSE"),
    (ConvCase(T, 4, 8, k=(5, 5), s=(3, 3), pads=(2, 1, 0, 2), out_pad=(2, 0), hw=(4, 6)), "DENSE"),
    (ConvCase(T, 12, 8, k=(4, 4), hw=(1, 1)), "DENSE"),
]
STRATEGIES = ("blocked", "direct")
NAMED_PARAMS = [pytest.param(case, variant, p, strategy, id=f"{case.id(p)}-{strategy}")
                for case, variant in NAMED for p in ("fp32", "fp16") for strategy in STRATEGIES]


@pytest.mark.parametrize(("case", "variant", "precision", "strategy"), NAMED_PARAMS)
def test_named_case(ctx, case, variant, precision, strategy):
    assert case.make().variant() == variant, f"{case} should run the {variant} shader"
    check_op(ctx, case.op, case.attrs(), [case.in_shape], case.weights(1), precision,
             strategy=strategy)


# Filters live in buffer textures (texelFetch(samplerBuffer): a quarter of a 2D sample's cost
# on llvmpipe) wherever the GL allows that many texels in one; every case above runs that way.
# Bigger filter banks fall back to 2D textures: the same cases with no buffer allowed.
@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("index", [0, 8, 19, 21, 28, 30], ids=lambda i: NAMED[i][0].id(""))
def test_filters_in_2d_textures_when_no_buffer_is_large_enough(ctx, monkeypatch, index,
                                                                  strategy, precision):
    case = NAMED[index][0]
    graph = single_op_graph(case.op, case.attrs(), [case.in_shape], case.weights(1))
    with glcnn.Pipeline(graph, ctx, strategy=strategy) as pipe:
        filters = dict(pipe.passes[0].weights)["u_weights"]
        assert isinstance(filters, glcnn.runtime.gl.BufferTexture)
    _no_buffers(monkeypatch)
    with glcnn.Pipeline(graph, ctx, strategy=strategy) as pipe:
        assert isinstance(dict(pipe.passes[0].weights)["u_weights"], moderngl.Texture)
    if precision == "u8":
        check_u8(ctx, case, strategy)
    else:
        check_op(ctx, case.op, case.attrs(), [case.in_shape], case.weights(1), precision,
                 strategy=strategy)


# attrs["filters_transposed"] (the conv computing a layer's input gradient, glcnn/train): the
# same results from the other kind of conv's filter layout read transposed (conv_inputs.glsl),
# in buffer and in 2D textures. Every one-group DENSE case above.
TRANSPOSED_FILTERS = [case for case, variant in NAMED if variant == "DENSE" and case.group == 1]


@pytest.mark.parametrize("buffers", [True, False], ids=["buffer", "2d"])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("case", TRANSPOSED_FILTERS, ids=lambda c: c.id("fp32"))
def test_filters_read_transposed_from_the_other_kinds_layout(ctx, monkeypatch, case, strategy,
                                                             buffers):
    attrs = case.attrs() | {"filters_transposed": True}
    weights = case.weights(1)
    op = make_op(Node(case.op, "y", ["x0"], attrs, weights), [case.in_shape])
    other = ConvCase(T if case.op == C else C, case.co, case.ci, case.k)  # same W, other kind
    layout = make_op(Node(other.op, "y", ["x0"], other.attrs(), {"W": weights["W"]}),
                     [other.in_shape]).textures()["u_weights"]
    assert np.array_equal(op.textures()["u_weights"], layout)
    assert op.texture_shapes()["u_weights"] == layout.shape
    if not buffers:
        _no_buffers(monkeypatch)
    check_op(ctx, case.op, attrs, [case.in_shape], case.weights(1), "fp32", strategy=strategy)


def test_filters_transposed_needs_one_group():
    case = ConvCase(C, 8, 8, group=2)
    node = Node(C, "dx:y", ["x0"], case.attrs() | {"filters_transposed": True}, case.weights())
    with pytest.raises(glcnn.UnsupportedOpError, match="dx:y.*filters_transposed needs group=1"):
        make_op(node, [case.in_shape])


@pytest.mark.parametrize(("case", "strategy"), [
    pytest.param(case, strategy, id=f"{case.id('u8')}-{strategy}")
    for case, _ in NAMED for strategy in STRATEGIES])
def test_named_case_u8(ctx, case, strategy):
    """Every named case with range-scaled RGBA8 storage: decode() inside each tap loop."""
    check_u8(ctx, case, strategy)


def check_u8(ctx, case, strategy):
    """`case` calibrated on 4 seeded samples, run in u8 against the float64 reference."""
    graph = single_op_graph(case.op, case.attrs(), [case.in_shape], case.weights(1))
    rng = np.random.default_rng(3)
    feeds = [{"x0": (rng.standard_normal(case.in_shape) * 4).astype(np.float32)}
             for _ in range(4)]
    # The evaluated input is a calibration sample: this measures the shader, not coverage.
    glcnn.calibrate(graph, feeds, ctx)
    ref = reference.run(graph, feeds[0])["y"]
    with glcnn.Pipeline(graph, ctx, precision="u8", strategy=strategy) as pipe:
        assert_close(pipe.run(feeds[0]), ref, "u8", f"{case} seed=3 strategy={strategy}")


@pytest.mark.parametrize(("case", "blocked"), [
    (ConvCase(C, 8, 8, hw=(9, 9)), True),
    (ConvCase(C, 8, 8, k=(7, 7), group=8, hw=(9, 9)), True),
    (ConvCase(C, 8, 8, group=8, hw=(9, 9)), True),  # 3×3 depthwise: shares input columns
    (ConvCase(C, 8, 8, k=(5, 5), group=8, hw=(9, 9)), True),
    (ConvCase(C, 8, 8, k=(2, 2), group=8, hw=(9, 9)), False),  # 2×2 depthwise: too little work
    (ConvCase(C, 8, 8, k=(1, 5), group=8, hw=(9, 9)), False),  # 1×5 depthwise: likewise
    (ConvCase(T, 8, 8, s=(2, 2), hw=(9, 9)), True),
    (ConvCase(C, 8, 8, k=(1, 1), hw=(1, 1)), False),  # one output pixel: nothing to block
    (ConvCase(C, 8, 24, k=(1, 1), hw=(9, 9)), True),  # 1×1 from 8 channels: BLOCK_MIN_WORK
    (ConvCase(C, 4, 24, k=(1, 1), hw=(9, 9)), False),  # 1×1 from 4: too little work
    (ConvCase(T, 16, 8, k=(4, 4), hw=(1, 1)), False),  # 1×1 input: a dense layer
    (ConvCase(C, 6, 9, group=3), False),  # GENERIC
    (ConvCase(T, 8, 8, s=(2, 1), hw=(9, 9)), False),  # strides differ: no common phase step
    (ConvCase(T, 8, 8, d=(2, 2), hw=(9, 9)), False),  # MASK_TAPS
], ids=lambda v: v.id("") if isinstance(v, ConvCase) else str(v))
def test_which_layers_run_blocked(ctx, case, blocked):
    graph = single_op_graph(case.op, case.attrs(), [case.in_shape], case.weights())
    with glcnn.Pipeline(graph, ctx, strategy="blocked") as pipe:
        assert ("y" in pipe.blocking) == blocked
    with glcnn.Pipeline(graph, ctx, strategy="direct") as pipe:
        assert pipe.blocking == {}


@pytest.mark.parametrize("shape", [(4, 2), (1, 8), (3, 1), (2, 2)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_other_block_shapes(ctx, monkeypatch, shape):
    """The named cases with other (rows, cols) blocks than the default."""
    monkeypatch.setattr(glcnn.runtime.plan, "BLOCK_SHAPE", shape)
    monkeypatch.setattr(glcnn.runtime.plan, "WIDE_BLOCK_SHAPE", shape)
    for case, _ in NAMED:
        check_op(ctx, case.op, case.attrs(), [case.in_shape], case.weights(2), strategy="blocked")


@pytest.mark.parametrize(("width", "block"), [(31, (2, 4)), (32, (1, 8)), (70, (1, 8))])
def test_block_shape_follows_the_output_width(ctx, width, block):
    case = ConvCase(C, 8, 8, pads=(1, 1, 1, 1), hw=(5, width))
    graph = single_op_graph(case.op, case.attrs(), [case.in_shape], case.weights())
    with glcnn.Pipeline(graph, ctx, strategy="blocked") as pipe:
        blocking = pipe.blocking["y"]
        assert (blocking.block_y, blocking.block_x) == block


def test_blocked_targets_over_the_texture_limit_are_refused(ctx, monkeypatch):
    monkeypatch.setattr(glcnn.layout.Blocking, "size", property(lambda self: (8, 10**6)))
    case = ConvCase(C, 8, 8, hw=(9, 9))
    graph = single_op_graph(case.op, case.attrs(), [case.in_shape], case.weights())
    with pytest.raises(glcnn.TextureSizeError, match="'y'.*blocked.*strategy='direct'"):
        glcnn.Pipeline(graph, ctx, strategy="blocked")


@pytest.mark.parametrize("threads", [2, 3, 4, 8])
@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
def test_outputs_with_fewer_slices_than_threads_are_cut_into_bands(ctx, monkeypatch, threads,
                                                                     precision):
    """An RGB output's blocked tile is cut into bands (one screen tile per llvmpipe thread);
    rows that do not divide evenly leave the last band short."""
    monkeypatch.setenv("LP_NUM_THREADS", str(threads))
    cases = [ConvCase(T, 8, 3, k=(4, 4), s=(2, 2), pads=(1, 1, 1, 1), hw=(7, 9)),
             ConvCase(C, 8, 6, pads=(1, 1, 1, 1), hw=(13, 13)),  # 7 blocked rows
             ConvCase(C, 4, 4, pads=(1, 1, 1, 1), hw=(1, 40))]  # one row: no bands
    ragged = 0
    for case in cases:
        graph = single_op_graph(case.op, case.attrs(), [case.in_shape], case.weights())
        with glcnn.Pipeline(graph, ctx, strategy="blocked") as pipe:
            b = pipe.blocking["y"]
        slices, rows = (case.co + 3) // 4, b.tile[0]
        wanted = -(-threads // slices) if slices < threads else 1
        assert (b.bands > 1) == (min(rows, wanted) > 1) and b.bands <= wanted, (case, b)
        assert b.bands * b.band_rows >= rows, (case, b)
        assert (b.bands - 1) * b.band_rows < rows, f"{case}: an empty band"
        ragged += rows % b.band_rows != 0
        if precision == "u8":
            check_u8(ctx, case, "blocked")
        else:
            check_op(ctx, case.op, case.attrs(), [case.in_shape], case.weights(3), precision,
                     strategy="blocked")
    assert ragged or threads == 2, "no case with a short last band"


def test_blocked_grid_wraps_rows(ctx, monkeypatch):
    """Render targets wider than the texture limit wrap onto more grid rows."""
    monkeypatch.setattr(glcnn.Context, "max_texture_size", property(lambda self: 64))
    case = ConvCase(C, 32, 144, k=(1, 1), hw=(4, 10))  # atlas 60×24, blocked strip 108 wide
    graph = single_op_graph(case.op, case.attrs(), [case.in_shape], case.weights())
    with glcnn.Pipeline(graph, ctx, strategy="blocked") as pipe:
        assert pipe.blocking["y"].size[1] > pipe.blocking["y"].tile[0]  # several grid rows
    check_op(ctx, case.op, case.attrs(), [case.in_shape], case.weights(), strategy="blocked")



BANDED = [ConvCase(C, 24, 12, k=(1, 1), hw=(13, 40)),  # 1×8 blocks, 13 rows: a short last band
          ConvCase(C, 16, 8, pads=(1, 1, 1, 1), hw=(18, 18)),  # 2×4 blocks
          ConvCase(T, 16, 8, k=(4, 4), s=(2, 2), pads=(1, 1, 1, 1), hw=(9, 9))]  # pixels 2 apart


@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
@pytest.mark.parametrize("case", BANDED, ids=lambda v: v.id(""))
def test_convs_reading_large_inputs_are_cut_into_bands(ctx, monkeypatch, case, precision):
    """A DENSE conv whose input is over plan.BAND_FROM_BYTES writes its output in bands of a
    few rows, band by band (layout.Blocking band_limit): it matches the float64 reference and
    equals bit for bit the same conv unbanded, and its output is unblocked, not read in place
    (readers of a blocked array take one band per tile)."""
    monkeypatch.setattr(glcnn.runtime.plan, "BAND_FROM_BYTES", 4096)
    monkeypatch.setattr(glcnn.runtime.plan, "BAND_BYTES", 1024)
    if precision == "u8":
        check_u8(ctx, case, "blocked")
    graph = single_op_graph(case.op, case.attrs(), [case.in_shape], case.weights(2))
    x = storable(np.random.default_rng(2).standard_normal(case.in_shape).astype(np.float32),
                 "fp16" if precision == "u8" else precision)
    precision = "fp32" if precision == "u8" else precision  # u8: check_u8 above
    with glcnn.Pipeline(graph, ctx, precision=precision, strategy="blocked") as pipe:
        b = pipe.blocking["y"]
        assert b.band_limit >= 4 and b.bands > 1 and b.band_rows <= b.band_limit, b
        assert (b.bands - 1) * b.band_rows < b.tile[0], f"{case}: an empty band"
        y = pipe.run(x)
    assert_close(y, reference.run(graph, {"x0": x})["y"], precision, str(case))
    monkeypatch.setattr(glcnn.runtime.plan, "BAND_FROM_BYTES", 1 << 40)
    with glcnn.Pipeline(graph, ctx, precision=precision, strategy="blocked") as whole:
        assert whole.blocking["y"].bands == 1
        np.testing.assert_array_equal(whole.run(x), y, err_msg=str(case))
    first, second, _, why = IN_PLACE[0]  # h read in place unless banded
    with glcnn.Pipeline(_chain(first, second), ctx, strategy="blocked") as pipe:
        assert pipe.blocking["h"].bands == 1 and set(pipe.blocked_tensors) == {"h"}, why
    monkeypatch.setattr(glcnn.runtime.plan, "BAND_FROM_BYTES", 1024)
    with glcnn.Pipeline(_chain(first, second), ctx, strategy="blocked") as pipe:
        assert pipe.blocking["h"].bands > 1 and pipe.blocked_tensors == {}, why


@pytest.mark.parametrize("case", [ConvCase(C, 24, 24, group=24, pads=(1, 1, 1, 1), hw=(16, 16)),
                                  ConvCase(C, 24, 4, k=(1, 1), hw=(16, 16))],
                         ids=["depthwise", "one-slice"])
def test_convs_that_read_their_input_once_are_not_banded(ctx, monkeypatch, case):
    """A depthwise conv reads each input slice for one output slice, and an output of one
    slice reads the input once: no band limit (bands would only add cells)."""
    monkeypatch.setattr(glcnn.runtime.plan, "BAND_FROM_BYTES", 4096)
    graph = single_op_graph(case.op, case.attrs(), [case.in_shape], case.weights())
    with glcnn.Pipeline(graph, ctx, strategy="blocked") as pipe:
        assert pipe.blocking["y"].band_limit == 0


# --- blocked input: a tensor left in its conv's render-target array ----------------------------
# Plan._blocked_tensors leaves a blocked conv's output in its texture array when every reader is a
# blocked DENSE conv, which then reads it in place (conv_block_input.glsl BLOCKED_INPUT; from a
# buffer copy of the array where buffer textures are large enough, else a small tensor only)
# instead of an unblock pass copying it to an atlas. Each chain x -> h -> y below must leave h in
# place, match the float64 reference at every precision, and equal bit for bit the same chain
# with h copied.
def _chain(first: ConvCase, second: ConvCase, residual=False, extra_reader=None):
    nodes = [Node(first.op, "h", ["x"], first.attrs(), first.weights(4))]
    attrs = second.attrs() | ({"residual": True} if residual else {})
    nodes.append(Node(second.op, "y", ["h", "x"] if residual else ["h"], attrs,
                      second.weights(5)))
    outputs = ["y"]
    if extra_reader is not None:
        nodes.append(Node(extra_reader, "z", ["h"], {}, {}))
        outputs.append("z")
    return glcnn.graph.Graph({"x": first.in_shape}, nodes, outputs)


IN_PLACE = [  # (first, second, residual, why)
    (ConvCase(C, 8, 8, pads=(1, 1, 1, 1), hw=(9, 9)),
     ConvCase(C, 8, 12, s=(2, 2), pads=(1, 1, 1, 1), hw=(9, 9)), False,
     "2x4 blocks read by a stride-2 conv sharing columns (two input slices)"),
    (ConvCase(C, 3, 8, pads=(1, 1, 1, 1), hw=(6, 7)),
     ConvCase(C, 8, 8, k=(2, 3), pads=(0, 1, 1, 0), group=2, hw=(6, 7)), False,
     "one input slice per group: the tap-by-tap loop"),
    (ConvCase(T, 8, 8, k=(4, 4), s=(2, 2), pads=(1, 1, 1, 1), hw=(5, 5)),
     ConvCase(C, 8, 8, pads=(1, 1, 1, 1), hw=(10, 10)), False,
     "a transposed conv's blocks (pixels a stride apart) read by a conv"),
    (ConvCase(C, 8, 16, k=(4, 4), s=(2, 2), pads=(1, 1, 1, 1), hw=(12, 12)),
     ConvCase(T, 16, 8, k=(4, 4), s=(2, 2), pads=(1, 1, 1, 1), hw=(6, 6)), False,
     "a conv's blocks read by a transposed conv"),
    (ConvCase(T, 16, 8, k=(4, 4), s=(2, 2), pads=(1, 1, 1, 1), hw=(3, 3)),
     ConvCase(T, 8, 4, k=(3, 3), s=(2, 2), pads=(1, 1, 1, 1), hw=(6, 6)), False,
     "transposed into transposed, odd kernel"),
    (ConvCase(C, 8, 8, pads=(1, 1, 1, 1), hw=(3, 40)),
     ConvCase(C, 8, 16, k=(3, 1), pads=(1, 0, 1, 0), hw=(3, 40)), False,
     "1x8 blocks (wide outputs)"),
    (ConvCase(C, 8, 8, pads=(1, 1, 1, 1), hw=(7, 7)),
     ConvCase(C, 8, 8, k=(3, 3), d=(2, 2), pads=(2, 2, 2, 2), hw=(7, 7)), True,
     "dilated reader with a residual add from the atlas input"),
]


def _no_buffers(monkeypatch):
    """A GL that offers no buffer texture large enough: filters in 2D textures, inputs sampled
    from their atlas or read in place."""
    monkeypatch.setattr(glcnn.Context, "max_buffer_texels", property(lambda self: 0))


def _in_place_ids(v):
    return v.id("") if isinstance(v, ConvCase) else str(v).replace(" ", "_")[:40]


def _chain_and_input(ctx, first, second, residual, precision):
    """The two-conv graph of an IN_PLACE case (calibrated for u8) and an input for it."""
    graph = _chain(first, second, residual)
    rng = np.random.default_rng(6)
    feeds = [{"x": (rng.standard_normal(first.in_shape) * 2).astype(np.float32)}
             for _ in range(3)]
    if precision == "u8":
        glcnn.calibrate(graph, feeds, ctx)
    return graph, {"x": storable(feeds[0]["x"], precision)}


@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
@pytest.mark.parametrize(("first", "second", "residual", "why"), IN_PLACE, ids=_in_place_ids)
def test_blocked_tensor_read_from_a_buffer_copy_of_its_array(ctx, monkeypatch, first, second,
                                                             residual, why, precision):
    """Where buffer textures are large enough, h stays in its producer's array whatever its
    size, and its blocked reader reads the array copied into a buffer texture
    (conv_block_input.glsl BLOCKED_INPUT with INPUT_BUFFER) instead of an unblock pass
    copying it to an atlas: the float64 reference at every precision, and bit for bit the
    chain with h unblocked (whose reader copies that atlas into a buffer instead)."""
    monkeypatch.setattr(glcnn.runtime.plan, "IN_PLACE_MAX_TEXELS", -1)  # size plays no part
    monkeypatch.setattr(glcnn.runtime.plan, "IN_PLACE_MAX_MACS", -1)
    graph, x = _chain_and_input(ctx, first, second, residual, precision)
    with glcnn.Pipeline(graph, ctx, precision=precision, strategy="blocked") as pipe:
        assert set(pipe.blocked_tensors) == {"h"}, why
        defines = pipe.plan.defines(pipe.ops[1], pipe.blocked_tensors)
        assert {"BLOCKED_INPUT", "INPUT_BUFFER"} <= set(defines), why
        assert all(p.input_buffer is not None for p in pipe.passes), why
        assert pipe.passes[0].unblock is None, why
        # fp16 textures are copied into float32 buffers (plan.INPUT_BUFFER_DTYPE)
        assert {p.input_buffer.dtype for p in pipe.passes} == \
            {"fp32": {"f4"}, "fp16": {"f4"}, "u8": {"f1"}}[precision]
        y = pipe.run(x)
    assert_close(y, reference.run(graph, x)["y"], precision, why)
    monkeypatch.setattr(glcnn.runtime.plan.Plan, "_blocked_tensors", lambda self, keep: {})
    with glcnn.Pipeline(graph, ctx, precision=precision, strategy="blocked") as copied:
        assert copied.passes[0].unblock is not None
        assert all(p.input_buffer is not None for p in copied.passes), why
        np.testing.assert_array_equal(copied.run(x), y, err_msg=why)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_a_tensor_read_by_two_blocked_convs_is_copied_once(ctx, precision):
    """The second blocked reader of a tensor finds it already in the input buffer (the
    tensor's texture is not rewritten while it has readers left), at every run."""
    first, second, _, why = IN_PLACE[0]
    graph = _chain(first, second)
    graph.nodes.append(Node(second.op, "z", ["h"], second.attrs(), second.weights(6)))
    graph.outputs.append("z")
    rng = np.random.default_rng(7)
    with glcnn.Pipeline(graph, ctx, precision=precision, strategy="blocked") as pipe:
        copies = {p.op.node.name: p.copy_input for p in pipe.passes}
        assert copies == {"h": True, "y": True, "z": False}, why
        for _ in range(2):  # a second run refills the buffer from the new h
            x = {"x": storable(rng.standard_normal(first.in_shape).astype(np.float32),
                               precision)}
            y, z = pipe.run(x).values()
            expected = reference.run(graph, x)
            assert_close(y, expected["y"], precision, why)
            assert_close(z, expected["z"], precision, why)


@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
@pytest.mark.parametrize(("first", "second", "residual", "why"), IN_PLACE, ids=_in_place_ids)
def test_blocked_tensor_read_in_place(ctx, monkeypatch, first, second, residual, why, precision):
    _no_buffers(monkeypatch)  # in place only where input buffers cannot be had
    graph, x = _chain_and_input(ctx, first, second, residual, precision)
    _check_in_place(ctx, monkeypatch, graph, x, precision, True, why)


@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
@pytest.mark.parametrize("buffers", [True, False], ids=["buffers", "no-buffers"])
@pytest.mark.parametrize("second", [ConvCase(C, 24, 24, pads=(1, 1, 1, 1), hw=(9, 9)),
                                    ConvCase(C, 24, 24, group=24, pads=(1, 1, 1, 1), hw=(9, 9))],
                         ids=["dense", "depthwise"])
def test_grouped_cells_are_read_in_place_and_unblocked(ctx, monkeypatch, second, buffers,
                                                       precision):
    """A blocked output too small to span every thread's screen tiles packs its cells into one
    group per thread (layout.Blocking.group; 6 slices of 3 columns over two threads: 3 a group,
    64 texels apart): h read in place (from a buffer copy of its array, or the array) and y
    unblocked match the float64 reference, and equal bit for bit the chain with h unblocked."""
    monkeypatch.setattr(glcnn.Context, "spread_width", property(lambda self: 128))
    monkeypatch.setattr(glcnn.runtime.plan, "IN_PLACE_TEXELS_PER_PROGRAM", 0)  # any size
    if not buffers:
        _no_buffers(monkeypatch)
    first = ConvCase(C, 8, 24, pads=(1, 1, 1, 1), hw=(9, 9))
    graph, x = _chain_and_input(ctx, first, second, False, precision)
    with glcnn.Pipeline(graph, ctx, precision=precision, strategy="blocked") as pipe:
        assert [(pipe.blocking[n].group, pipe.blocking[n].pitch) for n in "hy"] == [(3, 64)] * 2
    _check_in_place(ctx, monkeypatch, graph, x, precision, True, f"grouped, {second}")


def _check_in_place(ctx, monkeypatch, graph, x, precision, y_blocked, why, pool=False):
    """Chain x -> h -> y leaves h in place, y (blocked or not) reads it there (a conv from a
    buffer copy of the array where buffer textures are large enough, a pool and else from the
    array) and matches the float64 reference, and equals bit for bit the same chain with h
    copied to an atlas."""
    with glcnn.Pipeline(graph, ctx, precision=precision, strategy="blocked") as pipe:
        assert set(pipe.blocked_tensors) == {"h"}, why
        assert "h" in pipe.blocking and ("y" in pipe.blocking) == y_blocked, why
        defines = pipe.plan.defines(pipe.ops[1], pipe.blocked_tensors)
        assert "BLOCKED_INPUT" in defines, why
        buffered = ctx.max_buffer_texels > 0 and not pool
        assert ("INPUT_BUFFER" in defines) == buffered, why
        assert (pipe.passes[1].input_buffer is not None) == buffered, why
        y = pipe.run(x)
    assert_close(y, reference.run(graph, x)["y"], precision, why)
    monkeypatch.setattr(glcnn.runtime.plan.Plan, "_blocked_tensors", lambda self, keep: {})
    with glcnn.Pipeline(graph, ctx, precision=precision, strategy="blocked") as copied:
        assert copied.blocked_tensors == {}
        np.testing.assert_array_equal(copied.run(x), y, err_msg=why)


def test_blocked_tensor_stays_an_atlas_when_it_must(ctx, monkeypatch):
    """Not in place: read by a non-conv, a graph output, kept, too big and busy to pay, or
    when the readers' in-place programs would outnumber the unblock programs saved."""
    _no_buffers(monkeypatch)
    first, second = IN_PLACE[0][:2]
    graph = _chain(first, second, extra_reader="Relu")
    with glcnn.Pipeline(graph, ctx, strategy="blocked") as pipe:
        assert pipe.blocked_tensors == {}
    graph = _chain(first, second)
    graph.outputs.append("h")
    with glcnn.Pipeline(graph, ctx, strategy="blocked") as pipe:
        assert pipe.blocked_tensors == {}
    graph = _chain(first, second)
    with glcnn.Pipeline(graph, ctx, strategy="blocked", keep=["h"]) as pipe:
        assert pipe.blocked_tensors == {}
        pipe.run(np.zeros(first.in_shape, np.float32))
        assert pipe.texture("h").size == glcnn.layout.Atlas.of((8, 9, 9)).size
    big = ConvCase(C, 64, 64, pads=(1, 1, 1, 1), hw=(32, 32))  # 16384 texels, 2304 MACs each
    with glcnn.Pipeline(_chain(big, big), ctx, strategy="blocked") as pipe:
        assert pipe.blocked_tensors == {}
    with glcnn.Pipeline(_chain(first, second), ctx, strategy="direct") as pipe:
        assert pipe.blocked_tensors == {}
    same = IN_PLACE[0][0]  # h and y one program: y in place would be a second one
    with glcnn.Pipeline(_chain(same, same), ctx, strategy="blocked") as pipe:
        assert pipe.plan.program_count({"h": pipe.blocking["h"]}) > pipe.plan.program_count({})
        assert pipe.blocked_tensors == {}


# A depthwise Conv reads a blocked conv's output in place too, blocked (conv_block_input.glsl,
# as DENSE readers do: 3×3 and larger) or direct (conv_direct.glsl BLOCKED_INPUT: under
# DEPTHWISE_BLOCK_MIN_WORK, raised here): MobileNet's expansion 1×1 conv feeding its depthwise
# conv then needs no unblock pass, whether buffer textures exist or not.
DEPTHWISE_IN_PLACE = [  # (first, second, why)
    (ConvCase(C, 16, 12, k=(1, 1), hw=(9, 9)),
     ConvCase(C, 12, 12, pads=(1, 1, 1, 1), group=12, hw=(9, 9)),
     "1x1 expansion (2x4 blocks) into a padded 3x3 depthwise: edge and inner taps"),
    (ConvCase(C, 16, 8, k=(1, 1), hw=(6, 40)),
     ConvCase(C, 8, 8, s=(2, 2), pads=(0, 1, 1, 0), group=8, hw=(6, 40)),
     "1x8 blocks read by a stride-2 depthwise with asymmetric pads"),
    (ConvCase(C, 3, 8, pads=(1, 1, 1, 1), hw=(10, 10)),
     ConvCase(C, 8, 8, k=(3, 3), d=(2, 2), pads=(2, 2, 2, 2), group=8, hw=(10, 10)),
     "a 3x3 conv from 3 channels into a dilated depthwise"),
]


@pytest.mark.parametrize("blocked", [True, False], ids=["blocked", "direct"])
@pytest.mark.parametrize("buffers", [True, False], ids=["buffers", "no-buffers"])
@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
@pytest.mark.parametrize(("first", "second", "why"), DEPTHWISE_IN_PLACE, ids=_in_place_ids)
def test_depthwise_conv_reads_blocked_tensor_in_place(ctx, monkeypatch, first, second, why,
                                                      precision, buffers, blocked):
    if not buffers:
        _no_buffers(monkeypatch)
    if not blocked:
        monkeypatch.setattr(glcnn.ops.conv, "DEPTHWISE_BLOCK_MIN_WORK", 10)
    graph, x = _chain_and_input(ctx, first, second, False, precision)
    _check_in_place(ctx, monkeypatch, graph, x, precision, blocked, why)


def test_in_place_pays_for_a_program_with_the_unblocks_it_skips(ctx, monkeypatch):
    """A reader in place is a program of its own: accepted where the unblocked texels skipped
    reach IN_PLACE_TEXELS_PER_PROGRAM per program added, refused below. Here h2, a graph
    output, stays an atlas, so its depthwise reader keeps the atlas program and y reading h in
    place adds one."""
    first, second, why = DEPTHWISE_IN_PLACE[0]
    graph = _chain(first, second)
    graph.nodes += [Node(first.op, "h2", ["x"], first.attrs(), first.weights(7)),
                    Node(second.op, "y2", ["h2"], second.attrs(), second.weights(8))]
    graph.outputs += ["h2", "y2"]
    skipped = math.prod(glcnn.layout.Atlas.of((first.co, *first.hw)).size)
    for per_program, in_place in ((skipped + 1, {}), (skipped, {"h"})):
        monkeypatch.setattr(glcnn.runtime.plan, "IN_PLACE_TEXELS_PER_PROGRAM", per_program)
        with glcnn.Pipeline(graph, ctx, strategy="blocked") as pipe:
            blocked = {"h": pipe.blocking["h"]}
            assert pipe.plan.program_count(blocked) == pipe.plan.program_count({}) + 1, why
            assert set(pipe.blocked_tensors) == set(in_place), why


def test_texture_of_a_tensor_read_in_place_names_keep(ctx, monkeypatch):
    _no_buffers(monkeypatch)
    first, second = IN_PLACE[0][:2]
    with glcnn.Pipeline(_chain(first, second), ctx, strategy="blocked") as pipe:
        with pytest.raises(glcnn.GlcnnError, match=r"'h' stays in the blocked.*keep=\['h'\]"):
            pipe.texture("h")


# --- programs shared between layers ---------------------------------------------------------
# No activation, Relu, Clip, HardSigmoid and HardSwish compile to one conv program (ACT_CLAMP,
# the form in uniforms), and a direct pass carries no blocked-only define (stride and dilation along x), so layers
# that differ only there share a program; each must still match the reference.
def _siblings(case: ConvCase, activations: list) -> glcnn.graph.Graph:
    nodes = []
    for i, act in enumerate(activations):
        attrs = case.attrs() | ({"activation": act} if act else {})
        nodes.append(Node(case.op, f"y{i}", ["x"], attrs, case.weights(i)))
    return glcnn.graph.Graph({"x": case.in_shape}, nodes, [n.name for n in nodes])


def _run_siblings(ctx, graph, precision, strategy):
    rng = np.random.default_rng(8)
    feeds = [{"x": (rng.standard_normal(graph.inputs["x"]) * 2).astype(np.float32)}
             for _ in range(3)]
    if precision == "u8":
        glcnn.calibrate(graph, feeds, ctx)
    x = {"x": storable(feeds[0]["x"], precision)}
    with glcnn.Pipeline(graph, ctx, precision=precision, strategy=strategy) as pipe:
        programs = {id(p.program) for p in pipe.passes}
        ys = pipe.run(x)
    ref = reference.run(graph, x)
    for node in graph.nodes:
        what = f"{node.name} {node.attrs.get('activation')} {strategy}"
        assert_close(ys[node.name], ref[node.name], precision, what)
    return programs, ref


# Clip bounds inside the outputs' range (about ±70) but wide enough that u8's input rounding
# (≈ 0.1 before the clip) stays within its tolerance, which scales by max(1, |reference|).
CLAMPED = [None, {"op": "Relu"}, {"op": "Clip", "min": -20.0, "max": 25.0},
           {"op": "HardSigmoid", "alpha": 0.05, "beta": 0.4}, {"op": "HardSwish"}]


@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
@pytest.mark.parametrize(("case", "strategy"), [
    (ConvCase(C, 8, 8, pads=(1, 1, 1, 1), hw=(9, 9)), "direct"),
    (ConvCase(C, 8, 8, pads=(1, 1, 1, 1), hw=(9, 9)), "blocked"),
    (ConvCase(T, 8, 4, k=(4, 4), s=(2, 2), pads=(1, 1, 1, 1), hw=(5, 5)), "blocked"),
], ids=lambda v: v.id("") if isinstance(v, ConvCase) else v)
def test_no_activation_and_clamp_activations_share_a_program(ctx, case, strategy, precision):
    programs, ref = _run_siblings(ctx, _siblings(case, CLAMPED), precision, strategy)
    assert len(programs) == 1
    assert ref["y0"].min() < -20 and ref["y0"].max() > 25, "both bounds must clip"
    assert (ref["y1"].min(), ref["y2"].min(), ref["y2"].max()) == (0, -20, 25)


@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
def test_direct_convs_of_other_strides_share_a_program(ctx, precision):
    one = ConvCase(C, 8, 8, pads=(1, 1, 1, 1), group=8, hw=(9, 9))  # depthwise, as MobileNetV2
    two = ConvCase(C, 8, 8, s=(2, 2), pads=(1, 1, 1, 1), group=8, hw=(9, 9))
    d = ConvCase(C, 8, 8, d=(2, 2), pads=(2, 2, 2, 2), group=8, hw=(9, 9))
    graph = _siblings(one, [None, None, None])
    for node, case in zip(graph.nodes[1:], (two, d)):
        node.attrs.update(case.attrs())
    assert len(_run_siblings(ctx, graph, precision, "direct")[0]) == 1


# --- hypothesis: random valid configurations --------------------------------------------
MAX_CHANNELS = 16


@st.composite
def _groups(draw):
    """(group, channels per group in, channels per group out) of one of four kinds."""
    kind = draw(st.sampled_from(["single", "depthwise", "generic", "aligned"]))
    if kind == "single":
        return 1, draw(st.integers(1, MAX_CHANNELS)), draw(st.integers(1, MAX_CHANNELS))
    if kind == "depthwise":
        return draw(st.integers(1, MAX_CHANNELS)), 1, 1
    group = draw(st.sampled_from([2, 3]))
    if kind == "generic":
        per_group = st.integers(1, MAX_CHANNELS // group)
        return group, draw(per_group), draw(per_group)
    aligned = st.sampled_from([4, 8] if group == 2 else [4])
    return group, draw(aligned), draw(aligned)


def _pair(low, high):
    return st.tuples(st.integers(low, high), st.integers(low, high))


@st.composite
def conv_cases(draw, op):
    group, cg, cog = draw(_groups())
    k, s, d = draw(_pair(1, 5)), draw(_pair(1, 3)), draw(_pair(1, 2))
    common = {"ci": cg * group, "co": cog * group, "k": k, "s": s, "d": d, "group": group,
              "bias": draw(st.booleans())}
    if op == "Conv":
        pads = draw(st.tuples(*[st.integers(0, 3)] * 4))
        hw = tuple(draw(st.integers(max(1, di * (ki - 1) + 1 - pads[a] - pads[a + 2]), 12))
                   for a, (ki, di) in enumerate(zip(k, d)))
        return ConvCase(op, pads=pads, hw=hw, **common)
    hw = draw(_pair(1, 8))
    out_pad = tuple(draw(st.integers(0, max(si, di) - 1)) for si, di in zip(s, d))
    begin, end = [], []
    for a in range(2):  # keep the output non-empty: pads ≤ (in−1)·s + d·(k−1) + out_pad
        room = (hw[a] - 1) * s[a] + d[a] * (k[a] - 1) + out_pad[a]
        begin.append(draw(st.integers(0, min(3, room))))
        end.append(draw(st.integers(0, min(3, room - begin[a]))))
    return ConvCase(op, pads=(*begin, *end), hw=hw, out_pad=out_pad, **common)


def _property(examples):
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _check_case(ctx, case, seed, precision):
    event(case.make().variant())  # every draw is a valid configuration: this must not raise
    for strategy in STRATEGIES:
        check_op(ctx, case.op, case.attrs(), [case.in_shape], case.weights(seed), precision,
                 seed, strategy=strategy)


@_property(100)
@given(case=conv_cases(C), seed=st.integers(0, 2**16))
def test_conv_property_fp32(ctx, case, seed):
    _check_case(ctx, case, seed, "fp32")


@_property(100)
@given(case=conv_cases(T), seed=st.integers(0, 2**16))
def test_conv_transpose_property_fp32(ctx, case, seed):
    _check_case(ctx, case, seed, "fp32")


@_property(30)
@given(case=conv_cases(C), seed=st.integers(0, 2**16))
def test_conv_property_fp16(ctx, case, seed):
    _check_case(ctx, case, seed, "fp16")


@_property(30)
@given(case=conv_cases(T), seed=st.integers(0, 2**16))
def test_conv_transpose_property_fp16(ctx, case, seed):
    _check_case(ctx, case, seed, "fp16")


# --- errors: the right GlcnnError subclass, naming the layer ----------------------------------
def _w(*shape):
    return np.ones(shape, np.float32)


ERRORS = [
    pytest.param(C, {"group": 2}, {"W": _w(5, 2, 3, 3)}, (4, 6, 6), glcnn.ShapeError,
                 "group=2 must divide", id="conv-group-not-dividing-output"),
    pytest.param(T, {"group": 2}, {"W": _w(5, 2, 3, 3)}, (5, 6, 6), glcnn.ShapeError,
                 "group=2 must divide", id="convT-group-not-dividing-input"),
    pytest.param(C, {"group": 0}, {"W": _w(4, 3, 3, 3)}, (3, 6, 6), glcnn.UnsupportedOpError,
                 "group=0", id="conv-group-zero"),
    pytest.param(T, {"group": 0}, {"W": _w(4, 3, 3, 3)}, (4, 6, 6), glcnn.UnsupportedOpError,
                 "group=0", id="convT-group-zero"),
    pytest.param(C, {}, {"W": _w(4, 3, 3, 3)}, (5, 6, 6), glcnn.ShapeError,
                 "input has 5 channels", id="conv-weight-channel-mismatch"),
    pytest.param(C, {"group": 2}, {"W": _w(4, 3, 3, 3)}, (5, 6, 6), glcnn.ShapeError,
                 "input has 5 channels", id="conv-grouped-weight-mismatch"),
    pytest.param(T, {}, {"W": _w(4, 2, 3, 3)}, (5, 6, 6), glcnn.ShapeError,
                 "input has 5 channels", id="convT-weight-channel-mismatch"),
    pytest.param(T, {"strides": [2, 2], "output_padding": [2, 0]}, {"W": _w(4, 2, 3, 3)},
                 (4, 6, 6), glcnn.UnsupportedOpError, "output_padding", id="convT-outpad-big"),
    pytest.param(T, {"dilations": [1, 2], "output_padding": [0, 2]}, {"W": _w(4, 2, 3, 3)},
                 (4, 6, 6), glcnn.UnsupportedOpError, "output_padding", id="convT-outpad-dil"),
    pytest.param(C, {}, {"W": _w(4, 3, 5, 5)}, (3, 2, 2), glcnn.ShapeError,
                 "empty output", id="conv-empty-output"),
    pytest.param(T, {"pads": [1, 0, 1, 0]}, {"W": _w(4, 2, 1, 1)}, (4, 1, 1), glcnn.ShapeError,
                 "empty output", id="convT-empty-output"),
    pytest.param(C, {"strides": [0, 1]}, {"W": _w(4, 3, 3, 3)}, (3, 6, 6),
                 glcnn.UnsupportedOpError, "strides", id="conv-stride-zero"),
    pytest.param(C, {"pads": [1, 1]}, {"W": _w(4, 3, 3, 3)}, (3, 6, 6),
                 glcnn.UnsupportedOpError, "pads", id="conv-pads-two-values"),
    pytest.param(C, {}, {"W": _w(4, 3, 3, 3), "B": _w(3)}, (3, 6, 6), glcnn.WeightError,
                 "'B'", id="conv-bias-shape"),
    pytest.param(C, {}, {"W": _w(4, 3, 3)}, (3, 6, 6), glcnn.WeightError, "'W'",
                 id="conv-weight-3d"),
    pytest.param(C, {}, {}, (3, 6, 6), glcnn.WeightError, "missing weight 'W'",
                 id="conv-no-weight"),
]


@pytest.mark.parametrize(("op", "attrs", "weights", "in_shape", "error", "message"), ERRORS)
def test_invalid_configuration(op, attrs, weights, in_shape, error, message):
    node = Node(op, "layer_under_test", ["x"], attrs, weights)
    with pytest.raises(error, match=message) as info:
        make_op(node, [in_shape])
    assert f"'layer_under_test' ({op})" in str(info.value)


def test_invalid_configuration_fails_pipeline_compile(ctx):
    graph = single_op_graph(C, {"group": 2}, [(4, 6, 6)], {"W": _w(5, 2, 3, 3)},
                            name="bad_conv")
    with pytest.raises(glcnn.ShapeError, match="'bad_conv'"):
        glcnn.Pipeline(graph, ctx)
