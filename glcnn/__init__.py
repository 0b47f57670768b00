"""glcnn: run convolutional neural networks in GLSL fragment shaders on offscreen OpenGL.

    import glcnn
    model = glcnn.load("model.npz")      # a Pipeline on a headless EGL context
    y = model.run(x)                     # numpy (C, H, W) or (1, C, H, W) in, numpy out
    t = model.texture("enc1")            # intermediate moderngl.Texture, no readback
"""

from .context import Context
from .errors import (ContextError, GlcnnError, GraphError, ModelFileError, ShaderCompileError,
                     ShapeError, TextureSizeError, UnsupportedOpError, WeightError)
from .graph import Graph, Node
from .builder import Builder, load_state_dict
from .importers import load_graph
from .importers.npz import save
from .pipeline import Pipeline


def load(path, ctx=None, precision: str = "fp32", keep=()) -> Pipeline:
    """Load a model file (.npz native format) and compile it on `ctx` (default: headless EGL).

    Args:
        path: the model file.
        ctx, precision, keep: as for `Pipeline`.
    Raises:
        ModelFileError, and the GlcnnError subclasses of `Pipeline`.
    """
    from .passes import optimize
    return Pipeline(optimize(load_graph(path)), ctx, precision, keep)

__version__ = "0.1.0"

__all__ = [
    "Builder", "load", "load_graph", "load_state_dict", "save",
    "Context", "ContextError", "GlcnnError", "Graph", "GraphError", "ModelFileError", "Node",
    "Pipeline", "ShaderCompileError", "ShapeError", "TextureSizeError", "UnsupportedOpError",
    "WeightError",
]
