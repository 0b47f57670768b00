"""A model whose image inputs leave height and width open, run at whatever size it is given.

ONNX exports with dynamic axes (`[1, 3, "H", "W"]`) and TF.js models with `None` sizes take
any input size, as onnxruntime and TF.js do. A glcnn Pipeline is compiled for one size (its
textures, and the folded shape arithmetic of the graph, depend on it), so `OpenSizePipeline`
keeps one Pipeline per size: the first `run(x)` at a size specialises the model for x's
(H, W) through a factory (`size -> Pipeline`; `glcnn.load` gives one that imports the model
at that size), and the `max_sizes` most recently used specialisations stay compiled. Their
programs come from the context's program cache, so a second size compiles only the programs
whose source depends on the size.

    model = glcnn.load("fcn.onnx")     # inputs (1, 3, H, W): an OpenSizePipeline
    y1 = model.run(x_240x320)          # compiles for 240x320
    y2 = model.run(x_480x640)          # compiles for 480x640 (shared programs reused)
    model.texture("conv1")             # of the size run last

Runtime knows no file format: the factory does the importing.
"""

from collections import OrderedDict

import numpy as np

from ..errors import GlcnnError, ShapeError, quote
from .pipeline import Pipeline

# Attributes a Pipeline sets in __init__ that OpenSizePipeline hands on from the size run last.
PIPELINE_ATTRS = frozenset({"ctx", "graph", "precision", "strategy", "ops", "shapes", "plan",
                            "passes", "textures", "timings", "blocking", "blocked_tensors", "u8"})


class OpenSizePipeline:
    """The Pipeline API for a model with open input sizes, specialised per size at `run`.

    Everything but `run`, `specialise`, `set_weights` and `release` acts on the Pipeline of the
    size run last (`current`): `texture`, `read`, `summary`, `graph`, `shapes`, ... before any
    run raise GlcnnError.

    Args:
        factory: `(H, W) -> Pipeline` compiling the model for that input size.
        open_inputs: the model's inputs whose sizes are open, in its own layout with "H"/"W"
            for them (as `glcnn.importers.open_inputs` gives): {"x": (1, 3, "H", "W")}.
        max_sizes: how many specialisations stay compiled; the least recently run one is
            released beyond that (its textures, and `Readback`s not yet read, become invalid).
    """

    def __init__(self, factory, open_inputs: dict, max_sizes: int = 4):
        if not open_inputs or max_sizes < 1:
            raise GlcnnError("OpenSizePipeline needs open inputs and max_sizes >= 1")
        self.factory, self.open_inputs, self.max_sizes = factory, dict(open_inputs), max_sizes
        self.pipelines: OrderedDict[tuple[int, int], Pipeline] = OrderedDict()
        self.current: Pipeline | None = None
        self.released = False
        self._edits: list[tuple[str, str, np.ndarray]] = []  # set_weights, for later sizes

    @property
    def sizes(self) -> list[tuple[int, int]]:
        """The (H, W) compiled now, least recently run first."""
        return list(self.pipelines)

    def run(self, inputs=None, readback=True, **named):
        """`Pipeline.run` on the specialisation for the inputs' (H, W), compiled if new.

        Raises:
            ShapeError: no open input given, or one that is not (C, H, W) / (1, C, H, W)
                (or the model's own (1, H, W, C)); and as `Pipeline.run` and `specialise`.
        """
        return self.specialise(self.size_of(inputs, named)).run(inputs, readback, **named)

    def specialise(self, size) -> Pipeline:
        """The Pipeline for input size `size` (H, W): compiled on first use, then kept among
        the `max_sizes` most recently used ones; it becomes `current`.

        Raises:
            GlcnnError: released; and whatever the factory raises (import, compile).
        """
        if self.released:
            raise GlcnnError("specialise() of a released OpenSizePipeline")
        size = tuple(int(v) for v in size)
        pipe = self.pipelines.pop(size, None)
        if pipe is None:
            pipe = self.factory(size)
            for layer, name, array in self._edits:
                pipe.set_weights(layer, name, array)
        self.pipelines[size] = pipe  # most recently used last
        while len(self.pipelines) > self.max_sizes:
            self.pipelines.popitem(last=False)[1].release()
        self.current = pipe
        return pipe

    def size_of(self, inputs=None, named=None) -> tuple[int, int]:
        """(H, W) that `run(inputs, **named)` would specialise for (see `size_of`)."""
        return size_of(self.open_inputs, inputs, named)

    def set_weights(self, layer: str, name: str, array) -> int:
        """`Pipeline.set_weights` on every specialisation, and on those compiled later.

        Returns:
            The texels written in `current` (or in the first, before any run).
        """
        written = [pipe.set_weights(layer, name, array) for pipe in self.pipelines.values()]
        self._edits.append((layer, name, np.array(array, np.float32)))
        return written[-1] if written else 0

    def release(self) -> None:
        """Release every specialisation (see `Pipeline.release`); releasing twice is harmless."""
        self.released = True
        while self.pipelines:
            self.pipelines.popitem()[1].release()
        self.current = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __getattr__(self, name: str):
        """Pipeline methods and attributes, of the size run last."""
        if name.startswith("_") or not (name in PIPELINE_ATTRS or hasattr(Pipeline, name)):
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        if self.current is None:
            state = "was released" if self.released else "has not run yet"
            raise GlcnnError(f"{name}: the model's input sizes are open "
                             f"({shown_inputs(self.open_inputs)}) and it {state}: run(x) once "
                             "to compile it for x's size, or pass input_size=(H, W) to "
                             "glcnn.load")
        return getattr(self.current, name)

    def __repr__(self):
        return (f"OpenSizePipeline(inputs {shown_inputs(self.open_inputs)}, sizes={self.sizes}, "
                f"current={self.current})")


