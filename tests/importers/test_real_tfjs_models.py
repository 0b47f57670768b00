"""Real pretrained super-resolution models that npm packages ship (TF.js layers models),
against TF.js itself.

Each package is fetched with `npm pack NAME@VERSION`, its tarball pinned by SHA-256
(tests/tfjs_cases.py `npm_package`, cached in $GLCNN_CACHE or ~/.cache/glcnn); TF.js is the
pinned @tensorflow/tfjs 4.22.0 of tools/tfjs_fixtures, run in node with the cpu backend on
the package's own model definition (its `setup(tf)` registers the package's layer classes).
No npm, node or registry fails the test, never skips it. The photo is skimage's astronaut
(tests/real_models.py fetches it from scikit-image's wheel).

| model | package | scale | input range | error |
|---|---|---|---|---|
| RDN slim (12 Conv2D, UpSampling2D) | @upscalerjs/esrgan-slim 1.0.0 | ×2, ×4 | 0..255 | 1.4e-6 |
| RDN medium (28 Conv2D) | @upscalerjs/esrgan-medium 1.0.0 | ×2, ×4 | 0..255 | 1.5e-6 |
| RRDN GAN (154 Conv2D, custom layers) | @upscalerjs/esrgan-legacy 1.0.0 | ×4 | 0..1 | 1.3e-6 |

The GAN's custom classes (MultiplyBeta, PixelShuffle4x) get glcnn builders through
`glcnn.importers.tfjs.register_layer` as a user would (README "Custom TF.js layers"); the pins,
these builders and the inputs live in tests/real_models.py (bench/bench_real.py times the same
models). Every model leaves H and W open: each runs through `glcnn.load` (an OpenSizePipeline)
at 64×64 and 40×56 and through `glcnn run MODEL.json IN.npy -o OUT.npy` with no size hint (for
the GAN, `glcnn.cli.main` in a process that registered the builders first), compared with TF.js
on the same input: scaled error max|a - b| / max|b| <= 1e-4 at fp32 (the table: the worst
measured on llvmpipe). TF.js's outputs are cached by the hash of package, model and input.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from real_models import (
    PHOTOS,
    SrModel,
    fetch,
    model_json,
    register_builders,
    sr_photo,
    unregister_builders,
)
from real_models import SR_MODELS as MODELS
from real_models import SR_PACKAGES as PACKAGES
from tfjs_cases import TFJS, TOOLS, cache_dir, relative_error, tfjs_node_modules

import glcnn

pytestmark = pytest.mark.gl

TOLERANCE = 1e-4  # scaled error, fp32, as test_real_models.py
HERE = Path(__file__).resolve().parent
SIZES = [(64, 64), (40, 56)]  # (H, W) of the two inputs run through one OpenSizePipeline


@pytest.fixture(scope="module", autouse=True)
def builders():
    register_builders()
    yield
    unregister_builders()


# --- TF.js's own output --------------------------------------------------------------------------
# argv: tfjs_files.js, package folder, definition module, input .npy, output .npy; prints the
# definition's scale and ranges as JSON.
TFJS_SCRIPT = r"""
const tf = require('@tensorflow/tfjs');
const path = require('path');
const [files, pkg, definition, input, output] = process.argv.slice(2);
const {readNpy, writeTensor, loadModelDir} = require(files);

