"""Load + compile + first run of a model in fresh processes, for `glcnn bench`.

Cold: Mesa's on-disk shader cache disabled (MESA_SHADER_CACHE_DISABLE=true), so llvmpipe
JIT-compiles every shader at its first draw, and glcnn's prepared-model cache off
(GLCNN_CACHE=0), so the model is imported and optimised from its file. Warm: both caches
enabled (in temporary folders of their own), after two priming runs. Two, because Mesa's
cache fills in two steps: the first process stores the compiled GLSL and llvmpipe's machine
code for it, the second finds the GLSL in the cache but JIT-compiles its shaders once more
(under another key) and stores that; only the third runs entirely from the cache (MobileNetV2
fp16 measured here: first run 2.6 s, 1.2 s, then 0.2-0.3 s). Each process runs `probe` and
prints its timings as one JSON line.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ..errors import GlcnnError

CACHE_ENV = "MESA_SHADER_CACHE_DISABLE"


# --- load and compile in fresh processes ------------------------------------------------------
def load_times(model, precision: str, feeds: dict, input_size=None) -> dict:
    """Cold and warm load + compile + first run of `model` in fresh processes (see `probe`),
    at `input_size` (H, W) for a model with open input sizes.

    Returns:
        {"cold": ..., "warm": ...}, each probe's milliseconds.
    Raises:
        GlcnnError: a probe process failed (its last stderr line).
    """
    with tempfile.TemporaryDirectory() as folder:
        inputs = Path(folder) / "inputs.npz"
        np.savez(inputs, **feeds)
        size = "x".join(map(str, input_size)) if input_size else ""
        cold = _probe(model, precision, inputs, size, {CACHE_ENV: "true", "GLCNN_CACHE": "0"})
        caches = {"GLCNN_CACHE": "1", "GLCNN_CACHE_DIR": str(Path(folder) / "prepared"),
                  "MESA_SHADER_CACHE_DIR": str(Path(folder) / "mesa")}
        for _ in range(2):  # fill both caches (see the module docstring)
            _probe(model, precision, inputs, size, caches)
        warm = _probe(model, precision, inputs, size, caches)
    return {"cold": cold, "warm": warm}


def _probe(model, precision, inputs, size: str, env_extra) -> dict:
    # PYTHONDONTWRITEBYTECODE would make every probe compile glcnn's modules from source,
    # which an installed package does not do.
    env = {k: v for k, v in os.environ.items()
           if k not in (CACHE_ENV, "GLCNN_DEBUG", "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(import_root()),
                                                      env.get("PYTHONPATH")]))
    # import_ms is `import glcnn` alone, what a program loading a model pays: not this
    # module's own imports (subprocess and the rest: ~20 ms), which only the probe needs.
    code = ("import time; start = time.perf_counter(); import glcnn; "
            "imported = time.perf_counter(); import sys; "
            "from glcnn.commands.bench_load import probe; probe(start, imported, *sys.argv[1:])")
    done = subprocess.run([sys.executable, "-c", code, str(model), precision, str(inputs),
                           size],
                          capture_output=True, text=True, env=env | env_extra, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise GlcnnError(f"load-time probe of {model} failed: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def import_root() -> Path:
    """The folder holding this glcnn package: on a probe's PYTHONPATH, it imports this glcnn,
    installed or a checkout (its own modules, e.g. glcnn/inputs.py, must not be top-level)."""
    return Path(__file__).resolve().parents[2]


def probe(start: float, imported: float, model: str, precision: str, inputs: str,
          size: str = "") -> None:
    """In a fresh process: print one JSON line with the ms of importing glcnn (from `start`
    to `imported`, perf_counter times), loading and optimising `model` (at `size` "HxW" if
    not empty), creating the context, compiling the Pipeline and its first run on the arrays
    of the `inputs` .npz, and their sum; plus the programs the Pipeline compiled. u8
    calibration (for a model without ranges) is timed apart, not in the sum."""
    ms = {"import_ms": (imported - start) * 1e3}
    from ..importers.prepared import load_optimized
    from ..ops import build_ops
    from ..runtime.context import Context
    from ..runtime.pipeline import Pipeline
    from .diff import calibrate_if_needed
    with np.load(inputs, allow_pickle=False) as data:
        feeds = dict(data)
    lap = _stopwatch()
    graph = load_optimized(model, input_size=tuple(map(int, size.split("x"))) if size else None)
    ms["load_ms"] = lap()
    ctx = Context.default(build_ops(graph)[0])  # as glcnn.load makes it for this model
    ms["context_ms"] = lap()
    calibrate_if_needed(graph, precision, feeds, ctx)
    ms["calibrate_ms"], calibration_programs = lap(), ctx.compiles
    pipe = Pipeline(graph, ctx, precision)
    ms["compile_ms"] = lap()
    pipe.run(feeds)
    ms["first_run_ms"] = lap()
    ms["total_ms"] = sum(v for k, v in ms.items() if k != "calibrate_ms")
    print(json.dumps(ms | {"programs": ctx.compiles - calibration_programs}))


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1e3


def _stopwatch():
    """A function returning the ms since its previous call (the first: since now)."""
    last = time.perf_counter()

    def lap() -> float:
        nonlocal last
        ms, last = _ms_since(last), time.perf_counter()
        return ms
    return lap
