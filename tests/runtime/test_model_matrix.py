"""Seven PyTorch-exported models of different families, loaded together in one process with
`glcnn.load`'s defaults and run interleaved, against onnxruntime (issue 17's "must show").

Run on every driver of CI's matrix (llvmpipe, softpipe, the reduced-limits run): a result that
is right on one Mesa driver and wrong on another is a glcnn bug (DESIGN.md 6). The inputs are
large enough that the blocked convs' input atlases pass 32768 RGBA32F texels, where softpipe's
buffer textures wrap (glcnn.runtime.context.Context.buffer_fits).
"""

import numpy as np
import onnxruntime as ort
import pytest
import torch
from onnx_torch_models import (
    BilinearUNet,
    MobileNetV2,
    Pix2PixUNet,
    dcgan,
    espcn,
    export,
    fast_style,
    randomize_batchnorm,
)
from torch_models import Autoencoder

import glcnn

# name -> (module factory, input shape (N, C, H, W))
MODELS = {
    "autoencoder": (Autoencoder, (1, 3, 64, 96)),
    "dcgan_generator": (dcgan, (1, 16, 1, 1)),
    "mobilenet_v2": (MobileNetV2, (1, 3, 96, 96)),
    "fast_style": (fast_style, (1, 3, 128, 128)),
    "bilinear_unet": (BilinearUNet, (1, 3, 96, 128)),
    "pix2pix_unet": (Pix2PixUNet, (1, 3, 128, 128)),
    "odd_shapes": (lambda: espcn(3), (1, 1, 45, 37)),  # 1 -> 16 -> 8 -> 9 channels, odd sizes
}
TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "u8": 5e-2}  # max |y - ort| / max |ort|


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """name -> (ONNX path, input, onnxruntime's output)."""
    folder = tmp_path_factory.mktemp("matrix")
    out = {}
    for i, (name, (make, shape)) in enumerate(MODELS.items()):
        torch.manual_seed(i)
        module = randomize_batchnorm(make(), seed=i)
        x = np.random.default_rng(i).uniform(-1, 1, shape).astype(np.float32)
        path = export(module, torch.from_numpy(x), folder / f"{name}.onnx")
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        out[name] = (path, x, session.run(None, {"input": x})[0])
    return out


def _error(y, expected) -> float:
    return float(np.abs(y - expected.reshape(y.shape)).max() / np.abs(expected).max())


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_seven_models_loaded_together_match_onnxruntime(ctx, exported, precision):
    pipes = {name: glcnn.load(path, precision=precision) for name, (path, _, _) in
             exported.items()}
    try:
        assert len({id(p.ctx) for p in pipes.values()}) == 1  # the thread's default context
        errors = {}
        for round_ in range(2):
            for name, pipe in pipes.items():  # interleaved: every model between two runs
                _, x, expected = exported[name]
                errors[name, round_] = _error(pipe.run(x), expected)
        bad = {k: e for k, e in errors.items() if not e <= TOLERANCE[precision]}
        assert not bad, f"{precision} on {pipes['autoencoder'].ctx.renderer}: {bad}"
    finally:
        for pipe in pipes.values():
            pipe.release()


def test_seven_models_in_u8_calibrated_through_load(ctx, exported):
    """u8 storage calibrated on the one sample input it then runs, through glcnn.load."""
    pipes = {name: glcnn.load(path, precision="u8", calibration=x) for name, (path, x, _) in
             exported.items()}
    try:
        errors = {name: _error(pipes[name].run(x), expected)
                  for name, (_, x, expected) in exported.items()}
        bad = {k: e for k, e in errors.items() if not e <= TOLERANCE["u8"]}
        assert not bad, f"u8 on {pipes['autoencoder'].ctx.renderer}: {bad} (all: {errors})"
    finally:
        for pipe in pipes.values():
            pipe.release()
