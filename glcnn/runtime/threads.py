"""How many threads llvmpipe rasterises with: chosen for the first model a process loads.

llvmpipe, Mesa's CPU rasteriser, hands every draw to its rasteriser threads (LP_NUM_THREADS,
by default one per core) and waits for them when a later draw reads the result. That round
trip costs about 70 µs a pass on a 2-core VM whatever the pass's size, against 9 µs with
LP_NUM_THREADS=0 (rasterising on the calling thread; 59 dependent 32×32 passes, medians). A
net of small layers spends most of its time in round trips and runs 1.3-2.5× faster on one
thread (MTCNN R-Net 1.49 → 0.59 ms, PP-OCR cls 12.9 → 7.7, O-Net 2.74 → 2.19); a net of
large layers runs 1.1-1.9× faster on threads (P-Net 5.6 → 5.0 ms, PP-LCNet 27.4 → 19.7,
MobileNetV2 101 → 64, the 32² autoencoder 3.5 → 2.3).

Mesa reads LP_NUM_THREADS once per process, when the first context is made; every later
context shares those threads. So glcnn chooses when it makes its default context for a
model (`Context.default(ops)`, which `Pipeline` and `glcnn.load` call) and only if the
environment does not set LP_NUM_THREADS: one thread for a model whose layers average fewer
than SMALL_LAYER_MFLOP, the driver's default otherwise. A later model of large layers in a
process that chose one thread gets a RuntimeWarning once (`check`). A context made after
another learns what Mesa really runs from /proc (`running`; Context.rasterizer_threads). GPU
drivers ignore it all.
"""

import contextlib
import os
import threading
import warnings

VARIABLE = "LP_NUM_THREADS"
# Mean MFLOP per layer below which a model runs faster on one rasteriser thread: between
# MTCNN O-Net (2.0, 1.25× faster on one thread) and P-Net (6.3, 1.12× faster on two),
# measured on a 2-core AMD EPYC VM, Mesa 22.3 and 25.0 llvmpipe alike.
SMALL_LAYER_MFLOP = 4.0

_LOCK = threading.Lock()  # os.environ is the process's: one context creation at a time
_WARNED = False


def preferred(ops) -> int | None:
    """Rasteriser threads for a model of layers `ops` (glcnn.ops.build_ops): 0 (the
    calling thread) when they average fewer than SMALL_LAYER_MFLOP, else None (the driver's
    default, one per core). None for no layers."""
    ops = list(ops)
    if not ops:
        return None
    mean_mflop = sum(op.flops() for op in ops) / len(ops) / 1e6
    return 0 if mean_mflop < SMALL_LAYER_MFLOP else None


def from_environment() -> int | None:
    """LP_NUM_THREADS as the environment sets it: an integer, or None (unset or not one)."""
    value = os.environ.get(VARIABLE, "").strip()
    return int(value) if value.isdigit() else None


def running() -> int | None:
    """llvmpipe's rasteriser threads alive in this process (named llvmpipe-N), or None where
    /proc cannot say (not Linux)."""
    try:
        tasks = os.listdir("/proc/self/task")
        names = [_read(f"/proc/self/task/{task}/comm") for task in tasks]
    except OSError:
        return None
    return sum(name.startswith("llvmpipe") for name in names)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read()
    except OSError:  # a thread that ended meanwhile
        return ""


@contextlib.contextmanager
def asking(threads: int | None):
    """Around the creation of a context: set LP_NUM_THREADS to `threads` unless the
    environment sets it or `threads` is None, and restore the environment after.

    Yields:
        the threads asked for: the environment's, `threads`, or None (the driver's default).
    """
    with _LOCK:
        user = from_environment()
        if user is not None or threads is None:
            yield user
            return
        os.environ[VARIABLE] = str(threads)
        try:
            yield threads
        finally:
            del os.environ[VARIABLE]


def check(ctx, ops) -> None:
    """Warn once per process when a model of large layers (`ops`) runs on a software
    rasteriser that glcnn, not the user, put on one thread (`ctx.threads_chosen`:
    Context.default chose it for an earlier, smaller model)."""
    global _WARNED
    if _WARNED or not ctx.threads_chosen or not ctx.software or ctx.rasterizer_threads != 0:
        return
    if ops and preferred(ops) is None:
        _WARNED = True
        warnings.warn(
            f"glcnn: llvmpipe rasterises on one thread in this process ({VARIABLE}=0, chosen "
            f"for the first model's small layers); this model's larger layers would run up "
            f"to 1.6x faster with a rasteriser thread per core: set "
            f"{VARIABLE}={os.cpu_count() or 1} before the first glcnn call", RuntimeWarning,
            stacklevel=3)
