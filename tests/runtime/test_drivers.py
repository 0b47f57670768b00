"""The driver matrix: the op and model parity tests again on other GL drivers (DESIGN.md 6).

A result right on llvmpipe and wrong on another driver is a glcnn bug, so the parity subset
below runs, in subprocesses started side by side, on

- **softpipe** (`GALLIUM_DRIVER=softpipe`): Mesa's other software rasteriser, single-threaded
  and several times slower, with its own texture and buffer code (it found the buffer-texture
  wrap that Context.buffer_fits now probes for);
- **gl33-small-limits**: llvmpipe forced down to GL 3.3 / GLSL 330, with glcnn's view of the
  limits cut to small real-world values (GLCNN_GL_LIMITS), so every fallback path (filters and
  inputs in 2D textures instead of buffer textures, in-place blocked reading, smaller
  textures) runs on a real driver against the reference;
- **llvmpipe-mesa25**: llvmpipe of Mesa 25.0.7 (Debian 12's backport, fetched and unpacked
  by tests/mesa_backport.py; loaded through LD_LIBRARY_PATH, nothing installed), the Mesa of
  current distributions, whose shader compiler keeps loops that Mesa 22.3 unrolls;
- **zink-lavapipe**: the same Mesa's zink, OpenGL over Vulkan, on lavapipe: GLSL goes through
  SPIR-V to another driver, which has its own texture, framebuffer and format code.

On machines the backport cannot run on (not x86-64 Linux with dpkg-deb) the matrix says so
and runs without the last two; where it could run but cannot be fetched, the test fails.

The subset covers every shader variant: direct, blocked, in-place, buffer and no-buffer
weights and inputs, transposed, every op, each precision, and seven whole models. Each
subprocess first checks that it got the driver and limits it asked for
(tests/runtime/test_contexts.py::test_driver_is_the_one_asked_for).
"""

import os
import subprocess
import sys
from pathlib import Path

import mesa_backport
import pytest

pytestmark = pytest.mark.gl  # GL in its subprocesses

REPO = Path(__file__).resolve().parents[2]
SMALL_LIMITS = "texture=4096,buffer=65536,draw_buffers=8,attachments=8,units=16,layers=256"
DRIVERS = {
    "softpipe": {"GALLIUM_DRIVER": "softpipe"},
    "gl33-small-limits": {"GALLIUM_DRIVER": "llvmpipe", "MESA_GL_VERSION_OVERRIDE": "3.3",
                          "MESA_GLSL_VERSION_OVERRIDE": "330", "GLCNN_GL_LIMITS": SMALL_LIMITS},
    # + mesa_backport.env(): the backported Mesa
    "llvmpipe-mesa25": {"GALLIUM_DRIVER": "llvmpipe", "GLCNN_EXPECT_MESA": mesa_backport.VERSION},
    "zink-lavapipe": {"GLCNN_EXPECT_ZINK": "1", "GLCNN_EXPECT_MESA": mesa_backport.VERSION},
}
BACKPORTED = ("llvmpipe-mesa25", "zink-lavapipe")
OPS = ("conv", "ops", "math", "transpose", "concat", "pool", "resize", "pad", "instancenorm",
       "softmax", "gemm", "reduce", "depth_to_space", "flatten", "binary", "rearrange",
       "matmul", "layernorm", "reduce_channels", "softmax_axes")
SUBSET = ["tests/runtime/test_contexts.py", "tests/test_layout.py",
          *(f"tests/ops/test_{name}.py" for name in OPS),
          "tests/graph/test_fuse_affine.py", "tests/graph/test_fuse_gate.py",
          "tests/graph/test_fuse_resize.py",
          "tests/runtime/test_precision.py",
          "tests/runtime/test_model_matrix.py"]
TIMEOUT = 1800  # s per driver; softpipe takes about ... of it (README "Drivers")


def _environment(driver: str) -> dict[str, str]:
    """The environment of `driver`'s run; fails the test if the backported Mesa it needs
    cannot be fetched."""
    env = {**os.environ, **DRIVERS[driver], "GLCNN_REQUIRE_GL": "1",
           "GLCNN_EXPECT_DRIVER": driver}
    if driver in BACKPORTED:
        try:
            env |= mesa_backport.env(mesa_backport.root(), zink=driver == "zink-lavapipe")
        except mesa_backport.Unavailable as exc:
            pytest.fail(f"{driver}: {exc}")
    return env


def _start(env: dict[str, str], log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUBSET]
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=log.open("w"),
                            stderr=subprocess.STDOUT)


@pytest.mark.slow
def test_parity_subset_passes_on_every_driver(tmp_path):
    if os.environ.get("GLCNN_EXPECT_DRIVER"):
        pytest.fail("the driver matrix started itself again (GLCNN_EXPECT_DRIVER set)")
    drivers = list(DRIVERS)
    if mesa_backport.available():
        print(f"{', '.join(BACKPORTED)} left out: {mesa_backport.available()}")
        drivers = [d for d in drivers if d not in BACKPORTED]
    envs = {driver: _environment(driver) for driver in drivers}  # before any run starts
    runs = {driver: _start(envs[driver], tmp_path / f"{driver}.log") for driver in drivers}
    failed = {}
    for driver, run in runs.items():
        try:
            code = run.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            run.kill()
            code = "timeout"
        text = (tmp_path / f"{driver}.log").read_text()
        closing = text.strip().splitlines()[-1] if text.strip() else "(no output)"
        print(f"{driver}: {closing}")
        if code != 0 or " passed" not in closing or "failed" in closing:
            failed[driver] = text[-6000:]
    assert not failed, "\n\n".join(f"--- {d} ---\n{t}" for d, t in failed.items())
