"""Reading untrusted `.npy` and `.npz` files (GL-free): every header is checked before any
data is read (plain numeric dtypes only, nothing unpickled; declared sizes within the memory
budget of glcnn.limits), so a hostile file is refused before anything large is allocated.

Used by the native model format (glcnn.importers.npz), PyTorch-named weight files
(`glcnn.load_state_dict`) and `.npy` inputs (glcnn.inputs).
"""

import math
import zipfile
from pathlib import Path

import numpy as np

from .errors import GlcnnError, ModelFileError, quote
from .limits import memory_budget, mib

GRAPH_KEY = "glcnn_graph"  # the member holding a native model's graph (glcnn.importers.npz)


def read_state_dict(path: Path, check=None) -> dict[str, np.ndarray]:
    """The arrays of a PyTorch-named weights `.npz` (`read_members`), refusing a native model.

    Args:
        check: called with {member: (shape, dtype)} before any data is read (the caller
            compares the shapes with its graph).
    Raises:
        ModelFileError: as `read_members`; a glcnn native model (a whole saved graph), with
            the call that opens it.
    """
    def refuse_native(headers, read):
        if GRAPH_KEY in headers:
            raise ModelFileError(f"{path} is a glcnn native model (a whole saved graph: layers "
                                 "and weights), not a state_dict of weights; open it with "
                                 f"glcnn.load({str(path)!r}) (or glcnn.load_graph for the "
                                 "Graph)")
        if check is not None:
            check(headers)
    return read_members(path, refuse_native)


def read_members(path: Path, check=None) -> dict[str, np.ndarray]:
    """Every member of the npz at `path` as an array, headers checked before any data is read.

    Args:
        check: called as check(headers, read) after the headers ({member: (shape, dtype)})
            are checked and before any data is read; read(member) reads one member's array.
    Raises:
        ModelFileError: naming the file and, where it applies, the member; any GlcnnError
            `check` raises.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            infos = _npy_members(archive, path)
            headers = {name: _member_header(archive, info, f"{path}: member {quote(name)}")
                       for name, info in infos.items()}
            _check_total(headers, path)
            arrays = {}

            def read(name):
                if name not in arrays:
                    arrays[name] = _read_array(archive, infos[name])
                return arrays[name]
            if check is not None:
                check(headers, read)
            for name in infos:
                read(name)
            return arrays
    except GlcnnError:
        raise
    except Exception as exc:  # noqa: BLE001 - zipfile and numpy parse untrusted bytes
        raise ModelFileError(f"{path}: not a readable .npz file ({type(exc).__name__}: "
                             f"{str(exc)[:200]})") from None


def _npy_members(archive: zipfile.ZipFile, path) -> dict:
    infos = {}
    for info in archive.infolist():
        name = info.filename.removesuffix(".npy")
        if not info.filename.endswith(".npy") or name in infos:
            raise ModelFileError(f"{path}: member {quote(info.filename)} is "
                                 + ("duplicated" if name in infos else "not a .npy array"))
        infos[name] = info
    return infos


def _member_header(archive: zipfile.ZipFile, info, what: str) -> tuple[tuple, np.dtype]:
    with archive.open(info) as stream:
        return read_header(stream, what)


def read_header(stream, what: str, error=ModelFileError) -> tuple[tuple, np.dtype]:
    """(shape, dtype) from the header of a .npy stream, which must hold a plain array of
    booleans, integers or floats.

    Raises:
        `error` (ModelFileError by default): naming `what`.
    """
    try:
        version = np.lib.format.read_magic(stream)
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, _, dtype = reader(stream)
    except Exception as exc:  # noqa: BLE001 - numpy parses the header with tokenize and ast
        raise error(f"{what} has no valid .npy header ({type(exc).__name__}: "
                    f"{str(exc)[:200]})") from None
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or \
            dtype.kind not in "biuf":
        raise error(f"{what} has dtype {dtype}; expected plain numbers (float, int or bool); "
                    "nothing is unpickled")
    return tuple(shape), dtype


def _check_total(headers: dict, path) -> None:
    """Refuse declared arrays needing more memory (as float32 textures) than the budget."""
    budget = memory_budget()
    total = sum(math.prod(shape) * max(dtype.itemsize, 4) for shape, dtype in headers.values())
    if total > budget:
        raise ModelFileError(f"{path}: its arrays declare {mib(total)}, over the memory budget "
                             f"of {mib(budget)} (GLCNN_MEMORY_BUDGET)")


def _read_array(archive: zipfile.ZipFile, info) -> np.ndarray:
    with archive.open(info) as stream:
        return np.lib.format.read_array(stream, allow_pickle=False)
