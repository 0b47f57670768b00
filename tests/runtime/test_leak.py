"""run() never allocates: GL object counts and texture bytes stay fixed over 1000 runs."""

import numpy as np
from gl_census import census

import glcnn
from glcnn.graph import models


def test_thousand_runs_allocate_nothing(ctx):
    # Small frames keep 1000 runs quick; the passes and textures are the same kinds.
    pipe = glcnn.Pipeline(models.autoencoder(size=(8, 8)), ctx)
    x = np.random.default_rng(0).random((3, 8, 8), np.float32)
    pipe.run(x)
    before = census()
    compiles = ctx.compiles
    for i in range(1000):
        pipe.run(x, readback=(i % 10 == 0))
    after = census()
    assert after == before, f"GL objects changed over 1000 runs: {before} -> {after}"
    assert ctx.compiles == compiles, "run() compiled a program"
    assert before["texture_bytes"] > 0 and before["Texture"] >= 5  # the census sees them
    pipe.release()


def test_release_frees_everything(ctx):
    before = census()
    pipe = glcnn.Pipeline(models.dcgan_generator(), ctx, precision="fp16")
    during = census()
    pipe.run(np.zeros((100, 1, 1), np.float32))
    pipe.release()
    after = census()
    assert during["Texture"] > before["Texture"]
    assert {k: v for k, v in after.items() if k != "Program"} == \
        {k: v for k, v in before.items() if k != "Program"}  # programs stay cached by design
