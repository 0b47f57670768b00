"""Same-host A/B of two glcnn source trees: each model timed in fresh processes, alternating.

    git archive OLD_COMMIT | tar -x -C /tmp/base
    python bench/ab_trees.py /tmp/base . --models autoencoder32:fp32,fast_style:u8 --rounds 2

Models are the suite's (bench/bench_suite.py CASES), exported once to --cache with seeded
weights and a seeded input. Each process imports glcnn from one tree (PYTHONPATH, run in that
tree: checked, the run stops if a process imported glcnn from anywhere else), loads the
model without the prepared-model cache (u8: calibrated on the input), runs it once (the
"load + first run" time, Mesa's shader cache warm after the first round), then times run()
with readback for up to 4 s (at least 5 runs): median and min. Prints one line per model.
"""

import argparse
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

CHILD = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import glcnn
try:
    from glcnn.importers.prepared import load_optimized
except ImportError:  # a tree from before the sub-packages (issue #19)
    from glcnn.prepared import load_optimized
path, inp, precision = sys.argv[1:4]
x = np.load(inp)
graph = load_optimized(path, cache=False)
if precision == "u8":
    glcnn.calibrate(graph, [x])
pipe = glcnn.Pipeline(graph, precision=precision)
pipe.run(x)
load = time.perf_counter() - t0
times, end = [], time.perf_counter() + 4.0
while len(times) < 5 or (time.perf_counter() < end and len(times) < 200):
    start = time.perf_counter()
    pipe.run(x)
    times.append((time.perf_counter() - start) * 1e3)
print(json.dumps({"load": load, "median": float(np.median(times)), "min": min(times),
                  "module": glcnn.__file__}))
"""


def export(name: str, cache: Path) -> tuple[Path, Path]:
    """The suite model `name` as ONNX and a seeded input for it, in `cache`."""
    sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1] / "train")]
    import bench_suite
    path = bench_suite.exported(name, cache)
    inp = cache / f"{name}.npy"
    if not inp.exists():
        shape = bench_suite.CASES[name][2]
        rng = np.random.default_rng(0)
        x = rng.standard_normal(shape) if name == "dcgan" else rng.random(shape)
        np.save(inp, x.astype(np.float32))
    return path, inp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("new")
    parser.add_argument("--models", default="autoencoder32:fp32,dcgan:fp32")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache/glcnn/bench")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    cases = [item.split(":") for item in args.models.split(",")]
    results = defaultdict(list)
    for _ in range(args.rounds):
        for name, precision in cases:
            path, inp = export(name, args.cache)
            for tree in (args.base, args.new):
                root = Path(tree).resolve()
                # cwd=root too: `python -c` puts the working folder first on sys.path, ahead
                # of PYTHONPATH, so run from a checkout both sides imported the checkout.
                done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(inp),
                                       precision], env={**os.environ, "PYTHONPATH": str(root)},
                                      cwd=root, capture_output=True, text=True, check=True,
                                      timeout=600)
                result = json.loads(done.stdout.splitlines()[-1])
                if not Path(result["module"]).is_relative_to(root):
                    sys.exit(f"the {tree} run imported glcnn from {result['module']}")
                results[name, precision, tree].append(result)
    for name, precision in cases:
        cells = []
        for tree in (args.base, args.new):
            rs = results[name, precision, tree]
            cells.append(" / ".join(f"{r['median']:.1f}" for r in rs) + " ms median, "
                         + " / ".join(f"{r['load']:.2f}" for r in rs) + " s load+run")
        print(f"{name} {precision}: base {cells[0]} | new {cells[1]}")


if __name__ == "__main__":
    main()
