"""Benchmark glcnn against PyTorch (CPU) on the reference models.

    python bench/bench_models.py [--runs 30] [--warmup 5] [--budget 3] [--json F] [--markdown F]

Models, with the same seeded random weights in both frameworks: the 32² autoencoder, the
DCGAN generator (z 100×1×1 → 3×64×64) and the autoencoder at 64², 128², 256². glcnn's
output is first compared with PyTorch's; the script aborts if the max abs difference exceeds
1e-3 (fp32), 1e-2 (fp16) or 5e-2 (u8, calibrated on 32 other inputs), so it never times a
wrong computation.

Measured, wall clock (GL timer queries are meaningless on llvmpipe):
- glcnn `pipe.run(x)` (upload, passes, readback), and `pipe.run(x, readback=False)` then
  `ctx.gl.finish()`, with fp32, fp16 and u8 activation storage;
- PyTorch in eval mode under `torch.inference_mode()`, `torch.set_num_threads(<cores>)`;
- median and min ms over up to --runs runs after --warmup runs; a measurement stops early
  once it has spent --budget seconds (but has at least 3 runs) so large frames stay cheap;
  FPS = 1000 / median; nominal GFLOP/s = Σ op.flops() of the glcnn pipeline / median;
- Pipeline build on a new Context: cold (compiles the programs) and warm (second build on
  that Context, program cache hit), and the first run: llvmpipe JIT-compiles shaders at the
  first draw. Mesa's on-disk shader cache hides most of that; MESA_SHADER_CACHE_DISABLE=true
  shows the truly cold cost.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import moderngl
import numpy as np
import torch
from torch import nn

try:
    import glcnn
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import glcnn
from glcnn import models

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from torch_models import Autoencoder, DCGANGenerator  # noqa: E402  (torch twins)

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = {"fp32": 1e-3, "fp16": 1e-2, "u8": 5e-2}
PRECISIONS = ("fp32", "fp16", "u8")
MIN_RUNS = 3


def cases():
    """(name, torch module factory, weights -> glcnn Graph, input shape) of every model."""
    def ae(s):
        return (f"autoencoder {s}²", Autoencoder,
                lambda w: models.autoencoder((s, s), weights=w), (1, 3, s, s))
    dcgan = ("DCGAN generator", DCGANGenerator, lambda w: models.dcgan_generator(weights=w),
             (1, 100, 1, 1))
    return [ae(32), dcgan, ae(64), ae(128), ae(256)]


def seeded_model(make, seed=0) -> nn.Module:
    """The module in eval mode: PyTorch's default init, non-trivial BatchNorm statistics."""
    torch.manual_seed(seed)
    model = make()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.normal_(m.bias, 0.0, 0.1)
            m.running_mean.normal_(0.0, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    return model.eval()


def measure(fn, runs: int, warmup: int, budget: float) -> list[float]:
    """Wall-clock ms of up to `runs` calls after ≥ 1 warmup call; stops after `budget` s."""
    deadline = time.perf_counter() + budget / 2
    for _ in range(max(1, warmup)):
        fn()
        if time.perf_counter() > deadline:
            break
    times, deadline = [], time.perf_counter() + budget
    while len(times) < runs and (len(times) < MIN_RUNS or time.perf_counter() < deadline):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def row(model, impl, times, flops):
    median = statistics.median(times)
    return {"model": model, "impl": impl, "median_ms": median, "min_ms": min(times),
            "runs": len(times), "fps": 1e3 / median, "gflops": flops / median / 1e6}


def build(graph, precision):
    """Cold, then warm Pipeline construction on a new Context: (pipe, ctx, stats)."""
    ctx = glcnn.Context()
    start = time.perf_counter()
    cold = glcnn.Pipeline(graph, ctx, precision)
    cold_ms, compiles = (time.perf_counter() - start) * 1e3, ctx.compiles
    start = time.perf_counter()
    pipe = glcnn.Pipeline(graph, ctx, precision)
    warm_ms = (time.perf_counter() - start) * 1e3
    cold.release()
    return pipe, ctx, {"cold_ms": cold_ms, "programs": compiles, "warm_ms": warm_ms,
                       "warm_compiles": ctx.compiles - compiles}


def bench_glcnn(name, graph, x, ref, precision, timing):
    """Build stats and timing rows of one model at one precision; exits if it is wrong."""
    pipe, ctx, stats = build(graph, precision)
    start = time.perf_counter()
    y = pipe.run(x)
    stats["first_run_ms"] = (time.perf_counter() - start) * 1e3
    stats["max_abs_diff"] = diff = float(np.max(np.abs(y - ref)))
    print(f"{name} {precision}: max |glcnn - torch| = {diff:.2e}", flush=True)
    if not diff <= TOLERANCE[precision]:  # also catches NaN
        sys.exit(f"ABORT: {name} {precision} differs from PyTorch by {diff:.3g} "
                 f"(> {TOLERANCE[precision]}); refusing to time a wrong computation")
    flops = sum(op.flops() for op in pipe.ops)
    no_readback = measure(lambda: (pipe.run(x, readback=False), ctx.gl.finish()), *timing)
    rows = [row(name, f"glcnn {precision}", measure(lambda: pipe.run(x), *timing), flops),
            row(name, f"glcnn {precision} no readback", no_readback, flops)]
    pipe.release()
    ctx.gl.release()
    return {"model": name, "precision": precision, "mflops": flops / 1e6, **stats}, rows


def bench_case(case, timing):
    """Build stats and rows of one model: PyTorch, then glcnn fp32, fp16 and u8."""
    name, make_model, make_graph, shape = case
    model = seeded_model(make_model)
    graph = make_graph({k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
    rng = np.random.default_rng(0)
    x = (rng.random(shape) if shape[1] == 3 else rng.standard_normal(shape)).astype(np.float32)
    with torch.inference_mode():
        xt = torch.from_numpy(x)
        ref = model(xt).numpy()
        torch_ms = measure(lambda: model(xt), *timing)
    # u8 ranges from other inputs of the same distribution (as a user would calibrate).
    glcnn.calibrate(graph, [(rng.random(shape) if shape[1] == 3 else rng.standard_normal(shape))
                            .astype(np.float32) for _ in range(32)])
    builds, rows = [], []
    for precision in PRECISIONS:
        stats, r = bench_glcnn(name, graph, x, ref, precision, timing)
        builds.append(stats)
        rows += r
    rows.insert(0, row(name, f"torch ({torch.get_num_threads()} threads)", torch_ms,
                       builds[0]["mflops"] * 1e6))
    for r in rows:
        r["ratio"] = r["median_ms"] / rows[0]["median_ms"]
    return builds, rows


def machine_info() -> dict:
    """Machine, GL renderer, versions, git state, load and date."""
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    ctx = glcnn.Context()
    gl = {"renderer": ctx.renderer, "gl_version": ctx.version}
    ctx.gl.release()
    git = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                         capture_output=True, text=True, check=False).stdout.strip()
    env = {k: v for k, v in os.environ.items() if k.startswith(("LP_", "MESA_", "GALLIUM"))}
    return {"date": datetime.now().astimezone().isoformat(timespec="seconds"),
            "platform": platform.platform(), "cpu": cpu,
            "cores": len(os.sched_getaffinity(0)), **gl, "python": platform.python_version(),
            "numpy": np.__version__, "moderngl": moderngl.__version__,
            "torch": f"{torch.__version__} ({torch.get_num_threads()} threads)",
            "glcnn": f"{glcnn.__version__} ({git})",
            "load_average": " ".join(f"{v:.2f}" for v in os.getloadavg()), "env": env}


def table(head, rows) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(v) for v in r) + " |" for r in rows])


