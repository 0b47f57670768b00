"""The prepared-model cache: a model file imported and optimised once, read back fast.

Importing a large ONNX model costs more than compiling it on a warm GL: the onnx package
(for shape inference), protobuf parsing, weight checks and BatchNorm folding (a pix2pix
U-Net: ~0.2 s of a ~0.6 s warm load). `load_optimized` keeps the optimised Graph of each
model file in one flat file per model under the cache folder and maps its weights straight
from disk (read-only, never scanned again for NaN/Inf) the next time.

- Folder: ``$GLCNN_CACHE_DIR``, else ``$XDG_CACHE_HOME/glcnn/prepared``, else
  ``~/.cache/glcnn/prepared``. Deleting it is always safe. ``GLCNN_CACHE=0`` turns the
  cache off (nothing is read or written).
- An entry is found by the model file's resolved path, inode, size, modification time and
  a hash of 16 spread 64 KiB samples of its bytes, and by glcnn's own code (the size and time
  of its modules), and by the input size a model with open sizes was specialised for
  (`load_optimized(path, input_size=(H, W))`: one entry per size): editing the model or
  upgrading glcnn makes a new entry. The other files an import reads, an ONNX model's
  external-data files (`Graph.meta["external_data"]`) and a TF.js model's weight shards (the
  `paths` of model.json's `weightsManifest`), are stamped the same way in its entry, which
  serves only while every one of them is unchanged (else the model is imported again and the
  entry rewritten). A file modified less than `RACY_SECONDS` ago, model or external
  data, is not cached (as git does for "racily clean" files): a rewrite within the file
  system's timestamp granularity could otherwise keep its key.
- Entries unused for longest are removed once the folder holds more than
  ``GLCNN_CACHE_MAX_MB`` (default 2048).
- ``.onnx``, ``.npz`` and TF.js ``model.json`` files are cached; a TF.js model is not while
  custom layer builders are registered (`tfjs.register_layer`: code the key does not see).
- A cache that cannot be written (read-only home, full disk) or an entry that does not read
  back (truncated, from another glcnn) is skipped with a warning: the model is imported from
  its file as if there were no cache. Errors in the model file itself are raised as always.

Entry layout: the 8-byte magic ``GLCNNPR1``, the JSON length (8 bytes, little-endian), the
JSON (glcnn's native graph description, `importers.npz`, plus where each weight sits and the
stamps of the external-data files, "sources": {resolved path: stamp}), zero
padding to a multiple of 64 bytes, then every weight as float32, each starting on a multiple
of 64 bytes.
"""

import contextlib
import functools
import hashlib
import json
import os
import stat
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from ..errors import GlcnnError, quote
from ..graph.graph import Graph
from ..limits import memory_budget, mib
from ..ops.base import all_finite, remember_finite
from ..resources import caching
from . import load_graph, model_path
from . import npz as native
from .onnx_inputs import check_input_size
from .tfjs_custom import CUSTOM

MAGIC = b"GLCNNPR1"
ALIGN = 64
CACHED_SUFFIXES = (".onnx", ".npz", ".json")
DEFAULT_MAX_MB = 2048
RACY_SECONDS = 2.0
SAMPLES, SAMPLE_BYTES = 16, 64 << 10
_PACKAGE = Path(__file__).resolve().parents[1]  # glcnn/: importers, passes and ops alike


class StaleEntry(ValueError):
    """An external-data file of the model changed since its entry was written."""


def load_optimized(path, cache: bool | None = None, input_size=None) -> Graph:
    """`load_graph(path, input_size)` then `passes.optimize`, through the prepared-model cache.

    Args:
        path: the model file.
        cache: use the cache (default: unless ``GLCNN_CACHE=0``).
        input_size: (H, W) for a model whose image inputs leave them open (see
            `importers.open_inputs`); each size has its own entry.
    Returns:
        The optimised Graph. Weights read from the cache are read-only maps of the entry
        (replace a node's array to change it).
    Raises:
        As `load_graph` and `Graph.validate`, for the model file; GlcnnError for an
        `input_size` that is not two positive integers.
    """
    from ..graph.passes import optimize
    path = model_path(path)  # a TF.js folder or a shipped model's short name: its file
    input_size = None if input_size is None else check_input_size(input_size)
    entry = _entry_for(path, cache, input_size)
    if entry is not None and entry.is_file():
        try:
            graph = read_entry(entry)
        except StaleEntry:
            pass  # imported again below; the entry is rewritten
        except (OSError, ValueError, GlcnnError) as exc:
            warnings.warn(f"glcnn: prepared-model cache entry {entry} is unreadable "
                          f"({exc}); importing {path} again", stacklevel=2)
        else:
            with contextlib.suppress(OSError):  # a read-only cache is still a cache
                os.utime(entry)  # most recently used
            return graph
    graph = optimize(load_graph(path) if input_size is None else load_graph(path, input_size))
    sources = _sources(path, graph)
    if entry is None or sources is None:
        return graph
    try:
        write_entry(graph, entry, sources)
        _evict(entry.parent, keep=entry)
    except (OSError, TypeError, ValueError) as exc:  # unwritable folder; attrs JSON can't hold
        warnings.warn(f"glcnn: cannot write the prepared-model cache {entry.parent} ({exc}); "
                      "set GLCNN_CACHE_DIR to a writable folder, or GLCNN_CACHE=0",
                      stacklevel=2)
    return graph


