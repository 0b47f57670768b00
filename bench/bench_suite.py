"""Benchmark suite: standard CNNs from PyTorch, exported to ONNX, timed by
glcnn.commands.bench against
onnxruntime and PyTorch on the same machine.

    python bench/bench_suite.py [--models NAME,...] [--quick] [--runs 30] [--warmup 5]
        [--budget 3] [--precisions fp32,fp16] [--top 5] [--cache DIR] [--json F] [--markdown F]

Models (`--models`, default all), with seeded random weights and randomised BatchNorm
statistics (bench/suite_models.py `seeded`), exported once with torch.onnx.export into
--cache (default ~/.cache/glcnn/bench; delete it to export again):

| name | model | input |
|---|---|---|
| autoencoder32 | the webcam autoencoder (train/torch_models.py; glcnn.graph.models) | 3×32×32 |
| dcgan | the DCGAN tutorial generator, nz 100, ngf 64 (glcnn.models.dcgan_generator) | z 100×1×1 |
| mobilenet_v2 | MobileNetV2, width 1.0, 1000 classes (torchvision's architecture) | 3×224×224 |
| fast_style | Johnson et al.'s fast-neural-style transformer, InstanceNorm | 3×256×256 |
| pix2pix_unet | pix2pix's U-Net for 128×128 (7 downsamplings, ngf 64, BatchNorm) | 3×128×128 |
| autoencoder64 ... autoencoder512 | the autoencoder at 64², 128², 256², 512² (scaling) | 3×S×S |

Inputs: images uniform in [0, 1], the latent standard normal (seed 0). Each model goes through
`glcnn.commands.bench.bench` with --against onnxruntime and torch: every output is compared
with every
other before anything is timed (a glcnn precision that disagrees is reported, not timed), then
glcnn with and without readback, its layers, cold and warm load in fresh processes, and both
references are timed; see glcnn/commands/bench.py for exactly what is measured. A model glcnn or a
reference cannot run (e.g. an unsupported op) is reported and the suite goes on.

`--quick` is a smoke run: 3 runs after 1 warm-up, 0.5 s budget, fp32 only, no load times.
Progress goes to stderr, the markdown results (BENCHMARKS.md's results section) to stdout.
"""

import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
try:
    import glcnn
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))
    import glcnn
sys.path.insert(0, str(ROOT / "train"))
import bench_cli  # noqa: E402  (bench/, beside this script)
from suite_models import MobileNetV2, seeded, transformer_net, unet_128  # noqa: E402
from torch_models import Autoencoder, DCGANGenerator  # noqa: E402

from glcnn.commands.bench import AGREEMENT, Settings, bench, machine_info  # noqa: E402
from glcnn.commands.bench_report import slowest  # noqa: E402

QUICK = Settings(runs=3, warmup=1, budget=0.5, load_times=False)
AGAINST = ("onnxruntime", "torch")


def _autoencoder(size):
    return f"autoencoder {size}²", Autoencoder, (1, 3, size, size)


# name -> (label, module factory, input shape); the latent input of dcgan is normal.
CASES = {
    "autoencoder32": _autoencoder(32),
    "dcgan": ("DCGAN generator", DCGANGenerator, (1, 100, 1, 1)),
    "mobilenet_v2": ("MobileNetV2 224²", MobileNetV2, (1, 3, 224, 224)),
    "fast_style": ("fast neural style 256²", transformer_net, (1, 3, 256, 256)),
    "pix2pix_unet": ("pix2pix U-Net 128²", unet_128, (1, 3, 128, 128)),
    **{f"autoencoder{s}": _autoencoder(s) for s in (64, 128, 256, 512)},
}


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def exported(name: str, cache: Path) -> Path:
    """The ONNX file of model `name` in `cache`, exported first if missing."""
    path = cache / f"{name}.onnx"
    if path.exists():
        return path
    _, make, shape = CASES[name]
    note(f"{name}: exporting to {path}")
    cache.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(seeded(make), (torch.zeros(shape),), str(partial),
                          input_names=["input"], output_names=["output"], dynamo=False)
    partial.rename(path)  # an interrupted export leaves nothing that looks cached
    return path


def example_input(name: str) -> np.ndarray:
    shape = CASES[name][2]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape) if name == "dcgan" else rng.random(shape)
    return x.astype(np.float32)


def run_case(name: str, args, settings: Settings, ctx) -> dict:
    """glcnn.commands.bench's report on model `name`, or {"error": ...} if it cannot run."""
    try:
        return bench(exported(name, args.cache), example_input(name), args.precisions, AGAINST,
                     settings, ctx, lambda m: note(f"{name}: {m}"), strict=False)
    except glcnn.GlcnnError as exc:
        message = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        note(f"{name}: not benchmarked: {message}")
        return {"error": message}


