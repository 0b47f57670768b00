"""bench/conv_bound.py's four weight paths compute the conv they claim to, against a float64
numpy conv (the "uniform" one against the conv whose every weight block is its mat4), on a
small case: 2 output and input slices at 16², 1×1 and 3×3. Nothing is timed here."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import conv_bound as cb  # noqa: E402


@pytest.mark.parametrize(("variant", "kernel"), [
    (v, k) for k in (1, 3) for v in cb.variants(k, 2)])
def test_each_weight_path_is_the_conv(ctx, variant, kernel):
    bound = cb.Bound(16, 8, ctx, seed=3, kernel=kernel)
    try:
        assert bound.error(variant) < 1e-4
    finally:
        bound.release()


def test_reference_is_a_padded_cross_correlation():
    x = np.zeros((1, 3, 3))
    x[0, 0, 0] = 1.0
    w = np.arange(9.0).reshape(1, 1, 3, 3)
    out = cb.reference(x, w)
    # input pixel (0, 0) reaches output (y, x) through tap (1 - y, 1 - x)
    assert out[0, 0, 0] == 4.0 and out[0, 1, 1] == 0.0 and out[0, 0, 1] == 3.0


def test_blocks_are_the_shaders_mat4_columns():
    w = np.random.default_rng(0).standard_normal((8, 4, 3, 3))
    packed = cb.blocks(w)  # [so, c slice, tap, in lane k, out lane]
    assert packed.shape == (2, 1, 9, 4, 4)
    assert packed[1, 0, 5, 2, 3] == np.float32(w[7, 2, 1, 2])


def test_a_1x1_kernel_packs_one_tap():
    w = np.random.default_rng(1).standard_normal((4, 8, 1, 1))
    packed = cb.blocks(w)
    assert packed.shape == (1, 2, 1, 4, 4)
    assert packed[0, 1, 0, 3, 2] == np.float32(w[2, 7, 0, 0])


def test_pairs_are_offered_for_1x1_convs_of_whole_pairs_only():
    assert cb.PAIRED in cb.variants(1, 2)
    assert cb.PAIRED not in cb.variants(1, 3)
    assert cb.PAIRED not in cb.variants(3, 2)
