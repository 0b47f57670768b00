"""The `glcnn` command: run/info on .npy and images, one-line errors with exit status 2."""

import re
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


# --- the command explains itself -------------------------------------------------------------
TFJS_AE = Path(__file__).resolve().parent / "data" / "tfjs" / "autoencoder"


def test_version_from_the_script_and_python_m_glcnn():
    from importlib import metadata
    for done in (glcnn_cli("--version"),
                 subprocess.run([sys.executable, "-m", "glcnn", "--version"],
                                capture_output=True, text=True)):
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"glcnn {metadata.version('glcnn')}"
    assert metadata.version("glcnn") == glcnn.__version__


def test_python_m_glcnn_runs_like_the_script(dcgan_file, tmp_path):
    z = np.random.default_rng(2).standard_normal((1, 16, 1, 1)).astype(np.float32)
    np.save(tmp_path / "z.npy", z)
    done = subprocess.run([sys.executable, "-m", "glcnn", "run", str(dcgan_file),
                           str(tmp_path / "z.npy"), "-o", str(tmp_path / "y.npy")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    ref = reference.run(glcnn.load_graph(dcgan_file), {"z": z[0]})["main.13"]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy")[0], ref, atol=1e-5)
    bad = subprocess.run([sys.executable, "-m", "glcnn", "info", str(tmp_path / "nope.npz")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("glcnn info: error:"), bad.stderr


@pytest.mark.parametrize("command", ["run", "info", "diff", "bench", "view"])
def test_help_lists_every_model_format(command):
    done = glcnn_cli(command, "--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    for form in (".onnx", "glcnn .npz", "TF.js model.json", "the folder holding it",
                 "autoencoder"):
        assert form in text, f"glcnn {command} --help does not mention {form!r}"


def test_run_help_lists_each_flag():
    text = glcnn_cli("run", "--help").stdout
    for flag in ("--mean", "--std", "--scale", "--bgr", "--layout", "--output-range",
                 "--quiet", "--input-size", "--precision"):
        assert flag in text


def test_tfjs_folder_is_a_model_path_for_run_info_diff(tmp_path):
    x = TFJS_AE / "input_enc1_input.npy"
    done = glcnn_cli("run", TFJS_AE, x, "-o", tmp_path / "y.npy")
    assert done.returncode == 0, done.stderr
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), np.load(TFJS_AE / "output_dec2.npy"),
                               atol=1e-5)
    done = glcnn_cli("run", TFJS_AE, x, "-o", tmp_path / "y.png")  # an NHWC output as image
    assert done.returncode == 0, done.stderr
    expected = np.round(np.load(TFJS_AE / "output_dec2.npy")[0] * 255)
    assert np.abs(np.asarray(Image.open(tmp_path / "y.png"), np.float64) - expected).max() <= 1
    info = glcnn_cli("info", TFJS_AE)
    assert info.returncode == 0 and "enc1" in info.stdout, info.stderr
    diff = glcnn_cli("diff", TFJS_AE, x)
    assert diff.returncode == 0 and "within tolerance" in diff.stdout, diff.stdout + diff.stderr


@pytest.mark.gl
def test_tfjs_folder_and_short_names_for_glcnn_load(ctx):
    x = np.load(TFJS_AE / "input_enc1_input.npy")
    y = glcnn.load(TFJS_AE, ctx=ctx).run(x)
    np.testing.assert_allclose(y, np.load(TFJS_AE / "output_dec2.npy"), atol=1e-5)
    assert glcnn.load("autoencoder", ctx=ctx).graph.inputs == {"image": (3, 96, 128)}


def test_shipped_models_by_short_name_from_outside_the_repository(tmp_path):
    from glcnn.importers import model_path, shipped_models
    assert {"autoencoder", "dcgan_shapes"} <= set(shipped_models())
    assert model_path("autoencoder") == shipped_models()["autoencoder"]
    assert model_path("autoencoder").is_file()
    with pytest.raises(glcnn.ModelFileError, match="shipped models, by short name: autoencoder"):
        glcnn.load_graph("autoencodr")
    exe = shutil.which("glcnn", path=str(Path(sys.executable).parent))
    done = subprocess.run([exe, "info", "dcgan_shapes"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0 and "dcgan_shapes.npz" in done.stdout, done.stderr


def test_a_file_in_the_working_folder_wins_over_a_short_name(tmp_path, monkeypatch):
    from glcnn.importers import model_path
    monkeypatch.chdir(tmp_path)
    (tmp_path / "autoencoder").mkdir()
    (tmp_path / "autoencoder" / "model.json").write_text("{}")
    assert model_path("autoencoder") == Path("autoencoder") / "model.json"


@pytest.mark.parametrize("value", ["0", "off", "No", "false"])
def test_glcnn_cache_off_never_makes_a_folder_named_after_it(value, tmp_path, monkeypatch):
    """demos/upscale.py read GLCNN_CACHE as a folder and made one named `0`."""
    from glcnn.resources import caching, download_dir
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GLCNN_CACHE", value)
    folder = download_dir("pkg")
    assert not caching() and folder.name == "pkg" and folder.is_absolute()
    assert value not in folder.parts and not (tmp_path / value).exists()
    monkeypatch.setenv("GLCNN_CACHE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert caching() and download_dir("pkg") == tmp_path / "xdg" / "glcnn" / "pkg"


def test_glcnn_cache_is_read_in_one_place():
    """Every demo, benchmark and test asks glcnn.resources (caching, download_dir)."""
    root = Path(__file__).resolve().parents[1]
    reads = re.compile(r'environ(\.get\(|\[)\s*"GLCNN_CACHE"')
    readers = [p.relative_to(root).as_posix() for folder in ("glcnn", "demos", "bench", "tests")
               for p in (root / folder).rglob("*.py") if reads.search(p.read_text())]
    assert readers == ["glcnn/resources.py"]