# --- markdown ----------------------------------------------------------------------------------
def table(head, rows) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(v) for v in r) + " |" for r in rows])


def _ms(value) -> str:
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def _done(results: dict) -> dict:
    return {n: r for n, r in results.items() if "error" not in r}


def summary(results: dict, precisions) -> str:
    head = ["model", "MFLOPs", "onnxruntime ms", "torch ms"]
    for p in precisions:
        head += [f"glcnn {p} ms", f"{p} / onnxruntime", f"{p} / torch"]
    rows = []
    for name, r in _done(results).items():
        row = [CASES[name][0], f"{r['mflops']:.0f}",
               *(_ms(r["against"][a]["median_ms"]) for a in AGAINST)]
        for p in precisions:
            g = r["glcnn"][p]
            row += (["not timed", "", ""] if "error" in g else
                    [_ms(g["readback"]["median_ms"]),
                     *(f"{r['ratios'][p][a]:.1f}" for a in AGAINST)])
        rows.append(row)
    return table(head, rows)


def all_timings(results: dict) -> str:
    rows = []
    for name, r in _done(results).items():
        others = {a: r["against"][a]["median_ms"] for a in AGAINST}
        for p, g in r["glcnn"].items():
            for key, suffix in (("readback", ""), ("no_readback", " no readback")):
                if key in g:
                    rows.append(_timing_row(name, f"glcnn {p}{suffix}", g[key], others))
        rows += [_timing_row(name, r["against"][a]["label"], r["against"][a], None)
                 for a in AGAINST]
    return table(["model", "implementation", "median ms", "min ms", "runs", "FPS", "GFLOP/s",
                  "÷ onnxruntime", "÷ torch"], rows)


def _timing_row(name, label, t, others) -> list:
    ratios = [f"{t['median_ms'] / others[a]:.1f}" for a in AGAINST] if others else ["", ""]
    return [CASES[name][0], label, _ms(t["median_ms"]), _ms(t["min_ms"]), t["runs"],
            f"{t['fps']:.1f}", f"{t['gflops']:.2f}", *ratios]


def scaling(results: dict, precisions) -> str:
    """The autoencoder at each size: ms per megapixel of input."""
    rows = []
    for name, r in _done(results).items():
        if not name.startswith("autoencoder"):
            continue
        mp = np.prod(CASES[name][2][2:]) / 1e6
        row = [CASES[name][0], f"{mp:.4f}"]
        row += [_ms(r["glcnn"][p]["readback"]["median_ms"] / mp) if "readback" in
                r["glcnn"][p] else "not timed" for p in precisions]
        rows.append(row + [_ms(r["against"][a]["median_ms"] / mp) for a in AGAINST])
    return table(["model", "megapixels", *(f"glcnn {p} ms/MP" for p in precisions),
                  *(f"{a} ms/MP" for a in AGAINST)], rows)


def layers(results: dict, precision: str, top: int) -> str:
    rows = [[CASES[name][0], f"`{row['layer']}`", row["op"], str(tuple(row["shape"])),
             f"{row['mflops']:.1f}", f"{row['median_ms']:.2f}", f"{row['share']:.0%}",
             f"{row['mflops'] / row['median_ms']:.2f}"]
            for name, r in _done(results).items() if "layers" in r["glcnn"][precision]
            for row in slowest(r["glcnn"][precision]["layers"], top)]
    return table(["model", "layer", "op", "output", "MFLOPs", "ms", "share", "GFLOP/s"], rows)


def load_times(results: dict) -> str:
    rows = [[CASES[name][0], p, f"{g['load']['cold']['total_ms']:.0f}",
             f"{g['load']['cold']['first_run_ms']:.0f}", f"{g['load']['warm']['total_ms']:.0f}",
             f"{g['load']['warm']['first_run_ms']:.0f}", g["load"]["cold"]["programs"]]
            for name, r in _done(results).items() for p, g in r["glcnn"].items() if "load" in g]
    if not rows:
        return "Not measured (`--quick`)."
    return table(["model", "precision", "cold ms", "of which first run", "warm ms",
                  "of which first run", "programs"], rows)


def agreement(results: dict) -> str:
    rows = [[CASES[name][0], a["a"], a["b"], f"{a['max_abs']:.1e}", f"{a['scaled']:.1e}",
             "ok" if a["ok"] else "**mismatch: not timed**"]
            for name, r in results.items() for a in r.get("agreement", [])]
    return table(["model", "output of", "against", "max abs diff", "scaled", ""], rows)


# TF.js runs (bench/tfjs/run_tfjs.py) of the models glcnn has here, and the suite's own case.
TFJS_MODELS = {"autoencoder": "autoencoder32", "dcgan": "dcgan"}


