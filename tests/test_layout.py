"""The tile-grid layout: numpy pack/unpack, the documented C=10 picture, GPU round trips."""

import numpy as np
import pytest
from helpers import atlas_texels, single_op_graph

import glcnn
from glcnn.layout import Atlas, Blocking, pack, pack_channels, pack_filters, unpack

CHANNELS = (1, 3, 5, 13, 64, 257)
SIZES = ((1, 1), (7, 33), (33, 7), (33, 33))
STORAGE = {"fp32": np.float32, "fp16": np.float16}


def _wide_range(shape, seed=0):
    """Values spanning many magnitudes and both signs, with exact zeros."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 10.0 ** rng.uniform(-6, 4, shape)
    x[rng.random(shape) < 0.1] = 0.0
    return x.astype(np.float32)


def _expected(x, precision):
    return x.astype(STORAGE[precision]).astype(np.float32)


def _case_id(c, hw, precision=None):
    return f"c{c}-{hw[0]}x{hw[1]}" + (f"-{precision}" if precision else "")


CASES = [(c, hw) for c in CHANNELS for hw in SIZES]
CASE_IDS = [_case_id(c, hw) for c, hw in CASES]


# --- numpy twins -------------------------------------------------------------------------
@pytest.mark.parametrize(("c", "hw"), CASES, ids=CASE_IDS)
def test_pack_unpack_round_trip(c, hw):
    x = _wide_range((c, *hw))
    data = pack(x)
    atlas = Atlas(c, *hw)
    assert data.shape == (atlas.size[1], atlas.size[0], 4), f"C={c} HxW={hw}"
    np.testing.assert_array_equal(unpack(data, x.shape), x, err_msg=f"C={c} HxW={hw}")


@pytest.mark.parametrize(("c", "hw"), CASES, ids=CASE_IDS)
def test_pack_zero_fills_unused_lanes_and_tiles(c, hw):
    data = pack(np.ones((c, *hw), np.float32))
    assert data.sum() == c * hw[0] * hw[1], f"C={c} HxW={hw}: padding is not zero"


@pytest.mark.parametrize(("slices", "cols", "rows"),
                         [(1, 1, 1), (2, 2, 1), (3, 2, 2), (4, 2, 2), (5, 3, 2), (10, 4, 3),
                          (65, 9, 8)])
def test_grid_is_near_square(slices, cols, rows):
    atlas = Atlas(4 * slices - 1, 2, 3)
    assert (atlas.slices, atlas.cols, atlas.rows) == (slices, cols, rows)
    assert atlas.size == (cols * 3, rows * 2)


def test_documented_c10_picture():
    """C=10, H=3, W=4: 3 slices in a 2×2 grid, slice 2 at tile (0, 1), tile (1, 1) empty."""
    c, h, w = 10, 3, 4
    x = np.arange(1, c * h * w + 1, dtype=np.float32).reshape(c, h, w)
    data = pack(x)
    assert data.shape == (2 * h, 2 * w, 4)
    assert Atlas(c, h, w).shape_uniform == (10, 3, 4, 2)
    for ch in range(c):
        s, lane = divmod(ch, 4)
        tx, ty = s % 2, s // 2
        tile = data[ty * h:(ty + 1) * h, tx * w:(tx + 1) * w, lane]
        np.testing.assert_array_equal(tile, x[ch], err_msg=f"channel {ch}")
    np.testing.assert_array_equal(data[h:, :w, 1], x[9])  # channel 9: slice 2, tile (0, 1)
    assert not data[h:, :w, 2:].any(), "lanes 2, 3 of slice 2 must be zero"
    assert not data[h:, w:].any(), "the empty tile (1, 1) must be zero"


def test_texel_formula():
    x = _wide_range((13, 5, 7), seed=1)
    atlas = Atlas.of(x.shape)
    data = pack(x)
    for ch, y, xx in [(0, 0, 0), (5, 4, 6), (12, 2, 3), (9, 0, 6)]:
        s = ch // 4
        tx, ty = s % atlas.cols, s // atlas.cols
        assert data[ty * 5 + y, tx * 7 + xx, ch % 4] == x[ch, y, xx], f"(c, y, x)={ch, y, xx}"


def test_pack_filters_places_taps():
    w = _wide_range((6, 3, 2, 5), seed=2)  # (Co, Cg, kh, kw)
    data = pack_filters(w)
    assert data.shape == (2 * 2, 3 * 5, 4)
    for o, c, ky, kx in [(0, 0, 0, 0), (5, 2, 1, 4), (3, 1, 0, 2), (4, 0, 1, 3)]:
        s = o // 4
        assert data[s * 2 + ky, c * 5 + kx, o % 4] == w[o, c, ky, kx], f"{o, c, ky, kx}"
    assert not data[2:, :, 2:].any(), "output lanes 6, 7 must be zero"


def test_pack_channels_rows():
    a, b = np.arange(5, dtype=np.float32), -np.arange(5, dtype=np.float32)
    data = pack_channels(a, b)
    assert data.shape == (2, 2, 4)
    np.testing.assert_array_equal(data[0].reshape(-1), [0, 1, 2, 3, 4, 0, 0, 0])
    np.testing.assert_array_equal(data[1].reshape(-1), [0, -1, -2, -3, -4, 0, 0, 0])


# --- through real textures -------------------------------------------------------------------
def _identity_pipeline(ctx, c, hw, precision):
    """Add of a zero constant: a real shader pass that must reproduce its input exactly."""
    graph = single_op_graph("Add", {}, [(c, *hw)], {"B": np.zeros(1, np.float32)})
    return glcnn.Pipeline(graph, ctx, precision=precision)


GPU_CASES = [(c, hw, p) for c, hw in CASES for p in STORAGE]
GPU_IDS = [_case_id(c, hw, p) for c, hw, p in GPU_CASES]


@pytest.mark.parametrize(("c", "hw", "precision"), GPU_CASES, ids=GPU_IDS)
def test_texture_round_trip(ctx, c, hw, precision):
    x = _wide_range((c, *hw), seed=c)
    expected = _expected(x, precision)
    what = f"C={c} HxW={hw} {precision}"
    with _identity_pipeline(ctx, c, hw, precision) as pipe:
        pipe.upload("x0", x)
        np.testing.assert_array_equal(pipe.read("x0"), expected, err_msg=f"upload/read {what}")
        np.testing.assert_array_equal(pipe.run(x), expected, err_msg=f"shader pass {what}")
        raw = atlas_texels(pipe.texture("y"), (c, *hw))  # the texture may be larger: zeros
        np.testing.assert_array_equal(raw, pack(expected).astype(STORAGE[precision]),
                                      err_msg=f"raw output texture vs layout.pack, {what}")


def test_fp16_shader_writes_are_within_one_ulp(ctx):
    """A float32 result stored in RGBA16F is off by less than one fp16 ulp.

    Round-to-nearest would give half an ulp; llvmpipe truncates towards zero, which is why
    TOLERANCE["fp16"] allows about 2^-10 per stored layer.
    """
    x = _expected(_wide_range((8, 16, 16), seed=3), "fp16")
    graph = single_op_graph("Mul", {}, [x.shape], {"B": np.float32([1 / 3])})
    with glcnn.Pipeline(graph, ctx, precision="fp16") as pipe:
        y = pipe.run(x)
    exact = x * np.float32(1 / 3)
    normal = np.abs(exact) >= 2.0**-14
    ulp = 2.0 ** (np.floor(np.log2(np.abs(exact[normal]))) - 10)
    assert np.all(np.abs(y[normal] - exact[normal]) < ulp), "fp16 store off by ≥ 1 ulp"
    assert np.all(np.abs(y[~normal] - exact[~normal]) < 2.0**-24), "subnormal store off"


# --- texture sides: never a power of two (Pipeline textures; llvmpipe compiles per pattern) ---
def test_texture_side_is_the_next_size_that_is_not_a_power_of_two():
    from glcnn.layout import texture_side
    want = {1: 3, 2: 3, 3: 3, 4: 5, 7: 7, 8: 9, 24: 24, 64: 65, 1000: 1000, 4096: 4097}
    assert {n: texture_side(n, 16384) for n in want} == want
    for n in range(1, 5000):
        side = texture_side(n, 16384)
        assert side >= n and side & (side - 1) != 0 and side - n <= 2
    assert texture_side(16384, 16384) == 16384  # no room: the size as it is
    assert texture_side(4, 4) == 4 and texture_side(2, 4) == 3


@pytest.mark.parametrize("shape", [(64, 40, 40), (24, 9, 9), (3, 7, 9), (200, 2, 96), (4, 1, 40),
                                   (512, 3, 3), (96, 14, 14)])
@pytest.mark.parametrize("block", [(2, 4), (1, 8)])
@pytest.mark.parametrize("min_width", [0, 64, 128, 512])
@pytest.mark.parametrize("max_width", [16384, 40])
@pytest.mark.parametrize("band_limit", [0, 2])
def test_blocked_cells_lie_apart_inside_the_target(shape, block, min_width, max_width,
                                                   band_limit):
    """Every cell of a Blocking (band b of slice s) lies inside its render target, no two
    overlap, each group's cells sit side by side from a multiple of the pitch, the cells are
    grouped only when the strip is spread, and no band is taller than `band_limit`."""
    b = Blocking(shape, *block, 1, max_width=max_width, min_width=min_width,
                 band_limit=band_limit)
    assert b.band_rows <= (band_limit or b.tile[0]) and b.bands * b.band_rows >= b.tile[0]
    (rows, cols), width = (b.band_rows, b.tile[1]), b.group * b.tile[1]
    taken = np.zeros(b.size[::-1], int)
    for cell in range(b.cells):
        x, y = b.cell_origin(cell)
        assert x + cols <= b.size[0] and y + rows <= b.size[1], (cell, b)
        taken[y:y + rows, x:x + cols] += 1
        assert (x - cell % b.group * cols) % b.pitch == 0 and width <= b.pitch, (cell, b)
    assert taken.max() == 1
    spread = b.cells * cols < min_width and b.cells > min_width // 64
    assert (b.group > 1) == spread, b


def test_a_spread_strip_packs_one_group_per_thread():
    """64 channels at 40² in 1×8 blocks on two threads: 16 cells of 5 columns, 8 a group, the
    second group one screen tile (64 texels) on; each spread alone would leave 3 of every 8
    columns empty between cells."""
    b = Blocking((64, 40, 40), 1, 8, 1, min_width=128)
    assert (b.group, b.pitch, b.size) == (8, 64, (128, 40))
    assert [b.cell_origin(c) for c in (0, 1, 7, 8, 15)] == [(0, 0), (5, 0), (35, 0), (64, 0),
                                                          (99, 0)]
    assert b.band_uniform == (1, 40, 8)
    unspread = Blocking((64, 40, 40), 1, 8, 1, min_width=0)
    assert (unspread.group, unspread.pitch, unspread.size) == (1, 5, (80, 40))
