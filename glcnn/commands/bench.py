"""`glcnn bench`: time a compiled model in total and per layer, against onnxruntime and PyTorch.

    report = glcnn.commands.bench.bench("model.onnx", against=("onnxruntime", "torch"))
    print(glcnn.commands.bench_report.format_report(report))   # the table `glcnn bench` prints

What is measured, all wall clock (GL timer queries are meaningless on llvmpipe):
- glcnn `pipe.run(x)` (upload, one draw per pass, readback), and `pipe.run(x,
  readback=False)` followed by `ctx.gl.finish()`;
- per layer: each pass's draw between two `ctx.gl.finish()` calls (so passes cannot
  overlap, and the layers add up to more than a whole run);
- load + compile + first run in a fresh process (`glcnn.commands.bench_load`): cold, with Mesa's
  on-disk shader cache disabled (MESA_SHADER_CACHE_DISABLE=true) and glcnn's prepared-model
  cache off (GLCNN_CACHE=0), and warm, after two priming runs with both caches enabled.
  The first run is included because llvmpipe JIT-compiles each shader at its first draw;
- the implementations of `glcnn.commands.bench_refs` (onnxruntime, PyTorch) on the same input;
- median and min ms over up to `runs` runs after `warmup` runs; a measurement stops early
  once it has spent `budget` seconds (with at least 3 runs, or `runs` if fewer), so large
  models stay affordable; FPS = 1000 / median; nominal GFLOP/s = Σ op.flops() of the glcnn
  pipeline / median (the same FLOPs for every implementation);
- ratio = glcnn ms / other ms, both with readback: lower is better for glcnn.

Before anything is timed, every implementation's output is compared with every other's
(max abs difference; MismatchError when the scaled difference, see
`glcnn.commands.bench_refs.Agreement`, exceeds AGREEMENT of the glcnn precision, 1e-3 between
two fp32 implementations), so nothing wrong is timed.
"""

import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from ..errors import GlcnnError, MismatchError, ShapeError
from .bench_load import load_times
from .bench_refs import agreement, check_against, chw_inputs, make_reference

# How far two implementations' outputs may differ (scaled, see bench_refs.Agreement) before a
# benchmark refuses to time them: glcnn at each precision against onnxruntime or PyTorch, and
# those two against each other ("fp32"). Looser than glcnn.TOLERANCE, which bounds one op's
# error against the float64 reference: here whole models run in float32 on every side, each
# runtime's own rounding (its kernels' accumulation order) compounds over dozens of layers,
# and the check only has to catch a wrong computation, not grade accuracy.
AGREEMENT = {"fp32": 1e-3, "fp16": 1e-2, "u8": 5e-2}
MIN_RUNS = 3


@dataclass
class Settings:
    """How long to measure.

    Args:
        runs: most timed runs per measurement.
        warmup: untimed runs before them (the output check has already run once).
        budget: seconds after which a measurement stops (once it has MIN_RUNS runs).
        load_times: also measure cold and warm load in fresh processes (4 subprocesses).
        settle: seconds of pause before timing each implementation: onnxruntime's threads
            spin after a run (measured here: 25-45 ms of CPU in the next second; torch's
            5-10 ms), which would slow the next implementation's first runs on 2 cores.
    """

    runs: int = 30
    warmup: int = 5
    budget: float = 3.0
    load_times: bool = True
    settle: float = 0.2

    def check(self) -> None:
        """Raises GlcnnError: runs < 1, warmup < 0, budget ≤ 0 or settle < 0."""
        if self.runs < 1 or self.warmup < 0 or not self.budget > 0 or self.settle < 0:
            raise GlcnnError(f"need runs ≥ 1, warmup ≥ 0, budget > 0 and settle ≥ 0; got "
                             f"{self}")


def progress(message: str) -> None:
    """Default progress reporter: one line on stderr."""
    print(f"glcnn bench: {message}", file=sys.stderr, flush=True)


