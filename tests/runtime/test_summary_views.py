"""`Pipeline.show` (glcnn.runtime.summary.Views): tensors and filter banks as PIL images for
notebooks, checked against the same normalisation written out in numpy on the reference."""

import numpy as np
import pytest

import glcnn
from glcnn.graph import models, reference
from glcnn.runtime.summary import filter_grid, tensor_grid, tile


def test_tile_lays_tiles_on_a_near_square_grid_with_gutters():
    tiles = np.arange(5 * 2 * 3, dtype=np.float64).reshape(5, 2, 3)
    grid = tile(tiles)  # 5 tiles: 3 columns, 2 rows
    assert grid.shape == (2 * 3 - 1, 3 * 4 - 1)
    np.testing.assert_array_equal(grid[3:5, 4:7], tiles[4])
    assert grid[2].max() == 0 and grid[:, 3].max() == 0 and grid[3:, 8:].max() == 0


def test_tensor_grid_one_scale_for_all_channels_and_rgb_for_three():
    x = np.stack([np.full((2, 2), v) for v in (-1.0, 0.0, 3.0, 1.0)])
    grid = tensor_grid(x)
    assert grid[0, 0] == 0 and grid[0, 3] == 0.25 and grid[3, 0] == 1 and grid[3, 3] == 0.5
    rgb = tensor_grid(x[:3])
    assert rgb.shape == (2, 2, 3) and rgb[0, 0].tolist() == [0, 0.25, 1]


def test_filter_grid_normalises_each_filter_on_its_own():
    w = np.zeros((2, 1, 2, 2))
    w[0, 0] = [[0, 1], [2, 3]]
    w[1, 0] = [[-10, 10], [0, 0]]
    grid = filter_grid(w)
    np.testing.assert_allclose(grid[:, :2], [[0, 1 / 3], [2 / 3, 1]])
    np.testing.assert_allclose(grid[:, 3:], [[0, 1], [0.5, 0.5]])
    w3 = np.random.default_rng(0).standard_normal((4, 3, 3, 3))
    assert filter_grid(w3).shape == (7, 7, 3)
    assert filter_grid(w3.repeat(2, axis=1)[:, :5], channel=1).shape == (7, 7)


@pytest.mark.gl
def test_show_a_tensor_and_a_filter_bank(ctx):
    graph = models.autoencoder(size=(8, 12))
    x = np.random.default_rng(1).random((3, 8, 12)).astype(np.float32)
    with glcnn.Pipeline(graph, ctx, keep="all") as pipe:
        pipe.run(x)
        enc1 = pipe.show("enc1", zoom=2)
        bank = pipe.show("enc1", filters=True)
        with pytest.raises(glcnn.GlcnnError):
            pipe.show("no-such-layer", filters=True)
    ref = reference.run(graph, {"image": x})["enc1"]
    expected = np.round(tensor_grid(ref) * 255)
    got = np.asarray(enc1, np.float64)[::2, ::2]
    assert enc1.mode == "L" and got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1
    w = next(n for n in graph.nodes if n.name == "enc1").weights["W"]
    np.testing.assert_allclose(np.asarray(bank, np.float64), np.round(filter_grid(w) * 255),
                               atol=1)
    assert bank.mode == "RGB" and hasattr(bank, "_repr_png_")  # inline in Jupyter
