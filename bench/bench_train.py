"""Training speed (issue #23): steps per second of glcnn.Trainer, PyTorch (CPU) and TF.js in node
training the same models from the same init, in one run on one machine.

    python bench/bench_train.py [--cases autoencoder-1,...] [--quick] [--no-wasm]
        [--runs 20] [--warmup 3] [--budget 10] [--tfjs-timeout 120] [--json F] [--markdown F]

Cases (model × batch):
- the 32² autoencoder (glcnn.graph.models.autoencoder(32), seeded Builder init), MSE
  reconstruction (target = input), Adam lr 1e-3, batch 1 and 16;
- the DCGAN generator's backward pass (glcnn.graph.models.dcgan_generator): one training step of
  the generator alone, MSE against a fixed random target image batch in [-1, 1], Adam lr 2e-4,
  betas (0.5, 0.999) (the DCGAN tutorial's), batch 1 and 4.

Implementations, each from the glcnn graph's weights:
- glcnn: `glcnn.Trainer(graph, "mse", "adam", ...)`, fp32; a step forwards a batch one sample
  at a time and reads back the loss (one texel). The DCGAN graph glcnn trains is the fused one
  (BatchNorm folded into each ConvTranspose, which gets a bias).
- torch: the twins of train/torch_models.py, torch.set_num_threads(2); the DCGAN twin holds the
  unfused graph's ConvTranspose and BatchNorm weights and runs in eval mode (BatchNorm with its
  running statistics: the function glcnn trains; PyTorch trains the BN scale and shift where
  glcnn trains the folded bias). A step: zero_grad, forward, mse_loss, backward, step, item().
- TF.js 4.22.0 in node (tools/tfjs_fixtures/train_model.js): tf.variable + tf.conv2d /
  tf.conv2dTranspose (+ bias, activation) on the fused graph's weights, NHWC, tf.train.adam,
  `minimize` then `await loss.data()`. The "cpu" backend from tools/tfjs_fixtures's pin
  (tests/tfjs_cases.py `tfjs_node_modules()`); the "wasm" backend from bench/tfjs's pin
  (`bench/tfjs/run_tfjs.py install`), unless --no-wasm.

Each implementation's first step (from the init) must give glcnn's first loss within 1e-3
relative (LOSS_AGREEMENT); a disagreement is reported in the table. Then warm-up steps and up
to --runs timed steps within --budget seconds (glcnn.commands.bench.measure, the same rule in
the node script); steps/s = 1000 / median ms. Markdown on stdout (or --markdown F), progress on
stderr.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
try:
    import glcnn
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))
    import glcnn
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "bench" / "tfjs"), str(ROOT)]

import bench_cli  # noqa: E402  (bench/, beside this script)

from glcnn.commands.bench import Settings, machine_info, measure  # noqa: E402
from glcnn.graph import models  # noqa: E402
from glcnn.graph.passes import optimize  # noqa: E402
from glcnn.ops import build_ops  # noqa: E402

LOSS_AGREEMENT = 1e-3
IMPLEMENTATIONS = ("glcnn", "torch", "tfjs-cpu", "tfjs-wasm")
QUICK = Settings(runs=3, warmup=1, budget=1.0, load_times=False)
TFJS_SCRIPT = ROOT / "tools" / "tfjs_fixtures" / "train_model.js"


@dataclass(frozen=True)
class Case:
    """One benchmarked model at one batch size, trained with Adam."""

    label: str
    model: str  # "autoencoder" or "dcgan"
    batch: int
    lr: float
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8


DCGAN_ADAM = dict(lr=2e-4, betas=(0.5, 0.999))
CASES = {
    "autoencoder-1": Case("32² autoencoder", "autoencoder", 1, 1e-3),
    "autoencoder-16": Case("32² autoencoder", "autoencoder", 16, 1e-3),
    "dcgan-1": Case("DCGAN generator (backward)", "dcgan", 1, **DCGAN_ADAM),
    "dcgan-4": Case("DCGAN generator (backward)", "dcgan", 4, **DCGAN_ADAM),
}


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- models, weights and data -------------------------------------------------------------------
def graphs(model: str):
    """(the graph glcnn trains, the graph whose weights the torch twin gets)."""
    if model == "autoencoder":
        graph = models.autoencoder(32)
        return graph, graph
    unfused = models.dcgan_generator(fuse=False)
    return optimize(unfused), unfused


def batch_data(case: Case, graph, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(x, target), (N, C, H, W) float32: the autoencoder reconstructs x; the generator maps
    z ~ N(0, 1) to a fixed random image batch in [-1, 1]."""
    rng = np.random.default_rng(seed)
    shape = (case.batch, *next(iter(graph.inputs.values())))
    if case.model == "autoencoder":
        x = rng.random(shape, dtype=np.float32)
        return x, x.copy()
    z = rng.standard_normal(shape, dtype=np.float32)
    return z, rng.uniform(-1, 1, (case.batch, 3, 64, 64)).astype(np.float32)


