"""The viewer's overlay (text from a glyph atlas, rectangles, lines) and its GL-free parts."""

import numpy as np
import pytest

import glcnn
from glcnn.viewer.labels import read_labels
from glcnn.viewer.overlay import CHARS, GlyphAtlas, Overlay
from glcnn.viewer.panels import LinePlot, true_scale_views


def test_glyph_atlas_has_every_character_in_its_own_cell():
    atlas = GlyphAtlas(12)
    assert set(atlas.cells) == set(CHARS)
    h, w = atlas.image.shape
    for ch, (u0, v0, u1, v1) in atlas.cells.items():
        assert 0 <= u0 < u1 <= w and 0 <= v0 < v1 <= h, ch
        inked = atlas.image[v0:v1, u0:u1].max() > 128
        assert inked == (ch != " "), ch
    assert atlas.width("ab") == atlas.advance["a"] + atlas.advance["b"]


def render(ctx, size, draw):
    tex = ctx.gl.texture(size, 4)
    fbo = ctx.gl.framebuffer(color_attachments=[tex])
    fbo.use()
    fbo.clear(0.0, 0.0, 0.0, 1.0)
    overlay = Overlay(ctx, size)
    draw(overlay)
    overlay.flush()
    image = np.frombuffer(tex.read(), np.uint8).reshape(size[1], size[0], 4)[::-1, :, :3]
    overlay.release()
    ctx.park()
    fbo.release()
    tex.release()
    return overlay.atlas, image.astype(int)


def test_text_is_the_atlas_glyphs_pixel_for_pixel(ctx):
    """White text over black: the atlas cells blended in order (alpha = coverage), as numpy
    composites them, at whole pixels."""
    text = "enc1 (64, 48) Wg"
    atlas, image = render(ctx, (160, 40), lambda o: o.text(5, 7, text, (1.0, 1.0, 1.0, 1.0)))
    expected = np.zeros((40, 160))
    pen = 5
    for ch in text:
        u0, v0, u1, v1 = atlas.cells[ch]
        alpha = atlas.image[v0:v1, u0:u1] / 255
        region = expected[40 - 7 - (v1 - v0):40 - 7, pen:pen + u1 - u0]
        region[:] = alpha + region * (1 - alpha)
        pen += atlas.advance[ch]
    assert np.abs(image[..., 0] - np.round(expected * 255)).max() <= 2
    assert (image[..., 0] > 128).sum() > 60, "text is drawn"


def test_rectangles_and_lines_land_on_their_pixels(ctx):
    def draw(o):
        o.rect(10, 5, 4, 3, (1.0, 0.0, 0.0, 1.0))
        o.line([(0.5, 20.5), (39.5, 20.5)], (0.0, 1.0, 0.0, 1.0))
    _, image = render(ctx, (40, 30), draw)
    red = image[..., 0] == 255
    assert red.sum() == 12 and red[30 - 8:30 - 5, 10:14].all()
    green_rows = np.nonzero((image[..., 1] == 255).any(axis=1))[0]
    assert list(green_rows) == [30 - 21]


def test_true_scale_only_for_upscalers_that_would_shrink():
    assert true_scale_views((3, 96, 128), (3, 192, 256)) is None  # fits: shown whole at 1:1
    assert true_scale_views((3, 96, 128), (3, 96, 128)) is None
    assert true_scale_views((3, 192, 256), (3, 384, 512)) == ((64, 32, 128, 128),
                                                              (128, 64, 256, 256))
    assert true_scale_views((3, 100, 100), (3, 300, 300)) == ((7, 7, 85, 85),  # r-aligned
                                                              (21, 21, 255, 255))


def test_line_plot_keeps_the_last_values_per_series():
    plot = LinePlot(length=3)
    for v in range(5):
        plot.add("loss", v)
    plot.add("lr", 0.1)
    assert list(plot.series["loss"]) == [2, 3, 4] and list(plot.series["lr"]) == [0.1]


def test_labels_file_one_name_per_line(tmp_path):
    (tmp_path / "l.txt").write_text("cat\ndog\n\nbird\n")
    assert read_labels(tmp_path / "l.txt") == ["cat", "dog", "", "bird"]
    with pytest.raises(glcnn.GlcnnError, match="--labels .*nope.txt.*cannot read"):
        read_labels(tmp_path / "nope.txt")
