"""Pipeline.weights / set_weights (glcnn.runtime.weights): new weights run as the float64
reference says, only the changed texels are uploaded, the caller's Graph is never written,
and every refusal names the layer and the weight."""

import copy
import threading
from dataclasses import dataclass

import moderngl
import numpy as np
import pytest
from helpers import PRECISIONS, assert_close, single_op_graph, storable

import glcnn
from glcnn.graph import models, reference
from glcnn.graph.builder import Builder
from glcnn.runtime.gl import BufferTexture
from glcnn.viewer.bending import Bender


@dataclass(frozen=True)
class Case:
    """One layer "y" with weights, reading x0 of `in_shape`; `filters` = (Cg, kh, kw) of the
    filter grid for convs (None otherwise)."""

    name: str
    op: str
    attrs: dict
    in_shape: tuple
    weights: dict  # weight name -> shape
    strategy: str = "direct"
    filters: tuple | None = None
    buffer: bool = True  # a conv's filters in a buffer texture (else: in a 2D texture)

    def graph(self, seed=0):
        rng = np.random.default_rng(seed)
        weights = {k: rng.standard_normal(s).astype(np.float32) for k, s in self.weights.items()}
        return single_op_graph(self.op, self.attrs, [self.in_shape], weights)


PADS = {"pads": [1, 1, 1, 1]}
CONVS = [
    Case("conv-c6-o13-k3-p1", "Conv", PADS, (6, 9, 11), {"W": (13, 6, 3, 3), "B": (13,)},
         filters=(6, 3, 3)),
    Case("conv-c6-o13-k3-p1-2d", "Conv", PADS, (6, 9, 11), {"W": (13, 6, 3, 3), "B": (13,)},
         filters=(6, 3, 3), buffer=False),
    Case("conv-c8-o16-k3-p1-blocked", "Conv", PADS, (8, 10, 9),
         {"W": (16, 8, 3, 3), "B": (16,)}, "blocked", (8, 3, 3)),
    Case("convtranspose-c6-o5-k4-s2-p1", "ConvTranspose", {"strides": [2, 2], **PADS},
         (6, 7, 8), {"W": (6, 5, 4, 4), "B": (5,)}, filters=(6, 4, 4)),
    Case("convtranspose-c8-o8-k4-s2-p1-blocked", "ConvTranspose", {"strides": [2, 2], **PADS},
         (8, 5, 6), {"W": (8, 8, 4, 4), "B": (8,)}, "blocked", (8, 4, 4)),
    Case("convtranspose-c8-o6-k3-g2", "ConvTranspose", {"strides": [2, 2], "group": 2},
         (8, 5, 6), {"W": (8, 3, 3, 3), "B": (6,)}, filters=(4, 3, 3)),
    Case("depthwise-c10-k3-p1", "Conv", {"group": 10, **PADS}, (10, 9, 7),
         {"W": (10, 1, 3, 3), "B": (10,)}, filters=(1, 3, 3)),
    Case("depthwise-c12-k5-p2-blocked", "Conv", {"group": 12, "pads": [2, 2, 2, 2]},
         (12, 11, 9), {"W": (12, 1, 5, 5), "B": (12,)}, "blocked", (1, 5, 5)),
]
OTHERS = [
    Case("gemm-k20-n7-transB", "Gemm", {"transB": 1}, (20, 1, 1), {"B": (7, 20), "C": (7,)}),
    Case("matmul-k9-n6", "MatMul", {}, (9, 1, 1), {"B": (9, 6)}),
    Case("conv-prelu-c5-o6-k1", "Conv", {"activation": {"op": "PRelu"}}, (5, 4, 3),
         {"W": (6, 5, 1, 1), "B": (6,), "slope": (6,)}),
    Case("prelu-c7", "PRelu", {}, (7, 5, 6), {"slope": (7,)}),
    Case("add-constant-c6", "Add", {}, (6, 4, 5), {"B": (6,)}),
    Case("mul-constant-c6", "Mul", {}, (6, 4, 5), {"B": (6, 1, 1)}),
    Case("instancenorm-c5", "InstanceNormalization", {}, (5, 6, 7), {"scale": (5,), "B": (5,)}),
]
CASES = CONVS + OTHERS


def output_channel(case, w: np.ndarray, channel: int) -> tuple:
    """The index of W holding output `channel`'s filter (ConvTranspose: axis 1 per group)."""
    if case.op != "ConvTranspose":
        return (channel,)
    group = case.attrs.get("group", 1)
    cg, cog = w.shape[0] // group, w.shape[1]
    g = channel // cog
    return slice(g * cg, (g + 1) * cg), channel % cog


