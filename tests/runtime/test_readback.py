"""Getting results out: numpy readback, asynchronous readback through pixel buffer objects,
and the output texture itself (no CPU round trip), against glcnn.graph.reference."""

import numpy as np
import pytest
from gl_census import census

import glcnn
from glcnn.graph import reference
from glcnn.graph.builder import Builder
from glcnn.layout import unpack


def _model(outputs=1):
    b = Builder(seed=5)
    x = b.input("x", (5, 9, 7))
    h = b.conv(x, 6, 3, padding=1, activation="Tanh", name="a")
    y = b.conv(h, 3, 3, stride=2, name="b")
    return b.build([y, h][:outputs])


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_async_readback_matches_reference(ctx, precision):
    graph = _model()
    x = np.random.default_rng(0).standard_normal((5, 9, 7)).astype(np.float32)
    ref = reference.run(graph, {"x": x})["b"]
    with glcnn.Pipeline(graph, ctx, precision=precision) as pipe:
        pending = pipe.run(x, readback="async")
        assert isinstance(pending, glcnn.Readback)
        y = pending.result()
        np.testing.assert_array_equal(y, pipe.run(x))  # the same bytes as a plain readback
        assert pipe.run(x[None], readback="async").result().shape == (1, 3, 4, 3)
    tol = glcnn.TOLERANCE[precision] * max(1.0, np.abs(ref).max())
    np.testing.assert_allclose(y, ref, atol=tol)


def test_async_readback_of_several_outputs(ctx):
    graph = _model(outputs=2)
    x = np.random.default_rng(1).standard_normal((5, 9, 7)).astype(np.float32)
    ref = reference.run(graph, {"x": x})
    with glcnn.Pipeline(graph, ctx) as pipe:
        outs = pipe.run(x, readback="async").result()
    assert set(outs) == {"a", "b"}
    for name, y in outs.items():
        np.testing.assert_allclose(y, ref[name], atol=1e-5)


def test_stale_readback_is_refused(ctx):
    graph = _model()
    x = np.zeros((5, 9, 7), np.float32)
    with glcnn.Pipeline(graph, ctx) as pipe:
        first = pipe.run(x, readback="async")
        pipe.run(x, readback=False)
        with pytest.raises(glcnn.GlcnnError, match="ran again"):
            first.result()
        last = pipe.run(x, readback="async")
    with pytest.raises(glcnn.GlcnnError, match="released"):
        last.result()


def test_texture_readback_returns_the_output_texture(ctx):
    graph = _model()
    x = np.random.default_rng(2).standard_normal((5, 9, 7)).astype(np.float32)
    ref = reference.run(graph, {"x": x})["b"]
    with glcnn.Pipeline(graph, ctx) as pipe:
        tex = pipe.run(x, readback="texture")
        assert tex is pipe.texture("b")
        data = np.frombuffer(tex.read(), np.float32).reshape(tex.height, tex.width, 4)
        np.testing.assert_allclose(unpack(data, (3, 4, 3)), ref, atol=1e-5)


def test_bad_readback_value(ctx):
    with glcnn.Pipeline(_model(), ctx) as pipe, pytest.raises(glcnn.GlcnnError, match="readback"):
        pipe.run(np.zeros((5, 9, 7), np.float32), readback="later")


def test_async_readback_allocates_nothing_per_run(ctx):
    x = np.zeros((5, 9, 7), np.float32)
    with glcnn.Pipeline(_model(), ctx) as pipe:
        pipe.run(x, readback="async").result()
        before = census()
        for _ in range(50):
            pipe.run(x, readback="async").result()
        assert census() == before
