"""`glcnn run` (glcnn.commands.run): folders through one pipeline, pre-processing flags and
image outputs checked against the numpy reference, progress bars on a terminal only."""

import io
import re
import sys

import numpy as np
import pytest
from PIL import Image

import glcnn
from glcnn.cli import main
from glcnn.graph import models, reference

pytestmark = pytest.mark.gl  # the command makes its own GL context

SIZE = (16, 24)


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture(scope="module")
def ae_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "ae.npz"
    glcnn.save(models.autoencoder(size=SIZE), path)
    return path


def pixels(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (*SIZE, 3), dtype=np.uint8)


def expected_png(graph, rgb: np.ndarray, lo=0.0, hi=1.0) -> np.ndarray:
    y = reference.run(graph, {"image": rgb.transpose(2, 0, 1) / 255.0})["dec2"]
    return np.round(np.clip((y - lo) / (hi - lo), 0, 1) * 255).transpose(1, 2, 0)


def run_cli(monkeypatch, capsys, *args, terminal=False):
    """main(args) in this process; (status, stdout, stderr)."""
    if terminal:
        stream = Terminal()
        monkeypatch.setattr(sys, "stderr", stream)
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, stream.getvalue() if terminal else err


def test_folder_runs_every_image_through_one_pipeline(ae_file, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    for i, name in enumerate(["b.png", "a.PNG", "c.bmp"]):
        Image.fromarray(pixels(i)).save(folder / name)
    (folder / "notes.txt").write_text("not an image")
    made = []
    real = glcnn.commands.run.Pipeline

    def counted(*args, **kwargs):
        made.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(glcnn.commands.run, "Pipeline", counted)
    status, out, _ = run_cli(monkeypatch, capsys, "run", ae_file, folder, "-o", tmp_path / "out")
    assert status == 0 and len(made) == 1
    assert re.search(r"^3 images in [\d.]+ s \([\d.]+ images/s\)", out, re.M), out
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.png", "b.png", "c.png"]
    graph = glcnn.load_graph(ae_file)
    for i, stem in enumerate(["b", "a", "c"]):
        written = np.asarray(Image.open(tmp_path / "out" / f"{stem}.png"), np.float64)
        assert np.abs(written - expected_png(graph, pixels(i))).max() <= 1


@pytest.mark.parametrize("case", ["no-output", "no-images", "twin-stems"])
def test_folder_errors_are_one_line(case, ae_file, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    if case != "no-images":
        Image.fromarray(pixels(0)).save(folder / "x.png")
    if case == "twin-stems":
        Image.fromarray(pixels(1)).save(folder / "x.jpg")
    args = ["run", ae_file, folder] + ([] if case == "no-output" else ["-o", tmp_path / "o"])
    status, _, err = run_cli(monkeypatch, capsys, *args)
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert {"no-output": "give -o OUTDIR", "no-images": "no images",
            "twin-stems": "share a stem"}[case] in err


def test_progress_bars_on_a_terminal_unless_quiet(ae_file, tmp_path, monkeypatch, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    Image.fromarray(pixels(0)).save(folder / "x.png")
    _, _, err = run_cli(monkeypatch, capsys, "run", ae_file, folder, "-o", tmp_path / "o",
                        terminal=True)
    assert "compiling" in err and "images:" in err
    for quiet in (["-q", "run"], ["run", "--quiet"]):
        _, _, err = run_cli(monkeypatch, capsys, *quiet, ae_file, folder, "-o", tmp_path / "o",
                            terminal=True)
        assert "compiling" not in err and "images:" not in err
    _, _, err = run_cli(monkeypatch, capsys, "run", ae_file, folder, "-o", tmp_path / "o")
    assert "compiling" not in err  # stderr is not a terminal here


def test_output_range_maps_and_clipping_is_warned(ae_file, tmp_path, monkeypatch, capsys):
    Image.fromarray(pixels(4)).save(tmp_path / "x.png")
    graph = glcnn.load_graph(ae_file)
    status, _, err = run_cli(monkeypatch, capsys, "run", ae_file, tmp_path / "x.png", "-o",
                             tmp_path / "y.png", "--output-range", "0.5,0.6")
    assert status == 0
    written = np.asarray(Image.open(tmp_path / "y.png"), np.float64)
    assert np.abs(written - expected_png(graph, pixels(4), 0.5, 0.6)).max() <= 1
    y = reference.run(graph, {"image": pixels(4).transpose(2, 0, 1) / 255.0})["dec2"]
    share = 100 * np.mean((y < 0.5) | (y > 0.6))
    found = re.search(r"([\d.]+) % of the output values were clipped", err)
    assert found and abs(float(found.group(1)) - share) <= 0.3, err
    status, _, err = run_cli(monkeypatch, capsys, "run", ae_file, tmp_path / "x.png", "-o",
                             tmp_path / "z.png", "--output-range", "-1,1")  # joined for argparse
    assert status == 0 and "clipped" not in err
    written = np.asarray(Image.open(tmp_path / "z.png"), np.float64)
    assert np.abs(written - expected_png(graph, pixels(4), -1, 1)).max() <= 1


def test_preprocessing_flags_feed_the_model_what_the_formula_says(ae_file, tmp_path,
                                                                  monkeypatch, capsys):
    Image.fromarray(pixels(5)).save(tmp_path / "x.png")
    status, _, _ = run_cli(monkeypatch, capsys, "run", ae_file, tmp_path / "x.png", "-o",
                           tmp_path / "y.npy", "--bgr", "--scale", "0.004", "--mean",
                           "0.1,0.2,0.3", "--std", "0.5")
    assert status == 0
    x = (pixels(5).transpose(2, 0, 1)[::-1] * 0.004 - np.array([.1, .2, .3])[:, None, None]) / .5
    ref = reference.run(glcnn.load_graph(ae_file), {"image": x})["dec2"]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy").reshape(ref.shape), ref, atol=1e-5)


def test_layout_nhwc_npy_and_uint8_note(ae_file, tmp_path, monkeypatch, capsys):
    x = np.random.default_rng(6).random((3, *SIZE)).astype(np.float32)
    np.save(tmp_path / "x.npy", x.transpose(1, 2, 0)[None])
    status, _, _ = run_cli(monkeypatch, capsys, "run", ae_file, tmp_path / "x.npy", "-o",
                           tmp_path / "y.npy", "--layout", "nhwc")
    assert status == 0
    ref = reference.run(glcnn.load_graph(ae_file), {"image": x})["dec2"]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy").reshape(ref.shape), ref, atol=1e-5)
    np.save(tmp_path / "u8.npy", pixels(7).transpose(2, 0, 1)[None])
    status, _, err = run_cli(monkeypatch, capsys, "run", ae_file, tmp_path / "u8.npy")
    assert status == 0 and "u8.npy is uint8: fed as its raw 0..255 values" in err


def test_bench_takes_an_image_input(ae_file, tmp_path, monkeypatch, capsys):
    """`--input IMAGE` is read as run reads it: resized to the model's size (noted)."""
    Image.fromarray(np.zeros((20, 30, 3), np.uint8)).save(tmp_path / "x.jpg")
    from functools import partial

    from glcnn.commands import bench
    monkeypatch.setattr(bench, "Settings", partial(bench.Settings, load_times=False, settle=0))
    status, out, err = run_cli(monkeypatch, capsys, "bench", ae_file, "--input",
                               tmp_path / "x.jpg", "--runs", "2", "--warmup", "1",
                               "--budget", "0.2")
    assert status == 0, err
    assert f"input 'image' (1, 3, {SIZE[0]}, {SIZE[1]})" in out
    assert "resizing x.jpg from 30x20" in err


def test_diff_shows_compile_and_comparison_progress_on_a_terminal(ae_file, tmp_path,
                                                                   monkeypatch, capsys):
    Image.fromarray(pixels(8)).save(tmp_path / "x.png")
    status, out, err = run_cli(monkeypatch, capsys, "diff", ae_file, tmp_path / "x.png",
                               terminal=True)
    assert status == 0 and "within tolerance" in out
    assert "compiling" in err and "comparing 4 layers with numpy" in err
    status, _, err = run_cli(monkeypatch, capsys, "diff", ae_file, tmp_path / "x.png", "-q",
                             terminal=True)
    assert status == 0 and "comparing" not in err