def edits(case, rng) -> list[tuple[str, np.ndarray]]:
    """(weight name, new value) to apply in order: one output channel (or element) of the
    first weight, then every weight anew."""
    first, shape = next(iter(case.weights.items()))
    graph = case.graph()
    w = graph.nodes[0].weights[first].copy()
    index = output_channel(case, w, 3) if case.filters else (1,) + (0,) * (w.ndim - 1)
    w[index] = rng.standard_normal(w[index].shape)
    return [(first, w)] + [(k, rng.standard_normal(s).astype(np.float32))
                           for k, s in case.weights.items()]


def snapshot(graph) -> dict:
    """Every weight array of `graph` (the object and a copy of its bytes)."""
    return {(n.name, k): (v, v.dtype, v.shape, v.tobytes())
            for n in graph.nodes for k, v in n.weights.items()}


def assert_unchanged(graph, before: dict) -> None:
    after = snapshot(graph)
    assert after.keys() == before.keys()
    for key, (array, dtype, shape, data) in before.items():
        now = after[key]
        assert now[0] is array and now[1:] == (dtype, shape, data), f"graph weight {key} changed"


@pytest.fixture
def pipeline(ctx, monkeypatch):
    """Make a Pipeline of a case; `buffer=False` cases keep conv filters in 2D textures."""
    def make(case, precision="fp32", graph=None):
        if not case.buffer:
            monkeypatch.setattr(ctx, "buffer_fits", lambda texels: False)
        pipe = glcnn.Pipeline(graph or case.graph(), ctx, precision, strategy=case.strategy)
        if case.strategy == "blocked":
            assert "y" in pipe.blocking, f"{case.name}: not blocked"
        if case.filters:
            kind = BufferTexture if case.buffer else moderngl.Texture
            assert isinstance(pipe.weight_texture("y"), kind), case.name
        return pipe
    return make


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_set_weights_runs_as_the_reference(pipeline, case, precision):
    graph = case.graph()
    before = snapshot(graph)
    rng = np.random.default_rng(1)
    x = storable(rng.standard_normal(case.in_shape), precision)
    expected = copy.deepcopy(graph)
    with pipeline(case, precision, graph) as pipe:
        for name, value in edits(case, rng):
            assert pipe.set_weights("y", name, value) > 0
            expected.nodes[0].weights[name] = value
            ref = reference.run(expected, {"x0": x})["y"]
            assert_close(pipe.run(x), ref, precision,
                         f"{case.name} after set_weights({name!r}) strategy={case.strategy}")
            got, own = pipe.weights("y"), pipe.graph.nodes[0].weights  # own: what runs
            assert got.keys() == own.keys() == case.weights.keys()
            for k, v in expected.nodes[0].weights.items():
                np.testing.assert_array_equal(got[k], np.float32(v), err_msg=f"{case.name} {k}")
                np.testing.assert_array_equal(own[k], np.float32(v), err_msg=f"{case.name} {k}")
                assert got[k].dtype == np.float32
        assert pipe.set_weights("y", name, value) == 0  # the same values again: nothing written
        assert pipe.graph is not graph and pipe.graph.inputs == graph.inputs
    assert_unchanged(graph, before)


@pytest.mark.parametrize("precision", [*PRECISIONS, "u8"])
@pytest.mark.parametrize("case", [CONVS[0], CONVS[2], CONVS[4], OTHERS[0]], ids=lambda c: c.name)
def test_edited_pipeline_is_a_fresh_compile_of_the_edited_graph(ctx, pipeline, case, precision):
    """At every precision (u8 with ranges calibrated on the original weights, which both
    pipelines share), the weight textures and outputs are bit-identical to a pipeline
    compiled from the edited graph."""
    graph = case.graph()
    rng = np.random.default_rng(2)
    x = rng.standard_normal(case.in_shape).astype(np.float32)
    if precision == "u8":
        glcnn.calibrate(graph, [x], ctx)
    expected = copy.deepcopy(graph)
    with pipeline(case, precision, graph) as pipe:
        for name, value in edits(case, rng):
            pipe.set_weights("y", name, value)
            expected.nodes[0].weights[name] = value
        with pipeline(case, precision, expected) as fresh:
            for sampler in ("u_weights", "u_params"):
                assert pipe.weight_texture("y", sampler).read() == \
                    fresh.weight_texture("y", sampler).read(), f"{case.name} {sampler}"
            np.testing.assert_array_equal(pipe.run(x), fresh.run(x))


class WriteSpy:
    """Records (texture, viewport) of every write to a moderngl.Texture or BufferTexture."""

    def __init__(self, monkeypatch):
        self.calls = []
        for cls in (moderngl.Texture, BufferTexture):
            monkeypatch.setattr(cls, "write", self._spy(cls.write))

    def _spy(self, write):
        def spy(tex, data, viewport=None, *args, **kwargs):
            self.calls.append((tex, tuple(viewport) if viewport else None))
            return write(tex, data, viewport, *args, **kwargs)
        return spy

    def take(self) -> list:
        calls, self.calls = self.calls, []
        return calls


