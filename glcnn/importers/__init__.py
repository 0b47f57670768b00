"""Model file importers: each a function from a path to a Graph, picked by suffix (no GL)."""

from pathlib import Path

from ..errors import ModelFileError, quote
from . import npz, onnx, onnx_inputs, tfjs

IMPORTERS = {".npz": npz.load, ".onnx": onnx.load, ".json": tfjs.load}
# Formats whose inputs may leave H and W open: their importers take input_size=(H, W).
OPEN_SIZES = {".onnx": onnx_inputs.open_inputs, ".json": tfjs.open_inputs}


def load_graph(path, input_size=None) -> "Graph":  # noqa: F821
    """Read any supported model file into a Graph.

    Args:
        input_size: (H, W) for image inputs whose height and width the model leaves open
            (`open_inputs`); fixed sizes, and .npz files, ignore it.
    Raises:
        ModelFileError: unknown suffix or missing file. GlcnnError: an `input_size` that is
            not two positive integers.
    """
    path = _importable(path)
    if input_size is not None and path.suffix.lower() in OPEN_SIZES:
        return IMPORTERS[path.suffix.lower()](path, onnx_inputs.check_input_size(input_size))
    return IMPORTERS[path.suffix.lower()](path)


def open_inputs(path) -> dict[str, tuple]:
    """The inputs of a model file whose height or width is open, in the model's own layout
    with "H" / "W" in place of each open size: {"input": (1, 3, "H", "W")} for an ONNX
    export with dynamic axes, (1, "H", "W", 3) for a channels_last TF.js model; {} when every
    size is fixed (always, for .npz). Cheap: the model is not imported (an ONNX file's inputs
    are read from its bytes, a TF.js model's from model.json).

    Raises:
        ModelFileError: unknown suffix or missing file (a file that does not read as its
            format gives {}, and its import the error).
        UnsupportedOpError: an open channel count, or an open dim of a non-image input.
    """
    path = _importable(path)
    reader = OPEN_SIZES.get(path.suffix.lower())
    return reader(path) if reader else {}


def _importable(path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"{path}: no such model file")
    if path.suffix.lower() not in IMPORTERS:
        raise ModelFileError(f"{path}: unknown model format {quote(path.suffix)}; "
                             f"supported: {', '.join(IMPORTERS)}")
    return path
