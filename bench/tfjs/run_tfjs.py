"""Time TensorFlow.js in headless Chromium on glcnn's reference models (same machine, same run).

    python bench/tfjs/run_tfjs.py
        [--configs webgl,webgl-llvmpipe,wasm,wasm-threads,wasm-1thread,cpu]
        [--models autoencoder,dcgan,dcgan_folded] [--runs 30] [--warmup 5] [--budget 120]
        [--json FILE] [--chromium PATH] [--timeout 1800]

Installs the pinned npm packages (package-lock.json beside this file) with `npm ci` into
$GLCNN_CACHE/tfjs-bench (default ~/.cache/glcnn/tfjs-bench), writes the models' seeded weights,
input and reference output there, runs runner.js (headless Chromium through puppeteer-core)
and prints a table on stderr and the JSON result on stdout. See README.md beside this file.

Weights: with torch importable, the PyTorch twins of train/torch_models.py seeded exactly as
bench/suite_models.py seeds them (torch.manual_seed(0), BatchNorm statistics drawn), and
PyTorch's output as the reference; without torch, numpy weights and a numpy implementation of
PyTorch's Conv2d / ConvTranspose2d as the reference. Each TF.js output is compared with the
reference before timing; a model whose max abs difference exceeds --tolerance is not timed.
"""

import argparse
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CONFIGS = ("webgl", "webgl-llvmpipe", "wasm", "wasm-threads", "wasm-1thread", "cpu")  # runner.js
MODELS = ("autoencoder", "dcgan", "dcgan_folded")
BN_EPS = 1e-5


def cache_dir() -> Path:
    from glcnn.resources import download_dir
    return download_dir("tfjs-bench")


# --------------------------------------------------------------------------- install

def find_chromium(explicit: str | None) -> str:
    explicit = explicit or os.environ.get("CHROMIUM")
    if explicit:
        if not (path := shutil.which(explicit)):
            sys.exit(f"run_tfjs.py: Chromium {explicit!r} (--chromium / $CHROMIUM) is not an "
                     "executable")
        return path
    for candidate in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if candidate and (path := shutil.which(candidate)):
            return path
    sys.exit("run_tfjs.py: Chromium not found. Install it (Debian: `apt-get install -y chromium`) "
             "or pass --chromium PATH / set $CHROMIUM.")


