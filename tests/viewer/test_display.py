"""GPU min/max normalisation against numpy (no window: the shared EGL context)."""

import numpy as np
import pytest

import glcnn
from glcnn.graph.builder import Builder
from glcnn.layout import unpack
from glcnn.viewer.display import Display


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 7, 5), (13, 9, 33), (64, 16, 16)])
def test_minmax_matches_numpy_on_signed_values(ctx, shape):
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 50 - 10).astype(np.float32)
    b = Builder()
    graph = b.build([b.input("x", shape)])
    with glcnn.Pipeline(graph, ctx) as pipe:
        pipe.upload("x", x)
        display = Display(ctx)
        result = display.minmax(pipe.texture("x"), shape)
        data = np.frombuffer(result.read(), np.float32).reshape(result.height, result.width, 4)
        mm = unpack(data, (shape[0], 1, 2))
        np.testing.assert_array_equal(mm[:, 0, 0], x.min(axis=(1, 2)))
        np.testing.assert_array_equal(mm[:, 0, 1], x.max(axis=(1, 2)))
        display.release()
