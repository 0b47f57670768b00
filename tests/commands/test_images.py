"""Input and output files of the glcnn command (glcnn.commands.images, GL-free): --mean,
--std, --scale, --bgr, --layout against the formula written out in numpy, the uint8 .npy
note, and image outputs that clip (counted, warned about) or do not."""

import numpy as np
import pytest
from PIL import Image

from glcnn import GlcnnError, ShapeError
from glcnn.commands.images import Preprocess, numbers, read_input, write_output

RGB = np.random.default_rng(3).integers(0, 256, (5, 7, 3), dtype=np.uint8)


@pytest.fixture
def png(tmp_path):
    path = tmp_path / "in.png"
    Image.fromarray(RGB).save(path)
    return path


def chw(pixels) -> np.ndarray:
    return pixels.transpose(2, 0, 1).astype(np.float64)


def test_image_scaled_to_the_model_input_range(png):
    x = read_input(png, (3, 5, 7), {"input_range": [-1, 1]})
    np.testing.assert_allclose(x, chw(RGB) / 255 * 2 - 1, atol=1e-6)


def test_mean_and_std_apply_per_channel_after_the_range(png):
    prep = Preprocess(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    x = read_input(png, (3, 5, 7), {"input_range": [0, 1]}, prep)
    mean, std = np.array(prep.mean)[:, None, None], np.array(prep.std)[:, None, None]
    np.testing.assert_allclose(x, (chw(RGB) / 255 - mean) / std, atol=1e-5)


def test_scale_multiplies_raw_pixels_and_bgr_swaps_before_the_mean(png):
    prep = Preprocess(mean=(103.9, 116.8, 123.7), scale=1.0, bgr=True)
    x = read_input(png, (3, 5, 7), {"input_range": [0, 1]}, prep)
    expected = chw(RGB)[::-1] - np.array(prep.mean)[:, None, None]
    np.testing.assert_allclose(x, expected, atol=1e-4)


def test_the_model_meta_gives_defaults_and_flags_override_them(png):
    meta = {"input_range": [0, 1], "mean": [0.5], "std": [0.25], "channel_order": "bgr"}
    x = read_input(png, (3, 5, 7), meta)
    np.testing.assert_allclose(x, (chw(RGB)[::-1] / 255 - 0.5) / 0.25, atol=1e-5)
    y = read_input(png, (3, 5, 7), meta, Preprocess(mean=(0,), std=(1,)))
    np.testing.assert_allclose(y, chw(RGB)[::-1] / 255, atol=1e-6)


@pytest.mark.parametrize("prep,match", [(Preprocess(mean=(1, 2)), "--mean gives 2 values"),
                                        (Preprocess(std=(1, 0, 1)), "standard deviation of 0")])
def test_bad_mean_or_std_is_a_clear_error(png, prep, match):
    with pytest.raises(GlcnnError, match=match):
        read_input(png, (3, 5, 7), {}, prep)


def test_numbers_parses_comma_lists():
    assert numbers("0.5,-1,2e-3") == (0.5, -1.0, 0.002)
    for bad in ("a,b", "1,,2", "nan"):
        with pytest.raises(ValueError):
            numbers(bad)


def test_nhwc_npy_is_transposed_and_a_wrong_shape_named(tmp_path):
    x = np.random.default_rng(0).random((2, 3, 4)).astype(np.float32)  # (C, H, W)
    np.save(tmp_path / "x.npy", x.transpose(1, 2, 0)[None])
    got = read_input(tmp_path / "x.npy", (2, 3, 4), {}, Preprocess(layout="nhwc"))
    np.testing.assert_array_equal(got, x)
    np.save(tmp_path / "bad.npy", np.zeros((1, 4, 3, 2), np.float32))
    with pytest.raises(ShapeError, match="--layout nhwc takes"):
        read_input(tmp_path / "bad.npy", (2, 3, 4), {}, Preprocess(layout="nhwc"))


def test_uint8_npy_is_fed_raw_with_a_note(tmp_path, capsys):
    raw = np.arange(24, dtype=np.uint8).reshape(1, 2, 3, 4) * 10
    np.save(tmp_path / "u8.npy", raw)
    x = read_input(tmp_path / "u8.npy", (2, 3, 4), {"input_range": [0, 1]})
    np.testing.assert_array_equal(x, raw.astype(np.float32))
    assert "u8.npy is uint8: fed as its raw 0..255 values" in capsys.readouterr().err
    np.save(tmp_path / "f.npy", raw.astype(np.float32))
    read_input(tmp_path / "f.npy", (2, 3, 4), {})
    assert "note" not in capsys.readouterr().err


def test_an_image_output_that_clips_is_counted_and_warned(tmp_path, capsys):
    y = np.linspace(-1, 1, 3 * 4 * 5, dtype=np.float32).reshape(1, 3, 4, 5)  # a tanh output
    clipped = write_output(tmp_path / "y.png", y, (0, 1))
    below = int((y < 0).sum())
    assert clipped == pytest.approx(below / y.size)
    err = capsys.readouterr().err
    assert f"{100 * below / y.size:.1f} % of the output values were clipped" in err
    assert "--output-range" in err
    assert write_output(tmp_path / "z.png", y, (-1, 1)) == 0
    assert capsys.readouterr().err == ""
    written = np.asarray(Image.open(tmp_path / "z.png"), np.float64)
    np.testing.assert_allclose(written, np.round((chw_back(y[0]) + 1) / 2 * 255), atol=0)


def chw_back(y: np.ndarray) -> np.ndarray:
    return y.transpose(1, 2, 0).astype(np.float64)


def test_npy_output_never_clips(tmp_path, capsys):
    y = np.full((1, 3, 2, 2), 7.0, np.float32)
    assert write_output(tmp_path / "y.npy", y, (0, 1)) == 0
    assert capsys.readouterr().err == "" and np.load(tmp_path / "y.npy").max() == 7


def test_image_flags_on_a_npy_input_are_refused(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 5, 7), np.float32))
    with pytest.raises(GlcnnError, match="--mean --bgr: for image inputs; x.npy is a .npy"):
        read_input(tmp_path / "x.npy", (3, 5, 7), {}, Preprocess(mean=(0.5,), bgr=True))
