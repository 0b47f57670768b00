"""Model file importers: each a function from a path to a Graph, picked by suffix (no GL)."""

from pathlib import Path

from ..errors import GlcnnError, ModelFileError, quote
from ..resources import resource_dir
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


def model_path(path) -> Path:
    """Where the model `path` names is, the one place model paths are resolved (load_graph,
    open_inputs, so glcnn.load and every glcnn command): an existing file as itself; a
    folder holding model.json (a TF.js model as downloaded) as that model.json; a shipped
    model's short name, e.g. "autoencoder" (`shipped_models()`), as its file in glcnn's
    weights/. Anything else is returned as given: importing it says what is wrong."""
    path = Path(path)
    try:
        if path.is_dir() and (path / "model.json").is_file():
            return path / "model.json"
        if not path.exists() and not path.suffix and str(path) in shipped_models():
            return shipped_models()[str(path)]
    except OSError:  # e.g. a name too long for the file system: reported as no such file
        pass
    return path


def shipped_models() -> dict[str, Path]:
    """{short name: file} of the models glcnn ships in weights/ ({} if it is missing)."""
    try:
        folder = resource_dir("weights")
    except GlcnnError:
        return {}
    return {file.stem: file for file in sorted(folder.iterdir()) if file.suffix in IMPORTERS}


def _importable(path) -> Path:
    path = model_path(path)
    if _is(path, Path.is_dir):
        raise ModelFileError(f"{path}: a folder without model.json; give a model file")
    if not _is(path, Path.is_file):
        names = ", ".join(shipped_models()) or "none"
        raise ModelFileError(f"{path}: no such model file (shipped models, by short name: "
                             f"{names})")
    if path.suffix.lower() not in IMPORTERS:
        raise ModelFileError(f"{path}: unknown model format {quote(path.suffix)}; "
                             f"supported: {', '.join(IMPORTERS)}")
    return path


def _is(path: Path, test) -> bool:
    """`test(path)` (Path.is_file, Path.is_dir), False where the OS refuses the name."""
    try:
        return test(path)
    except OSError:
        return False