def install(cache: Path) -> Path:
    """`npm ci` the pinned packages into `cache` unless they are there already: node_modules."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        sys.exit("run_tfjs.py: node and npm are needed (Debian: `apt-get install -y nodejs npm`).")
    major = int(subprocess.run([node, "--version"], capture_output=True, text=True,
                               check=True).stdout.strip().lstrip("v").split(".")[0])
    if major < 18:
        sys.exit(f"run_tfjs.py: Node.js >= 18 needed for puppeteer-core, found v{major}.")
    lock = (HERE / "package-lock.json").read_bytes()
    stamp = cache / ".installed-lock-sha256"
    digest = hashlib.sha256(lock).hexdigest()
    modules = cache / "node_modules"
    if modules.is_dir() and stamp.is_file() and stamp.read_text().strip() == digest:
        return modules
    cache.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "package.json", cache / "package.json")
    (cache / "package-lock.json").write_bytes(lock)
    print(f"npm ci in {cache} ...", file=sys.stderr, flush=True)
    try:
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=cache,
                       check=True, timeout=900, stdout=sys.stderr)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        sys.exit(f"run_tfjs.py: `npm ci` in {cache} failed ({e}); is the npm registry reachable?")
    stamp.write_text(digest)
    return modules


# --------------------------------------------------------------------------- weights

def conv2d(x, w, b, stride, pad):
    """PyTorch Conv2d on NCHW: w (Cout, Cin, k, k)."""
    n, _, h, wd = x.shape
    k = w.shape[2]
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = (h + 2 * pad - k) // stride + 1, (wd + 2 * pad - k) // stride + 1
    y = np.zeros((n, w.shape[0], ho, wo), np.float64)
    for i in range(k):
        for j in range(k):
            patch = xp[:, :, i:i + stride * ho:stride, j:j + stride * wo:stride]
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return y + (0 if b is None else b[None, :, None, None])


def conv_transpose2d(x, w, b, stride, pad):
    """PyTorch ConvTranspose2d on NCHW: w (Cin, Cout, k, k); scatter, then crop `pad`."""
    n, _, h, wd = x.shape
    k = w.shape[2]
    full = np.zeros((n, w.shape[1], (h - 1) * stride + k, (wd - 1) * stride + k), np.float64)
    for i in range(k):
        for j in range(k):
            full[:, :, i:i + stride * (h - 1) + 1:stride, j:j + stride * (wd - 1) + 1:stride] += \
                np.einsum("nchw,co->nohw", x, w[:, :, i, j])
    y = full[:, :, pad:full.shape[2] - pad, pad:full.shape[3] - pad]
    return y + (0 if b is None else b[None, :, None, None])


def numpy_models(rng):
    """(weights, forward) pairs like the PyTorch twins, PyTorch-style uniform init."""
    def uniform(shape, fan_in):
        bound = 1 / np.sqrt(fan_in)
        return rng.uniform(-bound, bound, shape).astype(np.float32)

    ae = {}
    for name, cin, cout, transpose in (("enc1", 3, 64, False), ("enc2", 64, 256, False),
                                       ("dec1", 256, 64, True), ("dec2", 64, 3, True)):
        shape = (cin, cout, 4, 4) if transpose else (cout, cin, 4, 4)
        fan_in = (cout if transpose else cin) * 16
        ae[f"{name}.weight"], ae[f"{name}.bias"] = uniform(shape, fan_in), uniform(cout, fan_in)

    def ae_forward(w, x):
        h = np.maximum(conv2d(x, w["enc1.weight"], w["enc1.bias"], 2, 1), 0)
        h = np.maximum(conv2d(h, w["enc2.weight"], w["enc2.bias"], 2, 1), 0)
        h = np.maximum(conv_transpose2d(h, w["dec1.weight"], w["dec1.bias"], 2, 1), 0)
        return 1 / (1 + np.exp(-conv_transpose2d(h, w["dec2.weight"], w["dec2.bias"], 2, 1)))

    chans, dc = [100, 512, 256, 128, 64, 3], {}
    for i in range(5):
        dc[f"main.{3 * i}.weight"] = uniform((chans[i], chans[i + 1], 4, 4), chans[i + 1] * 16)
        if i < 4:
            c = chans[i + 1]
            dc[f"main.{3 * i + 1}.weight"] = rng.uniform(0.5, 1.5, c).astype(np.float32)
            dc[f"main.{3 * i + 1}.bias"] = rng.normal(0, 0.1, c).astype(np.float32)
            dc[f"main.{3 * i + 1}.running_mean"] = rng.normal(0, 0.1, c).astype(np.float32)
            dc[f"main.{3 * i + 1}.running_var"] = rng.uniform(0.5, 1.5, c).astype(np.float32)

    def dc_forward(w, z):
        h = z
        for i in range(4):
            h = conv_transpose2d(h, w[f"main.{3 * i}.weight"], None, 1 if i == 0 else 2,
                                 0 if i == 0 else 1)
            bn = f"main.{3 * i + 1}"
            scale = w[f"{bn}.weight"] / np.sqrt(w[f"{bn}.running_var"] + BN_EPS)
            h = (h - w[f"{bn}.running_mean"][None, :, None, None]) * scale[None, :, None, None]
            h = np.maximum(h + w[f"{bn}.bias"][None, :, None, None], 0)
        return np.tanh(conv_transpose2d(h, w["main.12.weight"], None, 2, 1))

    return (ae, ae_forward), (dc, dc_forward)


def reference_models():
    """{name: (state dict of numpy arrays, input NCHW, reference output NCHW)}, and a label."""
    rng = np.random.default_rng(0)
    x = rng.random((1, 3, 32, 32)).astype(np.float32)
    z = rng.standard_normal((1, 100, 1, 1)).astype(np.float32)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None:
        (ae, ae_fwd), (dc, dc_fwd) = numpy_models(np.random.default_rng(1))
        return ({"autoencoder": (ae, x, ae_fwd(ae, x).astype(np.float32)),
                 "dcgan": (dc, z, dc_fwd(dc, z).astype(np.float32))},
                "numpy (float64) implementation of PyTorch Conv2d/ConvTranspose2d")
    sys.path[:0] = [str(ROOT / "train"), str(ROOT / "bench")]
    from suite_models import seeded  # the suite's weights: same model, same weights
    from torch_models import Autoencoder, DCGANGenerator

    out = {}
    for name, make, inp in (("autoencoder", Autoencoder, x), ("dcgan", DCGANGenerator, z)):
        model = seeded(make)
        with torch.inference_mode():
            ref = model(torch.from_numpy(inp)).numpy()
        state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()
                 if not k.endswith("num_batches_tracked")}
        out[name] = (state, inp, ref)
    return out, f"PyTorch {torch.__version__} (CPU, float32)"


def fold_bn(state):
    """The DCGAN weights with each BatchNorm folded into the ConvTranspose before it."""
    folded = {}
    for i in range(4):
        w, bn = state[f"main.{3 * i}.weight"], f"main.{3 * i + 1}"
        scale = state[f"{bn}.weight"] / np.sqrt(state[f"{bn}.running_var"] + BN_EPS)
        folded[f"main.{3 * i}.weight"] = w * scale[None, :, None, None]  # (Cin, Cout, k, k)
        folded[f"main.{3 * i}.bias"] = state[f"{bn}.bias"] - state[f"{bn}.running_mean"] * scale
    folded["main.12.weight"] = state["main.12.weight"]
    return folded


def write_data(data_dir: Path, models: dict) -> None:
    """One float32 .bin per model (filters as TF.js wants them, NHWC input and reference)
    and manifest.json with the offsets and shapes."""
    data_dir.mkdir(parents=True, exist_ok=True)
    manifest = {"models": {}}
    specs = {"autoencoder": ("autoencoder", models["autoencoder"]),
             "dcgan": ("dcgan", models["dcgan"]),
             "dcgan_folded": ("dcgan_folded", (fold_bn(models["dcgan"][0]), *models["dcgan"][1:]))}
    for name, (arch, (state, x, ref)) in specs.items():
        tensors, chunks, offset = {}, [], 0
        arrays = {k: (v.transpose(2, 3, 1, 0) if v.ndim == 4 else v) for k, v in state.items()}
        # Conv2d (Cout, Cin, kh, kw) and ConvTranspose2d (Cin, Cout, kh, kw) both map to TF.js's
        # (kh, kw, Cin, Cout) conv2d / (kh, kw, out, in) conv2dTranspose filters by (2, 3, 1, 0).
        arrays["input"] = x.transpose(0, 2, 3, 1)
        arrays["reference"] = ref.transpose(0, 2, 3, 1)
        for key, a in arrays.items():
            a = np.ascontiguousarray(a, np.float32)
            tensors[key] = {"offset": offset, "shape": list(a.shape)}
            chunks.append(a.ravel())
            offset += a.size
        np.concatenate(chunks).astype("<f4").tofile(data_dir / f"{name}.bin")
        manifest["models"][name] = {"arch": arch, "file": f"{name}.bin", "tensors": tensors}
    (data_dir / "manifest.json").write_text(json.dumps(manifest, indent=1))


# --------------------------------------------------------------------------- run

def run_runner(cmd: list[str], timeout: float) -> dict:
    """runner.js's JSON; its stderr (progress) passes through. Kills its process group on
    timeout so no Chromium is left behind."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    timed_out = False
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    try:  # whatever is left of runner.js's group: Chromium's processes after a failure
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if timed_out:
        proc.communicate()
        sys.exit(f"run_tfjs.py: runner.js did not finish within {timeout:.0f} s (killed)")
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if not lines:
        sys.exit(f"run_tfjs.py: runner.js failed (exit {proc.returncode}); see the log above")
    return json.loads(lines[-1])


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def machine(load_start: str) -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"platform": platform.platform(), "cpu": cpu, "cores": len(os.sched_getaffinity(0)),
            "load_average_start": load_start, "load_average_end": load()}