def _entry_for(path: Path, cache: bool | None, input_size=None) -> Path | None:
    """Where `path`'s entry is or goes; None when the file is not cached: the cache is off,
    another format, a file modified within RACY_SECONDS, or one that cannot be read (its
    importer then says so properly)."""
    if cache is None:
        cache = caching()
    suffix = path.suffix.lower()
    if not cache or suffix not in CACHED_SUFFIXES or suffix == ".json" and CUSTOM:
        return None
    try:
        if not path.is_file() or time.time() - path.stat().st_mtime < RACY_SECONDS:
            return None
        return cache_dir() / f"{entry_key(path, input_size)}.glcnn"
    except OSError:
        return None

def cache_dir() -> Path:
    """The cache folder (see the module docstring); not created here."""
    if os.environ.get("GLCNN_CACHE_DIR"):
        return Path(os.environ["GLCNN_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "glcnn" / "prepared"


def entry_key(path: Path, input_size=None) -> str:
    """Hex digest naming the entry of model file `path`, specialised for `input_size` (H, W)
    if given (see the module docstring)."""
    ident = [MAGIC.decode(), _code_stamp(), _file_stamp(path)]
    if input_size is not None:
        ident.append([int(v) for v in input_size])
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:32]


def _file_stamp(path) -> str:
    """Hex digest of a regular file's resolved path, inode, size, modification time and 16
    spread samples of its bytes.

    Raises:
        OSError: unreadable, or not a regular file.
    """
    with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        ident = [os.path.realpath(path), info.st_ino, info.st_size, info.st_mtime_ns]
        digest = hashlib.sha256(json.dumps(ident).encode())
        for at in np.linspace(0, max(info.st_size - SAMPLE_BYTES, 0), SAMPLES, dtype=np.int64):
            f.seek(int(at))
            digest.update(f.read(SAMPLE_BYTES))
    return digest.hexdigest()


def _sources(path: Path, graph: Graph) -> dict[str, str] | None:
    """{resolved path: stamp} of the files besides `path` that its import read (`_read_also`);
    None (not cached) if one was modified within RACY_SECONDS, is unreadable, or is not in
    the model's folder."""
    files = _read_also(path, graph)
    root = os.path.realpath(path.parent)
    sources = {}
    try:
        for name in files if isinstance(files, list) else [None]:
            file = os.path.realpath(os.path.join(root, str(name)))
            if os.path.commonpath([root, file]) != root or \
                    time.time() - os.stat(file).st_mtime < RACY_SECONDS:
                return None
            sources[file] = _file_stamp(file)
    except (OSError, ValueError):
        return None
    return sources


def _read_also(path: Path, graph: Graph):
    """The files (relative to the model's folder) an import of `path` read besides it: an ONNX
    model's external data, a TF.js model's weight shards; a non-list where model.json does not
    list its shards as the importer reads them (then nothing is cached)."""
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        return graph.meta.get("external_data", [])
    if suffix != ".json":
        return []
    try:
        manifest = json.loads(path.read_bytes()).get("weightsManifest", [])
        return [shard for group in manifest for shard in group["paths"]]
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return None


def _unchanged(sources) -> bool:
    """Whether every file of `sources` ({resolved path: stamp}) still has its stamp."""
    try:
        return isinstance(sources, dict) and all(
            os.path.realpath(file) == file and _file_stamp(file) == stamp
            for file, stamp in sources.items())
    except (OSError, TypeError, ValueError):
        return False


@functools.cache
def _code_stamp() -> list:
    """Size and time of every glcnn module (the importers, the graph passes and the ops all
    shape an entry), read once per process."""
    return sorted((str(p.relative_to(_PACKAGE)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in _PACKAGE.rglob("*.py"))


def write_entry(graph: Graph, entry: Path, sources: dict | None = None) -> None:
    """Write `graph` as a cache entry at `entry` (atomically: a reader sees the whole entry
    or none); `sources`: {resolved path: stamp} of the external-data files it was read from."""
    arrays, table, offset = [], [], 0
    for node in graph.nodes:
        for name, value in node.weights.items():
            arrays.append(np.ascontiguousarray(value, np.float32))
            offset = _aligned(offset)
            table.append([node.name, name, list(arrays[-1].shape), offset])
            offset += arrays[-1].nbytes
    # Whether every weight is finite (the import's checks already scanned most of them, so
    # this is mostly remembered): a reader then need not scan 100s of MB again (0.16 s for the
    # pix2pix U-Net's 167 MB) to refuse NaN weights, as the ops do for any other file.
    finite = all(all_finite(a) for a in arrays)
    header = json.dumps(native.document(graph) | {"weights": table, "weights_finite": finite,
                                                  "sources": sources or {}}).encode()
    start = _aligned(len(MAGIC) + 8 + len(header))
    entry.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(".partial", entry.name, entry.parent)
    partial = Path(partial)
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(MAGIC + len(header).to_bytes(8, "little") + header)
            for value, (*_, at) in zip(arrays, table):
                f.seek(start + at)
                f.write(memoryview(value).cast("B"))
            f.truncate(start + offset)
        os.replace(partial, entry)
    finally:
        partial.unlink(missing_ok=True)


def read_entry(entry: Path) -> Graph:
    """The Graph of a cache entry, its weights mapped read-only from the file (and known
    finite, when the entry says its writer found them so).

    Raises:
        StaleEntry: an external-data file it was read from has changed.
        ValueError: not an entry of this format, or truncated.
        GlcnnError: a description that does not validate.
    """
    with open(entry, "rb") as f:
        head = f.read(len(MAGIC) + 8)
        if len(head) < len(MAGIC) + 8 or head[:len(MAGIC)] != MAGIC:
            raise ValueError("not a glcnn prepared-model entry")
        size = int.from_bytes(head[len(MAGIC):], "little")
        if size > native.MAX_GRAPH_JSON:
            raise ValueError(f"description of {size} bytes")
        doc = json.loads(f.read(size).decode())
    start = _aligned(len(MAGIC) + 8 + size)
    weights = doc.pop("weights", []) if isinstance(doc, dict) else []
    finite = doc.pop("weights_finite", False) is True if isinstance(doc, dict) else False
    if not _unchanged(doc.pop("sources", {}) if isinstance(doc, dict) else {}):
        raise StaleEntry("an external-data file changed")
    try:
        end = max((at + 4 * int(np.prod(shape)) for _, _, shape, at in weights), default=0)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"malformed weight table ({exc})") from None
    if (found := entry.stat().st_size) != start + end:
        raise ValueError(f"{found} bytes, expected {start + end}")
    if end > memory_budget():  # as the importers refuse such a file (GLCNN_MEMORY_BUDGET)
        raise ValueError(f"{mib(end)} of weights, over the memory budget of {mib(memory_budget())}")
    data = np.memmap(entry, np.uint8, "c", start, (end,)) if end else np.zeros(0, np.uint8)
    graph = native.graph_of(doc, entry)
    nodes = {n.name: n for n in graph.nodes}
    for layer, name, shape, at in weights:
        if layer not in nodes:
            raise ValueError(f"weight {quote(name)} of no layer {quote(layer)}")
        count = int(np.prod(shape))
        # A plain ndarray view (np.asarray of it is itself, so the ops' finite check
        # remembers it), read-only.
        value = np.asarray(data[at:at + 4 * count].view(np.float32).reshape(shape))
        value.flags.writeable = False
        if finite:
            remember_finite(value)
        nodes[layer].weights[name] = value
    graph.validate()
    return graph


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _evict(folder: Path, keep: Path) -> None:
    """Remove the least recently used entries (but `keep`) while the folder holds more than
    GLCNN_CACHE_MAX_MB."""
    limit = float(os.environ.get("GLCNN_CACHE_MAX_MB", DEFAULT_MAX_MB)) * (1 << 20)
    entries = []
    for p in folder.glob("*.glcnn"):
        with contextlib.suppress(FileNotFoundError):  # another process evicted it
            stat = p.stat()
            entries.append((stat.st_mtime, stat.st_size, p))
    total = sum(size for _, size, _ in entries)
    for _, size, old in sorted(entries):
        if total <= limit:
            break
        if old != keep:
            total -= size
            old.unlink(missing_ok=True)
