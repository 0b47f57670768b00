"""The `glcnn` command: run/info on .npy and images, one-line errors with exit status 2."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import glcnn
from glcnn.graph import models, reference


def glcnn_cli(*args):
    exe = shutil.which("glcnn", path=str(Path(sys.executable).parent))
    cmd = [exe] if exe else [sys.executable, "-m", "glcnn.cli"]
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def dcgan_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "dcgan.npz"
    glcnn.save(models.dcgan_generator(nz=16, ngf=8, fuse=False), path)
    return path


def test_console_script_is_installed():
    assert shutil.which("glcnn", path=str(Path(sys.executable).parent)), \
        "the glcnn console script is not installed next to this Python"


def test_run_npy_matches_reference(dcgan_file, tmp_path):
    z = np.random.default_rng(0).standard_normal((1, 16, 1, 1)).astype(np.float32)
    np.save(tmp_path / "z.npy", z)
    done = glcnn_cli("run", dcgan_file, tmp_path / "z.npy", "-o", tmp_path / "y.npy")
    assert done.returncode == 0, done.stderr
    y = np.load(tmp_path / "y.npy")
    ref = reference.run(glcnn.load_graph(dcgan_file), {"z": z[0]})["main.13"]
    assert y.shape == (1, 3, 64, 64) and y.dtype == np.float32
    np.testing.assert_allclose(y[0], ref, atol=1e-5)


def test_run_image_to_image(tmp_path):
    graph = models.autoencoder(size=(16, 24))
    glcnn.save(graph, tmp_path / "ae.npz")
    pixels = np.random.default_rng(1).integers(0, 256, (16, 24, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "in.png")
    done = glcnn_cli("run", tmp_path / "ae.npz", tmp_path / "in.png", "-o", tmp_path / "out.png")
    assert done.returncode == 0, done.stderr
    x = pixels.transpose(2, 0, 1) / 255.0
    expected = np.round(reference.run(graph, {"image": x})["dec2"] * 255).transpose(1, 2, 0)
    out = np.asarray(Image.open(tmp_path / "out.png"), np.float64)
    assert out.shape == (16, 24, 3) and np.abs(out - expected).max() <= 1


def test_info_prints_layers_and_totals(dcgan_file):
    done = glcnn_cli("info", dcgan_file)
    assert done.returncode == 0, done.stderr
    assert "main.2" in done.stdout and "ConvTranspose+Relu" in done.stdout
    assert "MFLOPs" in done.stdout and "MiB textures" in done.stdout


@pytest.mark.parametrize("case", ["missing-model", "bad-input-shape", "not-a-model"])
def test_errors_are_one_line_exit_2(case, dcgan_file, tmp_path):
    np.save(tmp_path / "wrong.npy", np.zeros((1, 3, 2, 2), np.float32))
    (tmp_path / "junk.npz").write_bytes(b"junk")
    args = {"missing-model": ("run", tmp_path / "nope.npz", tmp_path / "wrong.npy"),
            "bad-input-shape": ("run", dcgan_file, tmp_path / "wrong.npy"),
            "not-a-model": ("info", tmp_path / "junk.npz")}[case]
    done = glcnn_cli(*args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("glcnn ") and "error:" in lines[0], done.stderr


@pytest.mark.parametrize("command", ["bench", "view"])
def test_open_size_model_without_a_size_is_one_line_error(command, tmp_path):
    import onnx
    from onnx import helper
    from onnx_models import make_model, rand
    model = make_model([helper.make_node("Conv", ["x", "W"], ["y"])], {"x": [1, 3, "H", "W"]},
                       {"y": None}, {"W": rand(2, 3, 1, 1)})
    onnx.save(model, str(tmp_path / "open.onnx"))
    done = glcnn_cli(command, tmp_path / "open.onnx")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert {"bench": "--input-size", "view": "--size W H"}[command] in done.stderr


@pytest.mark.gl
def test_view_runs_an_open_size_model_at_size(display, tmp_path):
    """`glcnn view` compiles an open-size model at `--size W H` (an identity 1×1 Conv: the
    output panel shows the input panel's pixels)."""
    import os

    import onnx
    from onnx import helper
    from onnx_models import make_model
    identity = np.eye(3, dtype=np.float32).reshape(3, 3, 1, 1)
    model = make_model([helper.make_node("Conv", ["x", "W"], ["y"])], {"x": [1, 3, "H", "W"]},
                       {"y": None}, {"W": identity})
    onnx.save(model, str(tmp_path / "open.onnx"))
    done = subprocess.run([sys.executable, "-m", "glcnn.cli", "view", str(tmp_path / "open.onnx"),
                           "--size", "40", "24", "--frames", "3", "--screenshot",
                           str(tmp_path / "shot.png")], env={**os.environ, "DISPLAY": display},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    from glcnn.viewer.window import panel_rect
    shot = np.asarray(Image.open(tmp_path / "shot.png").convert("RGB")).astype(np.int16)
    panels = []
    for index in (0, 1):  # input, output: both 40×24, shown the same way
        x0, y0, w, h = panel_rect(index, (40, 24))
        panels.append(shot[shot.shape[0] - (y0 + h):shot.shape[0] - y0, x0:x0 + w])
    assert panels[0].std() > 0 and np.abs(panels[0] - panels[1]).max() <= 1
