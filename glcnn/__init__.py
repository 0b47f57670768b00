"""glcnn: run convolutional neural networks in GLSL fragment shaders on offscreen OpenGL.

    import glcnn
    model = glcnn.load("model.npz")      # a Pipeline on a headless EGL context
    y = model.run(x)                     # numpy (C, H, W) or (1, C, H, W) in, numpy out
    t = model.texture("enc1")            # intermediate moderngl.Texture, no readback
    m = glcnn.load("fcn.onnx")           # inputs [1, 3, H, W]: compiled per size at run(x)
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
from .importers import load_graph, open_inputs
from .importers.npz import save
from .importers.prepared import load_optimized
from .runtime import open_size
from .runtime.calibration import calibrate
from .runtime.context import Context
from .runtime.open_size import OpenSizePipeline
from .runtime.pipeline import Pipeline, Readback
from .runtime.precision import TOLERANCE
from .train import Trainer


def load(path, ctx=None, precision: str = "fp32", keep=(), strategy=None,
         cache: bool | None = None, calibration=None, max_gflop=None,
         input_size=None) -> Pipeline | OpenSizePipeline:
    """Load a model file (.onnx, glcnn's native .npz, TF.js model.json) and compile it on `ctx`.

    A model whose image inputs leave height and width open (`open_inputs`: an ONNX export
    with dynamic axes, a TF.js model with None sizes) is compiled for `input_size` if given;
    without it, an `OpenSizePipeline` is returned: the Pipeline API, compiled for each input
    size at its first `run(x)` (the 4 sizes run last stay compiled, sharing programs).

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
            With open sizes, the ranges are calibrated once, at the first sample's size,
            and used at every size.
        input_size: (H, W) for open sizes (fixed sizes ignore it).
    Raises:
        ModelFileError, and the GlcnnError subclasses of `Pipeline` (for "u8" without
        ranges: a GlcnnError asking for `calibration=`); UnsupportedOpError for an open
        channel count.
    """
    ranges = {}

    def specialise(size) -> Pipeline:
        graph = load_optimized(path, cache, size)
        if calibration is not None and not ranges:
            sample = graph if size is None or input_size is not None else \
                load_optimized(path, cache, _sample_size(calibration, opened))
            ranges.update(calibrate(sample, calibration, ctx))
        if ranges:
            graph.meta["u8_ranges"] = ranges
        return Pipeline(graph, ctx, precision, keep, strategy=strategy, max_gflop=max_gflop)

    opened = open_inputs(path) if input_size is None else {}
    return OpenSizePipeline(specialise, opened) if opened else specialise(input_size)


def _sample_size(samples, opened: dict) -> tuple[int, int]:
    """(H, W) of the first calibration sample, for a model with open inputs `opened`."""
    first = samples[0] if isinstance(samples, list | tuple) else samples
    return open_size.size_of(opened, first)

__version__ = "0.1.0"

__all__ = [
    "Builder", "calibrate", "load", "load_graph", "load_state_dict", "models", "open_inputs",
    "save",
    "Context", "ContextError", "GlcnnError", "Graph", "GraphError", "MismatchError",
    "ModelFileError", "Node", "NothingComparedError", "OpenSizePipeline", "Pipeline", "Readback",
    "ShaderCompileError", "ShapeError", "TextureSizeError", "TOLERANCE", "Trainer",
    "UnsupportedOpError", "WeightError",
]
