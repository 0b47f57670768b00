"""The shipped, trained autoencoder runs and reconstructs the shipped photo."""

from pathlib import Path

import numpy as np
from PIL import Image

import glcnn
from glcnn.graph import reference

ROOT = Path(__file__).resolve().parents[1]


def psnr(a, b) -> float:
    return float(10 * np.log10(1.0 / np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def test_autoencoder_reconstructs_held_out_photo(ctx):
    x = np.asarray(Image.open(ROOT / "demos/data/coffee_128.png").convert("RGB"), np.float32)
    x = x.transpose(2, 0, 1) / 255.0
    model = glcnn.load(ROOT / "weights/autoencoder.npz", ctx)
    y = model.run(x)
    ref = reference.run(glcnn.load_graph(ROOT / "weights/autoencoder.npz"), {"image": x})["dec2"]
    assert np.abs(y - ref).max() < 1e-5
    # Held-out photo (never trained on): far better than 4x down/up-sampling, measured 38.6 dB
    # at full size by train/train_autoencoder.py.
    assert psnr(y, x) > 30, psnr(y, x)
    blurred = np.asarray(Image.fromarray((x.transpose(1, 2, 0) * 255).astype(np.uint8))
                         .resize((32, 24), Image.BOX).resize((128, 96), Image.BILINEAR),
                         np.float32).transpose(2, 0, 1) / 255.0
    assert psnr(y, x) > psnr(blurred, x) + 5
    model.release()
