"""glcnn: run convolutional neural networks in GLSL fragment shaders on offscreen OpenGL.

    import glcnn
    model = glcnn.load("model.npz")      # a Pipeline on a headless EGL context
    y = model.run(x)                     # numpy (C, H, W) or (1, C, H, W) in, numpy out
    t = model.texture("enc1")            # intermediate moderngl.Texture, no readback
"""

from .errors import (
    ContextError,
    GlcnnError,
    GraphError,
    MismatchError,
    ModelFileError,
    NothingComparedError,
    ShaderCompileError,
    ShapeError,
    TextureSizeError,
    UnsupportedOpError,
    WeightError,
)
from .graph import Graph, Node, models
from .graph.builder import Builder, load_state_dict
from .importers import load_graph
from .importers.npz import save
from .importers.prepared import load_optimized
from .runtime.calibration import calibrate
from .runtime.context import Context
from .runtime.pipeline import Pipeline, Readback
from .runtime.precision import TOLERANCE


def load(path, ctx=None, precision: str = "fp32", keep=(), strategy=None,
         cache: bool | None = None, calibration=None, max_gflop=None) -> Pipeline:
    """Load a model file (.onnx, glcnn's native .npz, TF.js model.json) and compile it on `ctx`.

    The graph is optimised (BatchNorm folded, activations and residual adds fused) and
    compiled on `ctx`, by default a new headless EGL context. The optimised graph of an
    .onnx/.npz file is kept in the prepared-model cache (`glcnn.importers.prepared`), so loading the
    same file again skips importing and optimising it.

    Args:
        path: the model file.
        ctx, precision, keep, strategy, max_gflop: as for `Pipeline` (max_gflop: the
            compute limit in GFLOP per run, default GLCNN_MAX_GFLOP or 200).
        cache: use the prepared-model cache (default: unless GLCNN_CACHE=0).
        calibration: sample inputs (a list of arrays or dicts, or one array) to calibrate
            the u8 ranges on, as `calibrate` does on the optimised graph; needed for
            precision="u8" unless the file stores ranges. The ranges end up in
            `pipeline.graph.meta["u8_ranges"]` (`save(pipeline.graph, path)` keeps them).
    Raises:
        ModelFileError, and the GlcnnError subclasses of `Pipeline` (for "u8" without
        ranges: a GlcnnError asking for `calibration=`).
    """
    graph = load_optimized(path, cache)
    if calibration is not None:
        calibrate(graph, calibration, ctx)
    return Pipeline(graph, ctx, precision, keep, strategy=strategy, max_gflop=max_gflop)

__version__ = "0.1.0"

__all__ = [
    "Builder", "calibrate", "load", "load_graph", "load_state_dict", "models", "save",
    "Context", "ContextError", "GlcnnError", "Graph", "GraphError", "MismatchError",
    "ModelFileError", "Node", "NothingComparedError", "Pipeline", "Readback",
    "ShaderCompileError", "ShapeError", "TextureSizeError", "TOLERANCE", "UnsupportedOpError",
    "WeightError",
]
