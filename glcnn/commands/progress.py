"""Progress bars of the `glcnn` command (tqdm, on stderr): shown only when stderr is a
terminal and `--quiet` is not given, so pipes, logs and CI output stay clean."""

import contextlib
import shutil
import sys
import threading

from tqdm import tqdm

from ..ops import build_ops
from ..runtime.context import Context


def bar(total: int | None, desc: str, quiet: bool = False, unit: str = "it",
        fmt: str | None = None) -> tqdm:
    """A tqdm bar on stderr counting to `total` (drawn as tqdm's `bar_format` `fmt` if
    given), disabled (drawing nothing) when `quiet` or when stderr is not a TTY. The bar is
    removed when closed."""
    # tqdm draws nothing on a terminal that reports no size (0×0, e.g. a bare pty); shutil
    # falls back to 80×24 there.
    size = shutil.get_terminal_size()
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False,
                disable=quiet or not _is_tty(sys.stderr), ncols=min(size.columns, 100),
                nrows=size.lines, bar_format=fmt)


def _is_tty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # replaced or closed streams
        return False


@contextlib.contextmanager
def compiling(graph, quiet: bool = False, ctx: Context | None = None):
    """Show a "compiling" bar while pipelines of `graph` are built on `ctx` (default: the
    thread's default context, made for `graph`'s layers if it is the first): one step per
    layer whose program is compiled or fetched, up to the graph's layer count (a blocked
    conv's extra unblocking pass does not count twice)."""
    layers = len(graph.nodes)
    ctx = ctx or Context.default(build_ops(graph)[0])
    seen: set[str] = set()
    with bar(layers, "compiling", quiet, unit="layer") as progress:
        def step(layer: str) -> None:
            if layer not in seen and len(seen) < layers:
                seen.add(layer)
                progress.update(1)
        previous, ctx.progress = ctx.progress, step
        try:
            yield progress
        finally:
            ctx.progress = previous


@contextlib.contextmanager
def steps(total: int, command: str, quiet: bool = False):
    """A reporter of named steps (`glcnn bench`'s report_progress): on a terminal, a bar of
    `total` steps showing the current one; elsewhere one line per step on stderr, as
    "glcnn COMMAND: step"; nothing with `quiet`."""
    started = []
    with bar(total, command, quiet, unit="step") as progress:
        def report(message: str) -> None:
            if quiet:
                return
            if progress.disable:
                print(f"glcnn {command}: {message}", file=sys.stderr, flush=True)
                return
            if started and progress.n < total:  # a new step: the one before is done
                progress.update(1)
            started.append(message)
            progress.set_postfix_str(message)
        yield report


@contextlib.contextmanager
def waiting(desc: str, quiet: bool = False, every: float = 0.5):
    """A line "desc  elapsed" redrawn every `every` seconds while the block runs (work that
    reports no steps, e.g. `glcnn diff`'s reference run and comparison); same rules as `bar`."""
    stop = threading.Event()
    with bar(None, desc, quiet, fmt="{desc}  {elapsed}") as line:

        def tick():
            while not stop.wait(every):
                line.refresh()
        ticker = threading.Thread(target=tick, daemon=True)
        if not line.disable:
            ticker.start()
        try:
            yield line
        finally:
            stop.set()
            if ticker.is_alive():
                ticker.join()