# --- measuring --------------------------------------------------------------------------------
def measure(fn, settings: Settings) -> list[float]:
    """Wall-clock ms of up to `settings.runs` calls of `fn` after `settings.warmup` calls.

    Warm-up stops after half the budget; timed runs stop once the budget is spent and
    MIN_RUNS (or `runs`, if fewer) are done.
    """
    deadline = time.perf_counter() + settings.budget / 2
    for _ in range(settings.warmup):
        fn()
        if time.perf_counter() > deadline:
            break
    times, deadline = [], time.perf_counter() + settings.budget
    needed = min(settings.runs, MIN_RUNS)
    while len(times) < settings.runs and (len(times) < needed or time.perf_counter() < deadline):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def summarize(times: list[float], flops: int) -> dict:
    """Median, min, FPS and nominal GFLOP/s of `times` (ms), with the raw times."""
    median = statistics.median(times)
    return {"median_ms": median, "min_ms": min(times), "runs": len(times),
            "fps": 1e3 / median, "gflops": flops / median / 1e6, "times_ms": times}


def time_pipeline(pipe, feeds: dict, settings: Settings) -> dict:
    """Timings of `pipe` on `feeds` with readback ("readback") and without ("no_readback").

    Raises:
        ContextError: the driver failed; ShapeError: bad inputs (see Pipeline.run).
    """
    flops = sum(op.flops() for op in pipe.ops)
    gl = pipe.ctx.gl
    with_readback = measure(lambda: pipe.run(feeds), settings)
    without = measure(lambda: (pipe.run(feeds, readback=False), gl.finish()), settings)
    return {"readback": summarize(with_readback, flops),
            "no_readback": summarize(without, flops)}


def time_layers(pipe, feeds: dict, settings: Settings) -> list[dict]:
    """Per pass, in execution order: layer, op (with fused parts), output shape, MFLOPs,
    median and min ms of its draw between two `ctx.gl.finish()`, and its share of their sum.

    Runs whole sequences of passes (inputs uploaded once) without warm-up, within the budget.
    """
    from .diff import op_label
    pipe.ctx.check_thread()
    pipe.run(feeds, readback=False)
    gl, per_pass = pipe.ctx.gl, [[] for _ in pipe.passes]

    def every_pass():
        for p, times in zip(pipe.passes, per_pass):
            gl.finish()
            start = time.perf_counter()
            pipe.draw(p)  # the pipeline's own draw of one pass
            gl.finish()
            times.append((time.perf_counter() - start) * 1e3)
    measure(every_pass, Settings(settings.runs, 0, settings.budget))
    pipe.ctx.check_error("timing the layers")
    medians = [statistics.median(t) for t in per_pass]
    return [{"layer": p.op.node.name, "op": op_label(p.op), "shape": list(p.op.output_shape()),
             "mflops": p.op.flops() / 1e6, "median_ms": m, "min_ms": min(t),
             "share": m / sum(medians)} for p, m, t in zip(pipe.passes, medians, per_pass)]


# --- machine ----------------------------------------------------------------------------------
def machine_info(ctx) -> dict:
    """Date, platform, CPU, cores, GL renderer and version, llvmpipe's rasteriser
    threads (Context.rasterizer_threads), package versions, git, load."""
    from .. import __version__
    return {"date": datetime.now().astimezone().isoformat(timespec="seconds"),
            "platform": platform.platform(), "cpu": _cpu_model(),
            "cores": len(os.sched_getaffinity(0)),
            "renderer": ctx.renderer, "gl_version": ctx.version,
            "rasterizer_threads": ctx.rasterizer_threads,  # None: the driver's default
            "python": platform.python_version(), "numpy": np.__version__,
            **{name: _version(name) for name in ("moderngl", "onnxruntime", "torch")},
            "glcnn": f"{__version__} ({_git_describe() or 'not a git checkout'})",
            "load_average": " ".join(f"{v:.2f}" for v in os.getloadavg()),
            "env": {k: v for k, v in os.environ.items()
                    if k.startswith(("LP_", "MESA_", "GALLIUM"))}}


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    return next((line.split(":", 1)[1].strip() for line in lines
                 if line.startswith("model name")), platform.processor())


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)  # without importing it
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _git_describe() -> str:
    """`git describe --always --dirty` of the checkout glcnn runs from, if any. Read-only:
    GIT_OPTIONAL_LOCKS=0 keeps git from refreshing the index."""
    root = Path(__file__).resolve().parents[1]
    try:
        done = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"],
                              capture_output=True, text=True, check=False,
                              env=os.environ | {"GIT_OPTIONAL_LOCKS": "0"})
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