def torch_state(graph) -> dict[str, np.ndarray]:
    """The PyTorch state_dict of a graph of Conv / ConvTranspose / BatchNormalization layers
    (layer names kept; ONNX weight layouts are PyTorch's)."""
    names = {"W": "weight", "B": "bias", "scale": "weight", "mean": "running_mean",
             "var": "running_var"}
    return {f"{n.name}.{names[k]}": v for n in graph.nodes for k, v in n.weights.items()}


def tfjs_layers(graph, folder: Path) -> list[dict]:
    """train_model.js's layer list for a graph of Conv / ConvTranspose layers with fused
    activations, their weights saved as .npy in `folder`."""
    _, shapes = build_ops(graph)
    layers = []
    for n in graph.nodes:
        a = n.attrs
        stride, pads = int(a["strides"][0]), tuple(a["pads"])
        out = list(shapes[n.output][1:])
        pad = tf_padding(n.weights["W"].shape[2], stride, pads[0], n.op == "ConvTranspose",
                         shapes[n.inputs[0]][1], out[0])
        layer = {"op": "conv" if n.op == "Conv" else "convT", "stride": stride, "pad": pad,
                 "out": out, "act": a.get("activation", {}).get("op", "").lower() or None,
                 "weight": str(folder / f"{n.name}.W.npy"), "bias": None}
        np.save(layer["weight"], n.weights["W"].astype(np.float32))
        if "B" in n.weights:
            layer["bias"] = str(folder / f"{n.name}.B.npy")
            np.save(layer["bias"], n.weights["B"].astype(np.float32))
        layers.append(layer)
    return layers


