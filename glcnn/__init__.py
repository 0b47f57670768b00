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
from .pipeline import Pipeline

__version__ = "0.1.0"

__all__ = [
    "Context", "ContextError", "GlcnnError", "Graph", "GraphError", "ModelFileError", "Node",
    "Pipeline", "ShaderCompileError", "ShapeError", "TextureSizeError", "UnsupportedOpError",
    "WeightError",
]
