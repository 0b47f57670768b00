"""Model file importers: each a function from a path to a Graph, picked by suffix (no GL)."""

from pathlib import Path

from ..errors import ModelFileError, quote
from . import npz, onnx, tfjs

IMPORTERS = {".npz": npz.load, ".onnx": onnx.load, ".json": tfjs.load}


def load_graph(path) -> "Graph":  # noqa: F821
    """Read any supported model file into a Graph.

    Raises:
        ModelFileError: unknown suffix or missing file.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"{path}: no such model file")
    importer = IMPORTERS.get(path.suffix.lower())
    if importer is None:
        raise ModelFileError(f"{path}: unknown model format {quote(path.suffix)}; "
                             f"supported: {', '.join(IMPORTERS)}")
    return importer(path)