def tf_padding(kernel: int, stride: int, pad: int, transposed: bool, size_in: int,
               size_out: int) -> str:
    """TF's "valid" or "same" equal to PyTorch's symmetric `pad` for a square layer.

    Raises:
        ValueError: a padding neither matches.
    """
    small, big = (size_in, size_out) if transposed else (size_out, size_in)
    if pad == 0 and big == (small - 1) * stride + kernel:
        return "valid"
    total = max((small - 1) * stride + kernel - big, 0)
    if small == -(-big // stride) and total == 2 * pad:
        return "same"
    raise ValueError(f"kernel {kernel}, stride {stride}, pad {pad}, {size_in} -> {size_out}: "
                     "neither TF padding matches")


# --- the implementations ------------------------------------------------------------------------
def run_glcnn(case: Case, graph, x, target, settings: Settings, ctx) -> dict:
    with glcnn.Trainer(graph, loss="mse", optimizer="adam", lr=case.lr, betas=case.betas,
                       eps=case.eps, ctx=ctx) as trainer:
        first = trainer.step(x, target)
        return {"first_loss": first, "times_ms": measure(lambda: trainer.step(x, target),
                                                         settings)}


def run_torch(case: Case, state: dict, x, target, settings: Settings) -> dict:
    import torch
    import torch.nn.functional as F

    from train.torch_models import Autoencoder, DCGANGenerator
    torch.set_num_threads(2)
    net = Autoencoder() if case.model == "autoencoder" else DCGANGenerator()
    net.load_state_dict({k: torch.tensor(np.array(v)) for k, v in state.items()},
                        strict=False)  # BatchNorm's num_batches_tracked stays
    net.train(case.model == "autoencoder")  # DCGAN: BatchNorm on its running statistics
    opt = torch.optim.Adam(net.parameters(), lr=case.lr, betas=case.betas, eps=case.eps)
    xs, ts = torch.from_numpy(x), torch.from_numpy(target)

    def step() -> float:
        opt.zero_grad()
        loss = F.mse_loss(net(xs), ts)
        loss.backward()
        opt.step()
        return loss.item()
    first = step()
    return {"first_loss": first, "times_ms": measure(step, settings),
            "threads": torch.get_num_threads(), "version": torch.__version__}


def tfjs_modules(backend: str) -> Path:
    """node_modules holding the pinned TF.js 4.22.0 (cpu: tools/tfjs_fixtures's; wasm:
    bench/tfjs's, which adds @tensorflow/tfjs-backend-wasm)."""
    if backend == "cpu":
        from tfjs_cases import tfjs_node_modules
        return tfjs_node_modules()
    import run_tfjs
    return run_tfjs.install(run_tfjs.cache_dir())


def run_tfjs(case: Case, graph, x, target, backend: str, settings: Settings,
             timeout: float) -> dict:
    """train_model.js's report, or {"error"} (with "timeout" when the process ran out of
    `timeout` seconds)."""
    with tempfile.TemporaryDirectory(prefix="glcnn-bench-train-") as tmp:
        tmp = Path(tmp)
        np.save(tmp / "x.npy", x)
        np.save(tmp / "t.npy", target)
        cfg = {"tools": str(TFJS_SCRIPT.parent), "backend": backend,
               "layers": tfjs_layers(graph, tmp), "input": str(tmp / "x.npy"),
               "target": str(tmp / "t.npy"), "lr": case.lr, "betas": list(case.betas),
               "eps": case.eps, "warmup": settings.warmup, "runs": settings.runs,
               "budget_ms": settings.budget * 1e3}
        (tmp / "cfg.json").write_text(json.dumps(cfg))
        env = {**os.environ, "NODE_PATH": str(tfjs_modules(backend))}
        try:
            done = subprocess.run(["node", str(TFJS_SCRIPT), str(tmp / "cfg.json")], env=env,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out: first step + timed steps over {timeout:.0f} s",
                    "timeout": True}
    if done.returncode:
        return {"error": f"node failed: {done.stderr.strip().splitlines()[-1:]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_case(case: Case, impls, settings: Settings, ctx, tfjs_timeout: float,
             skip: dict) -> dict:
    """{implementation: {first_loss, times_ms, ...} or {error}} of one case; `skip`:
    {(model, implementation): reason} not to run (a smaller batch timed out), updated."""
    graph, torch_graph = graphs(case.model)
    x, target = batch_data(case, graph)
    out = {}
    for impl in impls:
        if (case.model, impl) in skip:
            out[impl] = {"error": skip[case.model, impl]}
            continue
        note(f"  {impl} (load average {' '.join(f'{v:.2f}' for v in os.getloadavg())})")
        time.sleep(settings.settle)
        try:
            if impl == "glcnn":
                out[impl] = run_glcnn(case, graph, x, target, settings, ctx)
            elif impl == "torch":
                out[impl] = run_torch(case, torch_state(torch_graph), x, target, settings)
            else:
                out[impl] = run_tfjs(case, graph, x, target, impl.split("-")[1], settings,
                                     tfjs_timeout)
                if out[impl].get("timeout"):
                    skip[case.model, impl] = f"batch {case.batch} timed out"
        except (glcnn.GlcnnError, RuntimeError, ValueError) as exc:
            out[impl] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
        if "error" in out[impl]:
            note(f"  {impl}: {out[impl]['error']}")
    return out


# --- pure functions: steps/s, agreement, report -------------------------------------------------
def steps_per_second(times_ms) -> float:
    """1000 / the median step time in ms."""
    return 1e3 / statistics.median(times_ms)


def loss_error(loss: float, reference: float) -> float:
    """|loss - reference| / |reference|."""
    return abs(loss - reference) / max(abs(reference), 1e-30)


def _rate(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def result_rows(case: Case, result: dict) -> list[list[str]]:
    """Table rows of one case: implementation, first loss (agreement), steps/s, ms/step,
    glcnn's steps/s ÷ the implementation's."""
    glcnn_rate = (steps_per_second(result["glcnn"]["times_ms"])
                  if "times_ms" in result.get("glcnn", {}) else None)
    ref = result.get("glcnn", {}).get("first_loss")
    rows = []
    for impl, r in result.items():
        head = [case.label, str(case.batch), impl]
        if "error" in r:
            rows.append(head + [f"not run: {r['error']}", "—", "—", "—"])
            continue
        rate = steps_per_second(r["times_ms"])
        loss = f"{r['first_loss']:.6g}"
        if impl != "glcnn" and ref is not None:
            err = loss_error(r["first_loss"], ref)
            loss += f" ({err:.1e}{'' if err <= LOSS_AGREEMENT else ', DISAGREES'})"
        ratio = f"{glcnn_rate / rate:.2f}" if glcnn_rate else "—"
        rows.append(head + [loss, _rate(rate), f"{statistics.median(r['times_ms']):.1f}", ratio])
    return rows


def table(head, rows) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(v) for v in r) + " |" for r in rows])