async function main() {
  const def = require(path.join(pkg, definition)).default;
  if (def.setup) def.setup(tf);  // registers the package's own layer classes
  await tf.setBackend('cpu');
  const model = await loadModelDir(path.dirname(path.join(pkg, def._internals.path)));
  await writeTensor(output, model.predict(readNpy(input)));
  console.log(JSON.stringify({scale: def.scale, inputRange: def.inputRange,
                              outputRange: def.outputRange, path: def._internals.path}));
}
main().catch((err) => { console.error(err.stack || err); process.exit(1); });
"""


def tfjs_reference(model: SrModel, x: np.ndarray, tmp_path: Path) -> tuple[np.ndarray, dict]:
    """TF.js's (cpu backend) output for NHWC `x`, and what the model definition says. Kept in
    the cache by the hash of the pinned package, the definition, TF.js's version and `x`
    (TF.js's cpu backend takes a minute on the GAN at 64×64)."""
    x = np.ascontiguousarray(x, np.float32)
    key = hashlib.sha256(f"{PACKAGES[model.package]} {model.definition} {TFJS} "
                         f"{x.shape}".encode() + x.tobytes()).hexdigest()[:32]
    kept = cache_dir() / "tfjs-outputs" / key
    if (kept / "info.json").is_file():
        return np.load(kept / "y.npy"), json.loads((kept / "info.json").read_text())
    script, src, dst = tmp_path / "sr.js", tmp_path / "tfjs_x.npy", tmp_path / "tfjs_y.npy"
    script.write_text(TFJS_SCRIPT)
    np.save(src, x)
    env = {**os.environ, "NODE_PATH": str(tfjs_node_modules())}
    done = subprocess.run(["node", str(script), str(TOOLS / "tfjs_files.js"),
                           str(model.folder()), model.definition, str(src), str(dst)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"TF.js failed on {model.definition}:\n{done.stderr[-2000:]}"
    y, info = np.load(dst), json.loads(done.stdout.strip().splitlines()[-1])
    part = kept.with_name(f"{key}.tmp{os.getpid()}")
    part.mkdir(parents=True, exist_ok=True)
    np.save(part / "y.npy", y)
    (part / "info.json").write_text(json.dumps(info))
    try:
        part.rename(kept)  # whole or not at all
    except OSError:  # another process got there first
        shutil.rmtree(part, ignore_errors=True)
    return y, info


# --- inputs --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def astronaut() -> Image.Image:
    path = next(p for m, p in fetch(PHOTOS).items() if m.endswith("astronaut.png"))
    return Image.open(path).convert("RGB")


def check(model_id: str, y: np.ndarray, ref: np.ndarray, x: np.ndarray) -> float:
    scale = MODELS[model_id].scale
    assert ref.shape == (1, x.shape[1] * scale, x.shape[2] * scale, 3), ref.shape
    err = relative_error(np.asarray(y).reshape(ref.shape), ref)
    assert err <= TOLERANCE, (f"{model_id} on {x.shape}: scaled error {err:.3g} > {TOLERANCE} "
                              "against TF.js")
    return err


# --- tests ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("model_id", MODELS)
def test_load_matches_tfjs(model_id, astronaut, tmp_path):
    model = MODELS[model_id]
    name = "LR_input" if "gans" in model.definition else "LR"
    assert glcnn.open_inputs(model_json(model)) == {name: (1, "H", "W", 3)}
    with glcnn.load(model_json(model)) as pipe:
        assert isinstance(pipe, glcnn.OpenSizePipeline)
        for size in SIZES:
            x = sr_photo(astronaut, size, model.input_range)
            ref, info = tfjs_reference(model, x, tmp_path)
            assert (info["scale"], info["inputRange"]) == (model.scale, [0, model.input_range])
            assert model_json(model, info) == model_json(model)
            err = check(model_id, pipe.run(x), ref, x)
            print(f"{model_id} at {size}: scaled error {err:.2g}")


@pytest.mark.parametrize("model_id", MODELS)
def test_cli_matches_tfjs(model_id, astronaut, tmp_path):
    """`glcnn run MODEL.json IN.npy -o OUT.npy`, no size hint; for the GAN through
    glcnn.cli.main after registering its builders (a user's wrapper script)."""
    model = MODELS[model_id]
    x = sr_photo(astronaut, SIZES[0], model.input_range)
    np.save(tmp_path / "in.npy", x)
    args = ["run", str(model_json(model)), str(tmp_path / "in.npy"), "-o",
            str(tmp_path / "out.npy")]
    code = ("import sys; from glcnn.cli import main; "
            + ("from real_models import register_builders; register_builders(); "
               if "gans" in model.definition else "")
            + f"sys.exit(main({args!r}))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent),
                                                         os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=900, env=env)
    assert done.returncode == 0, f"glcnn run {model_id} failed:\n{done.stderr[-2000:]}"
    check(model_id, np.load(tmp_path / "out.npy"), tfjs_reference(model, x, tmp_path)[0], x)