def size_of(open_inputs: dict, inputs=None, named=None) -> tuple[int, int]:
    """(H, W) of the first of `open_inputs` among `inputs` (one array, or a dict) and `named`.

    Raises:
        ShapeError: no open input given, or one of a rank other than 3 or 4.
    """
    feeds = dict(named or {})
    if isinstance(inputs, dict):
        feeds.update(inputs)
    elif inputs is not None:
        feeds[next(iter(open_inputs))] = inputs
    for name, dims in open_inputs.items():
        if name in feeds:
            return spatial_size(name, dims, np.shape(feeds[name]))
    raise ShapeError(f"inputs {sorted(feeds)} hold none of the inputs with open sizes "
                     f"{shown_inputs(open_inputs)}")


def spatial_size(name: str, dims: tuple, shape: tuple) -> tuple[int, int]:
    """(H, W) of an array of `shape` fed to input `name` of own dims `dims` (with "H"/"W"):
    (C, H, W), (1, C, H, W), or for a channels-last model (1, H, W, C) and (H, W, C) too.

    Raises:
        ShapeError: a rank other than 3 or 4.
    """
    nhwc = dims.index("H") == 1 if "H" in dims else dims.index("W") == 2
    if len(shape) in (3, 4) and nhwc and shape[-1] == dims[3]:
        return int(shape[-3]), int(shape[-2])
    if len(shape) in (3, 4):
        return int(shape[-2]), int(shape[-1])
    raise ShapeError(f"input {quote(name)} has shape {tuple(shape)}; expected an image "
                     f"(C, H, W) or {shown(dims)}")


def shown(dims: tuple) -> str:
    """Dims with "H"/"W" for open sizes as text, e.g. `(1, 3, H?, W?)`."""
    return "(" + ", ".join(f"{d}?" if isinstance(d, str) else str(d) for d in dims) + ")"


def shown_inputs(open_inputs: dict) -> str:
    """Open inputs as text, e.g. `x (1, 3, H?, W?), y (1, 1, H?, W?)`."""
    return ", ".join(f"{name} {shown(dims)}" for name, dims in open_inputs.items())