def machine_line(info: dict) -> str:
    return (f"{info['cpu']}, {info['cores']} cores; {info['renderer']} ({info['gl_version']}); "
            f"Python {info['python']}, numpy {info['numpy']}, torch {info['torch']}, TF.js "
            f"{info.get('tfjs', '?')} in node {info.get('node', '?')}; glcnn {info['glcnn']}; "
            f"load average {info['load_average']} at the start, "
            f"{info.get('load_average_end', '?')} at the end")


def markdown(info: dict, results: dict, command: str, seconds: float) -> str:
    """The report: command, machine, the table model × batch × implementation."""
    rows = [row for name, r in results.items() for row in result_rows(CASES[name], r)]
    head = ["model", "batch", "implementation", "first-step loss (rel. diff. to glcnn)",
            "steps/s", "median ms/step", "glcnn ÷ this (steps/s)"]
    parts = [f"Command: `{command}` ({info['date']}, {seconds:.0f} s)", "",
             f"Machine: {machine_line(info)}", "", table(head, rows), "",
             "steps/s = 1000 / median step ms; glcnn ÷ this > 1: glcnn trains faster. "
             f"First-step losses from the same init must agree within {LOSS_AGREEMENT:g} "
             "relative (DISAGREES otherwise)."]
    return "\n".join(parts) + "\n"


# --- command line -------------------------------------------------------------------------------
def parse_args(argv=None):
    p = bench_cli.parser(__doc__, "cases", CASES, "smoke run: 3 steps after 1 warm-up",
                         runs=20, warmup=3, budget=10.0, unit="steps")
    p.add_argument("--no-wasm", action="store_true", help="leave out TF.js's wasm backend")
    p.add_argument("--tfjs-timeout", type=float, default=120.0,
                   help="seconds a TF.js process may run (then larger batches are skipped)")
    args = bench_cli.parse(p, argv, "cases", CASES)
    args.impls = [i for i in IMPLEMENTATIONS if not (args.no_wasm and i == "tfjs-wasm")]
    return args


def main(argv=None):
    args = parse_args(argv)
    command = "python bench/bench_train.py " + " ".join(sys.argv[1:] if argv is None else argv)
    settings = QUICK if args.quick else Settings(args.runs, args.warmup, args.budget, False)
    start = time.perf_counter()
    ctx = glcnn.Context()
    info = machine_info(ctx)
    results, skip = {}, {}
    for i, name in enumerate(args.cases, 1):
        note(f"[{i}/{len(args.cases)}] {name}")
        results[name] = run_case(CASES[name], args.impls, settings, ctx, args.tfjs_timeout,
                                 skip)
    tfjs = next((r for res in results.values() for r in res.values() if "tfjs" in r), {})
    info |= {"tfjs": tfjs.get("tfjs", "?"), "node": tfjs.get("node", "?"),
             "load_average_end": " ".join(f"{v:.2f}" for v in os.getloadavg())}
    seconds = time.perf_counter() - start
    text = markdown(info, results, command.strip(), seconds)
    bench_cli.write_results(args, text, {"machine": info, "cases": results, "seconds": seconds})


if __name__ == "__main__":
    main()