# --- the whole benchmark ----------------------------------------------------------------------
def default_inputs(graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded uniform random float32 inputs in the model's own shapes (e.g. ONNX NCHW with
    the batch), within graph.meta["input_range"] (default [0, 1])."""
    lo, hi = graph.meta.get("input_range", (0, 1))
    own = graph.meta.get("onnx_input_shapes", {})
    rng = np.random.default_rng(seed)
    return {name: (lo + (hi - lo) * rng.random(tuple(own.get(name) or (1, *shape))))
            .astype(np.float32) for name, shape in graph.inputs.items()}


def _feeds(graph, inputs) -> dict[str, np.ndarray]:
    """`inputs` (None, one array, or a dict) as a dict naming every graph input.

    Raises:
        ShapeError: one array for a model of several inputs, missing or unknown names, or an
            input of the wrong shape, dtype, or with NaN/Inf.
    """
    if inputs is None:
        return default_inputs(graph)
    if not isinstance(inputs, dict):
        if len(graph.inputs) != 1:
            raise ShapeError(f"the model has inputs {list(graph.inputs)}; pass a dict")
        inputs = {next(iter(graph.inputs)): inputs}
    if set(inputs) != set(graph.inputs):
        raise ShapeError(f"inputs {sorted(inputs)} given; the model's are {list(graph.inputs)}")
    chw_inputs(graph, inputs)  # refuse bad inputs before anything runs
    return inputs


def bench_size(model, inputs=None, input_size=None) -> tuple[int, int] | None:
    """(H, W) to compile `model` at when its input sizes are open: `input_size`, else the
    size of `inputs` (one array or a dict, in the model's layout); None for fixed sizes.

    Raises:
        GlcnnError: open sizes with neither, or an `input_size` that is not (H, W).
        ShapeError: `inputs` hold no open input, or one of a rank other than 3 or 4.
    """
    from ..importers import open_inputs
    from ..importers.onnx_inputs import check_input_size
    from ..runtime.open_size import shown_inputs, size_of
    opened = open_inputs(model)
    if not opened:
        return None
    if input_size is not None:
        return check_input_size(input_size)
    if inputs is None:
        raise GlcnnError(f"{model} leaves its input sizes open ({shown_inputs(opened)}); "
                         "give the size to time it at: --input-size H W, or --input NPY "
                         "(input_size= or inputs= of glcnn.commands.bench.bench)")
    return size_of(opened, inputs)


@dataclass
class _Job:
    """What every step of one `bench` call shares."""

    model: str
    graph: object  # the optimised glcnn Graph
    feeds: dict
    settings: Settings
    ctx: object
    report: dict
    progress: Callable[[str], None]
    input_size: tuple[int, int] | None  # for a model with open input sizes


def bench(model, inputs=None, precisions=("fp32",), against=(), settings=None, ctx=None,
          report_progress=progress, strict: bool = True, input_size=None) -> dict:
    """Benchmark `model` at each precision, against each implementation in `against`.

    Args:
        model: a model file (.onnx, glcnn .npz, TF.js model.json).
        inputs: one array or a dict name -> array in the model's own layout; None: seeded
            random inputs (`default_inputs`).
        precisions: glcnn storage precisions to time ("fp32", "fp16", "u8"; u8 calibrates
            on the inputs when the model has no ranges).
        against: names from glcnn.commands.bench_refs.AGAINST.
        settings: a Settings (default: 30 runs, 5 warm-up runs, 3 s budget, load times).
        ctx: the glcnn Context to compile on (default: the thread's default context, made
            for this model's layers if it is the first: glcnn.runtime.threads).
        report_progress: called with one line per step.
        strict: False records a glcnn precision whose output disagrees as {"error": ...}
            and goes on; True raises.
        input_size: (H, W) to time a model whose input sizes are open at (default: that of
            `inputs`; see `bench_size`); fixed sizes ignore it.
    Returns:
        A JSON-able dict: model, input_size (None for fixed sizes), inputs, mflops,
        settings, machine, agreement (every pair compared), glcnn (per precision:
        strategy, timings, layers, load), against (per name: timing) and ratios (per
        precision and name: glcnn ms / other ms, readback).
    Raises:
        GlcnnError subclasses: an unreadable model, bad inputs, settings or precisions, an
            unknown or unavailable reference, MismatchError when outputs disagree
            (references always, glcnn precisions when `strict`).
    """
    from ..importers.prepared import load_optimized
    from ..ops import build_ops
    from ..runtime.context import Context
    settings = settings or Settings()
    settings.check()
    if not set(precisions) <= set(AGREEMENT):
        raise GlcnnError(f"precisions {list(precisions)}: expected {', '.join(AGREEMENT)}")
    check_against(against, model)
    size = bench_size(model, inputs, input_size)
    graph = load_optimized(model, input_size=size)
    ops, shapes = build_ops(graph)
    feeds = _feeds(graph, inputs)
    ctx = ctx or Context.default(ops)
    report = {"model": str(model), "input_size": list(size) if size else None,
              "inputs": {n: list(np.shape(x)) for n, x in feeds.items()},
              "mflops": sum(op.flops() for op in ops) / 1e6, "settings": asdict(settings),
              "machine": machine_info(ctx), "agreement": [], "glcnn": {}, "against": {}}
    job = _Job(str(model), graph, feeds, settings, ctx, report, report_progress, size)
    refs = _references(job, against, shapes)
    for precision in precisions:
        report["glcnn"][precision] = _bench_precision(job, precision, refs, strict)
    for name, ref in refs.items():
        report["against"][name] = _time_reference(job, ref)
    report["ratios"] = ratios(report)
    return report


def _check(job: _Job, label: str, outputs: dict, ref, tolerance: float) -> None:
    """Compare `outputs` with `ref`'s, record the Agreement in the report, raise on mismatch."""
    check = agreement(label, outputs, ref.label, ref.outputs, tolerance)
    job.report["agreement"].append(asdict(check) | {"ok": check.ok})
    check.require()


def _references(job: _Job, against, shapes: dict) -> dict:
    """Each implementation of `against`, run once; their outputs compared pairwise."""
    refs, inputs = {}, chw_inputs(job.graph, job.feeds)
    for name in against:
        job.progress(f"running {name} once")
        refs[name] = make_reference(name, job.model, job.graph, inputs, shapes,
                                    job.input_size)
    names = list(refs)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            _check(job, refs[a].label, refs[a].outputs, refs[b], AGREEMENT["fp32"])
    return refs


def _bench_precision(job: _Job, precision: str, refs: dict, strict: bool) -> dict:
    """Check glcnn's output at `precision` against `refs`, then time it."""
    from ..runtime.pipeline import Pipeline
    from .diff import calibrate_if_needed
    label = f"glcnn {precision}"
    if calibrate_if_needed(job.graph, precision, job.feeds, job.ctx):
        job.progress("u8: calibrated the model's ranges on the benchmark input")
    with Pipeline(job.graph, job.ctx, precision) as pipe:
        pipe.run(job.feeds, readback=False)
        outputs = {name: pipe.read(name) for name in job.graph.outputs}
        try:
            for ref in refs.values():
                _check(job, label, outputs, ref, AGREEMENT[precision])
        except MismatchError as exc:
            if strict:
                raise
            return {"error": str(exc)}
        job.progress(f"timing {label} (up to {job.settings.runs} runs, "
                     f"{job.settings.budget:g} s budget)")
        time.sleep(job.settings.settle)
        result = {"strategy": pipe.strategy} | time_pipeline(pipe, job.feeds, job.settings)
        job.progress(f"timing {label} per layer")
        result["layers"] = time_layers(pipe, job.feeds, job.settings)
    if job.settings.load_times:
        job.progress(f"{label}: cold and warm load in fresh processes")
        result["load"] = load_times(job.model, precision, job.feeds, job.input_size)
    return result


def _time_reference(job: _Job, ref) -> dict:
    job.progress(f"timing {ref.label}")
    time.sleep(job.settings.settle)
    flops = job.report["mflops"] * 1e6
    return {"label": ref.label, **summarize(measure(ref.run, job.settings), flops)}


def ratios(report: dict) -> dict:
    """{precision: {name: glcnn median ms / other median ms}}, with readback."""
    return {precision: {name: r["readback"]["median_ms"] / other["median_ms"]
                        for name, other in report["against"].items()}
            for precision, r in report["glcnn"].items() if "error" not in r}


def write_json(path, report: dict) -> None:
    """Write `report` as indented JSON. Raises GlcnnError if the file cannot be written."""
    try:
        Path(path).write_text(json.dumps(report, indent=2, default=lambda v: v.item()))
    except OSError as exc:
        raise GlcnnError(f"{path}: cannot write the JSON report ({exc})") from None
