"""A built wheel carries shaders/ and weights/ and resolves them from the installed copy."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from glcnn.ops import REGISTRY

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(ROOT)], check=True)
    return next(out.glob("glcnn-*.whl"))


def test_wheel_lists_every_shader_and_weight(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    shaders = {cls.shader for cls in REGISTRY.values()} | {"common.glsl", "fullscreen.vert"}
    missing = [s for s in shaders if f"glcnn/shaders/{s}" not in names]
    assert not missing, f"wheel lacks shaders {missing}"
    weights = [p.name for p in (ROOT / "weights").glob("*.npz")]
    assert all(f"glcnn/weights/{w}" in names for w in weights), weights


def test_installed_wheel_finds_and_compiles_every_shader(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), str(wheel)], check=True)
    script = (
        "import glcnn, glcnn.ops as ops\n"
        "from glcnn.resources import resource_path\n"
        f"assert glcnn.__file__.startswith({str(target)!r}), glcnn.__file__\n"
        "paths = {resource_path('shaders', c.shader) for c in ops.REGISTRY.values()}\n"
        f"assert all(str(p).startswith({str(target)!r}) for p in paths), paths\n"
        "from glcnn import models\n"
        "import numpy as np\n"
        "y = glcnn.Pipeline(models.autoencoder()).run(np.zeros((3, 32, 32), np.float32))\n"
        "print('ok', len(paths), y.shape)\n"
    )
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")