def summarize(raw: dict, reference: str, settings: dict, load_start: str) -> dict:
    configs = raw["configs"]
    result = {"chromium": next((c["chromium"] for c in configs.values() if "chromium" in c), None),
              "webgl_renderer": None, "tfjs": raw["tfjs"], "node": raw["node"],
              "reference": reference, "machine": machine(load_start), "settings": settings,
              "backends": {}, "models": {}}
    for name, c in configs.items():
        if "error" in c:
            result["backends"][name] = {"error": c["error"]}
            continue
        info = {k: v for k, v in c["info"].items() if k != "user_agent"}
        info["chromium_flags"] = c["flags"]
        if "warning" in c:
            info["warning"] = c["warning"]
        result["backends"][name] = info
        if name == "webgl":
            result["webgl_renderer"] = info.get("webgl_renderer")
        for model, m in c["models"].items():
            keep = ("median_ms", "min_ms", "mean_ms", "max_ms", "runs", "first_ms",
                    "max_abs_diff", "output_shape", "leaked_tensors", "error", "times_ms")
            result["models"].setdefault(model, {})[name] = {k: m[k] for k in keep if k in m}
    return result


def table(result: dict) -> str:
    configs = list(result["backends"])
    head = ["model"] + [f"{c} median / min ms" for c in configs]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for model, per in result["models"].items():
        cells = [model]
        for c in configs:
            m = per.get(c, {})
            cells.append(f"{m['median_ms']:.2f} / {m['min_ms']:.2f}" if "median_ms" in m
                         else m.get("error", "—"))
        lines.append("| " + " | ".join(cells) + " |")
    for c, info in result["backends"].items():
        if "error" in info:
            lines.append(f"{c}: ERROR {info['error']}")
    return "\n".join(lines)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", default=",".join(CONFIGS),
                   help="comma-separated: webgl (SwiftShader), webgl-llvmpipe (ANGLE on Mesa "
                        "EGL), wasm (TF.js default: SIMD + threads, min(8, cores / 2) of them), "
                        "wasm-threads (SIMD + one thread per core), wasm-1thread (SIMD, no "
                        "threads), cpu (plain JS)")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--budget", type=float, default=120,
                   help="seconds per model and config; timing stops after it (≥ 3 runs)")
    p.add_argument("--tolerance", type=float, default=1e-3)
    p.add_argument("--timeout", type=float, default=1800, help="seconds for the whole run")
    p.add_argument("--chromium")
    p.add_argument("--json", type=Path, help="also write the JSON result to this file")
    args = p.parse_args(argv)
    for m in args.models.split(","):
        if m not in MODELS:
            p.error(f"unknown model {m}; known: {', '.join(MODELS)}")
    for c in args.configs.split(","):
        if c not in CONFIGS:
            p.error(f"unknown config {c}; known: {', '.join(CONFIGS)}")

    chromium = find_chromium(args.chromium)
    cache = cache_dir()
    modules = install(cache)
    models, reference = reference_models()
    data = cache / "data"
    write_data(data, models)
    cmd = ["node", str(HERE / "runner.js"), "--modules", str(modules), "--data", str(data),
           "--chromium", chromium, "--configs", args.configs, "--models", args.models,
           "--runs", str(args.runs), "--warmup", str(args.warmup), "--budget", str(args.budget),
           "--tolerance", str(args.tolerance), "--timeout", str(args.timeout)]
    load_start = load()
    if os.getloadavg()[0] > 0.5 * len(os.sched_getaffinity(0)):
        print(f"run_tfjs.py: WARNING: the machine is busy (load average {load_start}); "
              "the timings will be noisy", file=sys.stderr)
    raw = run_runner(cmd, args.timeout + 60)
    settings = {"runs": args.runs, "warmup": args.warmup, "budget_s": args.budget,
                "tolerance": args.tolerance,
                "timed": "tf.tensor(input) + model ops in tf.tidy + await y.data() (readback)"}
    result = summarize(raw, reference, settings, load_start)
    print(f"\nChromium {result['chromium']}, TF.js {result['tfjs']}, "
          f"WebGL renderer: {result['webgl_renderer']}\n{table(result)}\n", file=sys.stderr)
    text = json.dumps(result, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    if not any("median_ms" in m for per in result["models"].values() for m in per.values()):
        sys.exit("run_tfjs.py: nothing was timed")
    return result


if __name__ == "__main__":
    main()
