"""Network bending: an edit changes exactly the layers downstream; reset is bit-exact."""

import numpy as np
import pytest

import glcnn
from glcnn.graph import models, reference
from glcnn.viewer.bending import Bender

LAYERS = ["enc1", "enc2", "dec1", "dec2"]


def _run_all(pipe, x):
    pipe.run(x, readback=False)
    return {name: pipe.read(name) for name in LAYERS}


@pytest.mark.parametrize("layer,channel", [("enc2", 17), ("dec1", 5)])
def test_zero_channel_changes_exactly_downstream(ctx, layer, channel):
    graph = models.autoencoder(size=(16, 24))
    x = np.random.default_rng(0).random((3, 16, 24), np.float32)
    with glcnn.Pipeline(graph, ctx, keep="all") as pipe:
        before = _run_all(pipe, x)
        edited = models.autoencoder(size=(16, 24))  # same seeded weights, edited by hand
        node = edited.node(layer)
        if node.op == "Conv":
            node.weights["W"][channel] = 0
        else:
            node.weights["W"][:, channel] = 0
        node.weights["B"][channel] = 0
        expected = reference.run(edited, {"image": x})

        Bender(pipe).zero(layer, channel)
        after = _run_all(pipe, x)
        first = LAYERS.index(layer)
        for name in LAYERS[:first]:
            np.testing.assert_array_equal(after[name], before[name], err_msg=name)
        for name in LAYERS[first:]:
            assert not np.array_equal(after[name], before[name]), name
            np.testing.assert_allclose(after[name], expected[name], atol=1e-5, err_msg=name)
        assert np.all(after[layer][channel] == 0)  # ReLU(0 + 0)


def test_scale_invert_undo_reset(ctx):
    graph = models.autoencoder(size=(8, 8))
    x = np.random.default_rng(1).random((3, 8, 8), np.float32)
    with glcnn.Pipeline(graph, ctx, keep="all") as pipe:
        original = pipe.run(x)
        bender = Bender(pipe)
        bender.scale("enc1", 3, 2.0)
        scaled = pipe.run(x)
        bender.invert("dec2", 1)
        assert not np.array_equal(pipe.run(x), scaled)
        bender.undo()
        np.testing.assert_array_equal(pipe.run(x), scaled)
        bender.reset()
        np.testing.assert_array_equal(pipe.run(x), original)


def test_replace_filter_and_errors(ctx):
    graph = models.autoencoder(size=(8, 8))
    x = np.random.default_rng(2).random((3, 8, 8), np.float32)
    with glcnn.Pipeline(graph, ctx) as pipe:
        bender = Bender(pipe)
        bender.replace("enc1", 0, np.ones((3, 4, 4)), bias=0.5)
        assert np.all(pipe.weights("enc1")["W"][0] == 1)
        assert pipe.weights("enc1")["B"][0] == 0.5
        edited = models.autoencoder(size=(8, 8))  # same seeded weights, edited by hand
        edited.node("enc1").weights["W"][0] = 1
        edited.node("enc1").weights["B"][0] = 0.5
        np.testing.assert_allclose(pipe.run(x), reference.run(edited, {"image": x})["dec2"],
                                   atol=1e-5)
        np.testing.assert_array_equal(graph.node("enc1").weights["W"],  # the graph stays
                                      models.autoencoder(size=(8, 8)).node("enc1").weights["W"])
        with pytest.raises(glcnn.GlcnnError, match="expected \\(3, 4, 4\\)"):
            bender.replace("enc1", 0, np.ones((3, 3, 3)))
        with pytest.raises(glcnn.GlcnnError, match="64 output channels"):
            bender.zero("enc1", 64)
        with pytest.raises(glcnn.GlcnnError, match="no layer"):
            bender.zero("nope", 0)
