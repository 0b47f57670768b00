"""The filter grid (shaders/filter_grid.glsl) drawn offscreen, checked texel by texel."""

import numpy as np
import pytest

from glcnn.layout import pack_filters
from glcnn.viewer.filters import FilterBank, FilterGrid

GUTTER = np.array([0.3, 0.3, 0.34]) * 255  # filter_grid.glsl's gutter colour


def is_gutter(pixels):
    return bool((np.abs(pixels - GUTTER) <= 1).all())


def bright_bank(co, cg, k, channel_of=lambda i: 0):
    """Filter i: a bright tap at position i (row-major in k x k) of input channel
    channel_of(i), a dimmer one at the last position, small noise elsewhere."""
    rng = np.random.default_rng(co)
    w = rng.uniform(-0.1, 0.1, (co, cg, k, k)).astype(np.float32) * 1e-3 - 2.0
    for i in range(co):
        w[i, channel_of(i), (i % (k * k)) // k, i % k] = 5.0 + i  # each tile has its own range
    return w


def draw(ctx, w, in_channel=0, scale=4):
    co, cg, kh, kw = w.shape
    bank = FilterBank(kh, kw, cg, co)
    packed = pack_filters(w)
    tex = ctx.gl.texture((packed.shape[1], packed.shape[0]), 4, packed.tobytes(), dtype="f4")
    gw, gh = bank.grid_size()
    out = ctx.gl.texture((gw * scale, gh * scale), 4)
    fbo = ctx.gl.framebuffer(color_attachments=[out])
    grid = FilterGrid(ctx)
    grid.draw(fbo, (0, 0, gw * scale, gh * scale), tex, bank, in_channel)
    image = np.frombuffer(out.read(), np.uint8).reshape(gh * scale, gw * scale, 4)[::-1, :, :3]
    grid.release()
    ctx.park()  # fbo is bound: releasing it then leaves GL pointing at a deleted one
    for obj in (fbo, out, tex):
        obj.release()
    return bank, image[scale // 2::scale, scale // 2::scale].astype(int)  # one pixel per texel


def tile(image, bank, o):
    row, col = divmod(o, bank.cols)
    y, x = 1 + row * (bank.kh + 1), 1 + col * (bank.kw + 1)
    return image[y:y + bank.kh, x:x + bank.kw]


@pytest.mark.parametrize("co", [16, 13])
def test_rgb_bank_shows_each_filters_bright_tap_in_its_colour(ctx, co):
    w = bright_bank(co, 3, 4, channel_of=lambda i: i % 3)
    bank, image = draw(ctx, w)
    assert bank.rgb and image.shape[:2] == (bank.grid_size()[1], bank.grid_size()[0])
    for o in range(co):
        t = tile(image, bank, o)
        y, x = divmod(o % 16, 4)
        expected = np.zeros(3, int)
        expected[o % 3] = 255  # the bright tap is that filter's max; the rest its min
        assert (t[y, x] == expected).all(), (o, t[y, x])
        others = np.ones((4, 4), bool)
        others[y, x] = False
        assert t[others].max() <= 1, o  # normalised per filter: its own range, not the bank's
    rows = -(-co // bank.cols)
    assert is_gutter(image[0]) and is_gutter(image[:, 0])
    for r in range(rows):
        assert is_gutter(image[(r + 1) * 5])  # one gutter texel between tile rows
    if co == 13:  # unused tiles of the 4 x 4 grid are gutter-coloured
        assert is_gutter(tile(image, bank, 15))


def test_grey_bank_shows_the_chosen_input_channel(ctx):
    w = bright_bank(9, 5, 3, channel_of=lambda i: 2)
    bank, image = draw(ctx, w, in_channel=2)
    assert not bank.rgb
    for o in range(9):
        t = tile(image, bank, o)
        assert (t[..., 0] == t[..., 1]).all()
        y, x = divmod(o, 3)
        assert t[y, x, 0] == 255 and np.sum(t[..., 0] > 1) == 1, o
    _, other = draw(ctx, w, in_channel=7)  # wraps to channel 2 of 5
    assert (other == image).all()
    _, flat = draw(ctx, w, in_channel=1)  # channel 1: noise around -2 only, normalised too
    assert flat.max() == 255 and flat.min() < 100