def summary(rows) -> str:
    """One line per model: PyTorch and glcnn (with readback) median ms and ratios."""
    lines = {}
    for r in rows:
        if r["impl"].startswith("torch"):
            lines[r["model"]] = [r["model"], f"{r['median_ms']:.2f}"]
        elif not r["impl"].endswith("no readback"):
            lines[r["model"]] += [f"{r['median_ms']:.1f}", f"{r['ratio']:.0f}"]
    head = ["model", "torch ms"]
    for p in PRECISIONS:
        head += [f"glcnn {p} ms", f"{p} ratio"]
    return table(head, lines.values())


def markdown(info, builds, rows, seconds) -> str:
    """The results as markdown: machine block, summary, all timings, pipeline builds."""
    machine = "\n".join(f"{k:<13} {v}" for k, v in info.items())
    timing = table(["model", "implementation", "median ms", "min ms", "runs", "FPS",
                    "GFLOP/s", "ratio"],
                   [[r["model"], r["impl"], f"{r['median_ms']:.2f}", f"{r['min_ms']:.2f}",
                     r["runs"], f"{r['fps']:.1f}", f"{r['gflops']:.2f}", f"{r['ratio']:.1f}"]
                    for r in rows])
    build = table(["model", "precision", "MFLOPs", "cold build ms", "programs compiled",
                   "warm build ms", "first run ms", "max abs diff vs torch"],
                  [[b["model"], b["precision"], f"{b['mflops']:.1f}", f"{b['cold_ms']:.1f}",
                    b["programs"], f"{b['warm_ms']:.1f}", f"{b['first_run_ms']:.1f}",
                    f"{b['max_abs_diff']:.1e}"] for b in builds])
    return (f"### Machine\n\n```\n{machine}\n```\n\n### Summary (median ms, with readback)\n\n"
            "ratio = glcnn ms / torch ms: lower is better for glcnn (< 1: glcnn faster).\n\n"
            f"{summary(rows)}\n\n### All timings\n\n{timing}\n\n### Pipeline build\n\n"
            f"{build}\n\nTotal benchmark time: {seconds:.0f} s.\n")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=30, help="timed runs per measurement (max)")
    p.add_argument("--warmup", type=int, default=5, help="untimed runs first (at least 1)")
    p.add_argument("--budget", type=float, default=3.0,
                   help="seconds after which a measurement stops (at least 3 runs)")
    p.add_argument("--json", type=Path, help="write the raw numbers here")
    p.add_argument("--markdown", type=Path, help="write the markdown section here")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    start = time.perf_counter()
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    info = machine_info()
    builds, rows = [], []
    for case in cases():
        b, r = bench_case(case, (args.runs, args.warmup, args.budget))
        builds += b
        rows += r
    seconds = time.perf_counter() - start
    text = markdown(info, builds, rows, seconds)
    print("\n" + text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "builds": builds, "timings": rows,
                                         "seconds": seconds}, indent=2))


if __name__ == "__main__":
    main()
