"""Run by test_threads.py in a fresh process: compile and run the models named in argv[1]
("small" or "large", comma-separated; "context": make a glcnn.Context first) on glcnn's
default context, in that order; print one
JSON line: the renderer, the rasteriser threads each pipeline's context asked for, whether
glcnn chose them, llvmpipe's threads alive (/proc), LP_NUM_THREADS after, the RuntimeWarnings
raised and each output's scaled error against the float64 reference."""

import json
import os
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import conv_node, scaled_error  # noqa: E402

import glcnn  # noqa: E402
from glcnn.graph import Graph, reference  # noqa: E402


def model(kind: str) -> Graph:
    """"small": three 1×1 convs 8 → 8 at 6×6 (0.005 MFLOP each); "large": two 3×3 convs
    32 → 32 at 48×48 (42 MFLOP each)."""
    c, size, k = (8, 6, 1) if kind == "small" else (32, 48, 3)
    nodes, x = [], "x"
    for i in range(3 if kind == "small" else 2):
        nodes.append(conv_node(f"conv{i}", x, c, c, k=k, seed=i))
        x = nodes[-1].name
    return Graph({"x": (c, size, size)}, nodes, [x])


def llvmpipe_threads() -> int:
    return sum(Path(f"/proc/self/task/{t}/comm").read_text().startswith("llvmpipe")
               for t in os.listdir("/proc/self/task"))


report = {"asked": [], "errors": []}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for kind in sys.argv[1].split(","):
        if kind == "context":  # a context of the driver's default threads, made first
            report["first"] = glcnn.Context()
            continue
        graph = model(kind)
        x = np.random.default_rng(0).standard_normal(graph.inputs["x"]).astype(np.float32)
        with glcnn.Pipeline(graph) as pipe:
            y = pipe.run(x)
            report["asked"].append(pipe.ctx.rasterizer_threads)
            report["chosen"], report["renderer"] = pipe.ctx.threads_chosen, pipe.ctx.renderer
        report["errors"].append(scaled_error(y, reference.run(graph, {"x": x})[graph.outputs[0]]))
report["warnings"] = sum(issubclass(w.category, RuntimeWarning) for w in caught)
report["llvmpipe_threads"] = llvmpipe_threads()
report["variable_after"] = os.environ.get("LP_NUM_THREADS")
report.pop("first", None)
print(json.dumps(report))
