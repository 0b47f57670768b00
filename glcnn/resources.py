"""Find the files glcnn ships (shaders, weights) whether installed or run from a checkout, and
where glcnn keeps what it caches and downloads."""

import atexit
import functools
import os
import tempfile
from pathlib import Path

from .errors import GlcnnError

_PACKAGE = Path(__file__).resolve().parent
_KINDS = ("shaders", "weights")


def resource_dir(kind: str) -> Path:
    """Return the directory holding shipped `kind` files ("shaders" or "weights").

    A wheel carries them inside the package (`glcnn/shaders`); a source checkout or an
    editable install keeps them at the top of the repository (`shaders/`).

    Raises:
        GlcnnError: if `kind` is unknown or the directory is missing from the install.
    """
    if kind not in _KINDS:
        raise GlcnnError(f"unknown resource kind {kind!r}; expected one of {_KINDS}")
    for candidate in (_PACKAGE / kind, _PACKAGE.parent / kind):
        if candidate.is_dir():
            return candidate
    raise GlcnnError(f"glcnn's {kind}/ directory is missing next to {_PACKAGE}; reinstall glcnn")


def resource_path(kind: str, name: str) -> Path:
    """Return the path of one shipped file, e.g. `resource_path("shaders", "conv.glsl")`.

    Raises:
        GlcnnError: if the file does not exist.
    """
    path = resource_dir(kind) / name
    if not path.is_file():
        raise GlcnnError(f"glcnn resource {kind}/{name} not found in {path.parent}")
    return path


CACHE_OFF = ("0", "off", "no", "false")  # GLCNN_CACHE values that turn every cache off


def caching() -> bool:
    """False when GLCNN_CACHE is 0, off, no or false (any case): glcnn reads and writes no
    cache, and `download_dir` hands out a temporary folder."""
    return os.environ.get("GLCNN_CACHE", "1").strip().lower() not in CACHE_OFF


def download_dir(name: str = "") -> Path:
    """The folder (not created here) where glcnn's demos, benchmarks and tests keep what they
    fetch from a registry (npm packages), `name` a sub-folder: `$XDG_CACHE_HOME/glcnn/<name>`
    (~/.cache/glcnn/...); with caching off (`caching()`), one temporary folder per process,
    removed at exit, so every start downloads again. GLCNN_CACHE only ever switches caching:
    it is never a folder name."""
    if caching():
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "glcnn"
    else:
        base = _temporary_downloads()
    return base / name if name else base


@functools.cache
def _temporary_downloads() -> Path:
    folder = tempfile.TemporaryDirectory(prefix="glcnn-downloads-")
    atexit.register(folder.cleanup)
    return Path(folder.name)


@functools.cache
def shader_text(name: str) -> str:
    """The text of shipped shader `name`, read once per process: a pipeline builds one
    program source per pass, each from common.glsl and its op's shader (MobileNetV2 read
    180 files at every load).

    Raises:
        GlcnnError: if the file does not exist.
    """
    return resource_path("shaders", name).read_text()