@pytest.mark.parametrize("case", CONVS, ids=lambda c: c.name)
def test_one_output_channel_writes_one_band_of_the_filter_grid(pipeline, case, monkeypatch):
    graph = case.graph()
    before = snapshot(graph)
    co = case.weights["B"][0]
    channel = 6 if co > 6 else 3
    with pipeline(case, "fp32", graph) as pipe:
        filters, params = pipe.weight_texture("y"), pipe.weight_texture("y", "u_params")
        height, width, _ = pipe.weight_layout("y")
        cg, kh, kw = case.filters
        spy = WriteSpy(monkeypatch)
        w = pipe.weights("y")["W"]
        index = output_channel(case, w, channel)
        w[index] = -w[index] + 0.25
        assert pipe.set_weights("y", "W", w) == cg * kw * kh
        band = (0, channel // 4 * kh, cg * kw, kh)  # columns past Cg (DENSE padding) stay zero
        assert spy.take() == [(filters, band)], f"{case.name}: bank {width}×{height} texels"
        assert cg * kw * kh < width * height
        b = pipe.weights("y")["B"]
        b[channel] += 1
        assert pipe.set_weights("y", "B", b) == 1
        assert spy.take() == [(params, (channel // 4, 0, 1, 1))]
        # Two channels in different slices: one band each (a single write if the bands touch),
        # not the bank between them.
        w[output_channel(case, w, 0)] = 0
        w[output_channel(case, w, co - 1)] = 0
        assert pipe.set_weights("y", "W", w) == 2 * cg * kw * kh
        writes = spy.take()
        assert {tex for tex, _ in writes} == {filters}
        assert sum(vw * vh for _, (_, _, vw, vh) in writes) == 2 * cg * kw * kh, case.name
    assert_unchanged(graph, before)


def test_bender_leaves_the_graph_alone_and_writes_one_band(ctx, monkeypatch):
    graph = models.autoencoder(size=(8, 8))
    before = snapshot(graph)
    x = np.random.default_rng(3).random((3, 8, 8), np.float32)
    with glcnn.Pipeline(graph, ctx) as pipe:
        original = pipe.run(x)
        compiled = {layer: pipe.weights(layer) for layer in ("enc1", "enc2", "dec1")}
        bender = Bender(pipe)
        spy = WriteSpy(monkeypatch)
        bender.zero("enc2", 17)
        bands = {viewport for _, viewport in spy.take()}
        assert bands == {(0, 4 * 4, 64 * 4, 4), (4, 0, 1, 1)}  # enc2 W: 64 inputs, 4×4 taps
        bender.invert("dec1", 5)
        bender.scale("enc1", 3, 2.0)
        bender.replace("dec1", 0, np.ones((256, 4, 4)), bias=0.5)
        assert_unchanged(graph, before)
        bender.undo()
        np.testing.assert_array_equal(pipe.weights("dec1")["W"][:, 5], -compiled["dec1"]["W"][:, 5])
        bender.reset()
        for layer, weights in compiled.items():
            for name, value in pipe.weights(layer).items():
                assert value.tobytes() == weights[name].tobytes(), f"{layer} {name}"
        np.testing.assert_array_equal(pipe.run(x), original)
    assert_unchanged(graph, before)


def test_weights_are_copies(ctx):
    case = CONVS[0]
    graph = case.graph()
    with glcnn.Pipeline(graph, ctx) as pipe:
        w = pipe.weights("y")["W"]
        w[:] = 7
        assert not np.any(pipe.weights("y")["W"] == 7)
        pipe.set_weights("y", "W", w)
        w[:] = 9  # the pipeline keeps its own copy of what it was given
        np.testing.assert_array_equal(pipe.weights("y")["W"], np.full(w.shape, 7, np.float32))
        np.testing.assert_array_equal(graph.nodes[0].weights["W"],
                                      case.graph().nodes[0].weights["W"])


def _chain(layers=12):
    b = Builder(seed=4)
    h = b.input("x", (4, 3, 3))
    for i in range(layers):
        h = b.conv(h, 4, 1, name=f"c{i}")
    h = b.activation(h, "Relu", name="relu")
    return b.build([h])


BAD = [  # (layer, name, value or a function of the current W, exception, message)
    ("nope", "W", None, glcnn.GlcnnError,
     r"no layer named 'nope'; layers: 'c0', 'c1', .*'c9', \.\.\. \(13 layers\)"),
    ("c3", "X", None, glcnn.WeightError,
     r"layer 'c3' \(Conv\) has no weight 'X'; its weights: 'W', 'B'"),
    ("relu", "W", None, glcnn.WeightError, r"layer 'relu' \(Relu\) has no weight 'W'; .*none"),
    ("c3", "W", lambda w: w[..., 0], glcnn.WeightError,
     r"layer 'c3' \(Conv\): weight 'W' has shape \(4, 4, 1\), expected \(4, 4, 1, 1\)"),
    ("c3", "B", lambda w: np.zeros((1, 4)), glcnn.WeightError, r"'B' has shape \(1, 4\)"),
    ("c3", "W", lambda w: w.astype(str), glcnn.WeightError, "'W' has dtype <U"),
    ("c3", "W", lambda w: w.astype(complex), glcnn.WeightError, "dtype complex128"),
    ("c3", "W", lambda w: w > 0, glcnn.WeightError, "dtype bool"),
    ("c3", "B", lambda w: [[1, 2], [3]], glcnn.WeightError, "'B' is not an array"),
    ("c3", "W", lambda w: np.where(w > 0, np.nan, w), glcnn.WeightError, "'W' contains NaN"),
    ("c3", "W", lambda w: np.where(w > 0, np.inf, w), glcnn.WeightError, "'W' contains NaN or Inf"),
    ("c3", "W", lambda w: np.full(w.shape, 1e39), glcnn.WeightError, "beyond float32"),
]


@pytest.mark.parametrize("layer,name,value,error,message", BAD,
                         ids=[f"{b[0]}-{b[1]}-{b[4][:24]}" for b in BAD])
def test_errors_name_the_layer_and_weight(ctx, layer, name, value, error, message):
    graph = _chain()
    x = np.random.default_rng(5).standard_normal((4, 3, 3)).astype(np.float32)
    with glcnn.Pipeline(graph, ctx) as pipe:
        y, weights = pipe.run(x), pipe.weights("c3")
        w = weights["W"] if value is None else value(weights["W"])
        with pytest.raises(error, match=message):
            pipe.set_weights(layer, name, w)
        for k, v in pipe.weights("c3").items():  # a refused value changes nothing
            assert v.tobytes() == weights[k].tobytes()
        np.testing.assert_array_equal(pipe.run(x), y)


def test_unknown_layer_for_weights_and_layout(ctx):
    with glcnn.Pipeline(_chain(2), ctx) as pipe:
        with pytest.raises(glcnn.GlcnnError, match=r"no layer named 'x'; layers: 'c0', 'c1', "
                                                   r"'relu'$"):
            pipe.weights("x")  # a tensor, not a layer
        with pytest.raises(glcnn.GlcnnError, match="no weight texture 'u_slope'"):
            pipe.weight_layout("c0", "u_slope")
        assert pipe.weights("relu") == {}


def test_released_pipeline(ctx):
    pipe = glcnn.Pipeline(_chain(2), ctx)
    w = pipe.weights("c0")["W"]
    pipe.release()
    with pytest.raises(glcnn.GlcnnError, match="set_weights.* released Pipeline"):
        pipe.set_weights("c0", "W", w)
    with pytest.raises(glcnn.GlcnnError, match=r"weights\('c0'\) of a released Pipeline"):
        pipe.weights("c0")


def test_an_op_refusing_the_new_value_leaves_the_pipeline_alone(ctx):
    c = 6
    rng = np.random.default_rng(6)
    weights = {"scale": rng.standard_normal(c), "B": rng.standard_normal(c),
               "mean": rng.standard_normal(c), "var": rng.random(c) + 0.5}
    graph = single_op_graph("BatchNormalization", {}, [(c, 4, 5)], weights)
    x = rng.standard_normal((c, 4, 5)).astype(np.float32)
    with glcnn.Pipeline(graph, ctx) as pipe:
        y = pipe.run(x)
        with pytest.raises(glcnn.WeightError, match=r"layer 'y' \(BatchNormalization\): var "):
            pipe.set_weights("y", "var", -np.ones(c))
        np.testing.assert_array_equal(pipe.run(x), y)
        assert pipe.graph.nodes[0] is graph.nodes[0]  # no copy of the node was kept
        pipe.set_weights("y", "var", np.full(c, 4.0))  # float64 in: stored as float32
        expected = copy.deepcopy(graph)
        expected.nodes[0].weights["var"] = np.full(c, 4.0)
        assert_close(pipe.run(x), reference.run(expected, {"x0": x})["y"], "fp32",
                     "BatchNormalization after set_weights('var')")


def test_set_weights_from_another_thread_is_refused(ctx):
    with glcnn.Pipeline(_chain(2), ctx) as pipe:
        w = pipe.weights("c0")["W"]
        errors = []
        thread = threading.Thread(target=lambda: errors.append(_raised(
            lambda: pipe.set_weights("c0", "W", w + 1))))
        thread.start()
        thread.join(60)
        assert isinstance(errors[0], glcnn.ContextError), errors
        np.testing.assert_array_equal(pipe.weights("c0")["W"], w)


def _raised(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        return exc
    return None