def tfjs(results: dict, run: dict, precision: str) -> str:
    """TF.js's backends (a bench/tfjs/run_tfjs.py JSON) beside glcnn `precision` of this run:
    speed-up = TF.js median ms / glcnn median ms (both with readback; > 1: glcnn faster)."""
    rows = []
    for model, case in TFJS_MODELS.items():
        glcnn_ms = results.get(case, {}).get("glcnn", {}).get(precision, {}).get("readback")
        for backend, t in run["models"].get(model, {}).items():
            if "median_ms" not in t or glcnn_ms is None:
                continue
            rows.append([CASES[case][0], f"TF.js {backend}", _ms(t["median_ms"]),
                         _ms(t["min_ms"]), _ms(glcnn_ms["median_ms"]),
                         f"{t['median_ms'] / glcnn_ms['median_ms']:.1f}×"])
    head = (f"TF.js {run['tfjs']} in headless Chromium {run['chromium']}; WebGL renderer "
            f"`{run['webgl_renderer']}`; TF.js outputs checked against {run['reference']}. "
            "Timed: upload, the model, `await y.data()` (readback).")
    return head + "\n\n" + table(["model", "backend", "median ms", "min ms",
                                   f"glcnn {precision} ms", "glcnn speed-up"], rows)


def problems(results: dict) -> str:
    lines = [f"- {CASES[name][0]}: {r['error']}" for name, r in results.items() if "error" in r]
    lines += [f"- {CASES[name][0]} glcnn {p}: {g['error']}" for name, r in _done(results).items()
              for p, g in r["glcnn"].items() if "error" in g]
    return "\n".join(lines) or "None: every model ran and every output agreed."


def markdown(info: dict, results: dict, args, seconds: float) -> str:
    """BENCHMARKS.md's results section."""
    machine = "\n".join(f"{k:<13} {v}" for k, v in info.items())
    first, ratio = args.precisions[0], ("ratio = glcnn ms / other ms, both with readback: "
                                        "lower is better for glcnn (> 1: glcnn is slower).")
    sections = [
        ("Machine", f"```\n{machine}\n```"),
        ("Summary (median ms, with readback)", f"{ratio}\n\n{summary(results, args.precisions)}"),
        ("All timings", all_timings(results)),
        ("Scaling with image size (autoencoder, median ms per megapixel of input)",
         scaling(results, args.precisions)),
        (f"Slowest {args.top} layers per model (glcnn {first}, each pass between two glFinish)",
         layers(results, first, args.top)),
        ("Load + compile + first run in a fresh process (cold: Mesa shader cache and glcnn "
         "prepared-model cache off; warm: both primed)", load_times(results)),
        *([("Against TensorFlow.js (same machine, same session)",
            tfjs(results, args.tfjs, first))] if args.tfjs else []),
        ("Outputs compared before timing", agreement(results)),
        ("Not benchmarked or not timed", problems(results))]
    body = "\n\n".join(f"### {title}\n\n{text}" for title, text in sections)
    return f"{body}\n\nTotal benchmark time: {seconds:.0f} s.\n"


# --- command line ------------------------------------------------------------------------------
def parse_args(argv=None):
    p = bench_cli.parser(__doc__, "models", CASES, "smoke run: few runs, fp32, no loads",
                         runs=30, warmup=5, budget=3.0)
    p.add_argument("--precisions", default="fp32,fp16", help="glcnn precisions (u8 too)")
    p.add_argument("--top", type=int, default=5, help="slowest layers listed per model")
    p.add_argument("--cache", type=Path, default=Path(os.environ.get(
        "XDG_CACHE_HOME", Path.home() / ".cache")) / "glcnn" / "bench",
                   help="where the exported ONNX files are kept")
    p.add_argument("--tfjs", type=Path, metavar="JSON",
                   help="a bench/tfjs/run_tfjs.py --json result to set beside glcnn's numbers")
    args = bench_cli.parse(p, argv, "models", CASES)
    args.tfjs = json.loads(args.tfjs.read_text()) if args.tfjs else None
    args.precisions = ["fp32"] if args.quick else args.precisions.split(",")
    if not set(args.precisions) <= set(AGREEMENT):
        p.error(f"--precisions {args.precisions}: choose from {', '.join(AGREEMENT)}")
    return args


def main(argv=None):
    args = parse_args(argv)
    settings = QUICK if args.quick else Settings(args.runs, args.warmup, args.budget)
    start = time.perf_counter()
    ctx = glcnn.Context()
    info = machine_info(ctx) | {"settings": f"{settings}"}
    results = {}
    for i, name in enumerate(args.models, 1):
        note(f"[{i}/{len(args.models)}] {name}")
        results[name] = run_case(name, args, settings, ctx)
    seconds = time.perf_counter() - start
    text = markdown(info, results, args, seconds)
    bench_cli.write_results(args, text, {"machine": info, "models": results, "seconds": seconds})


if __name__ == "__main__":
    main()
