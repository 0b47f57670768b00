"""Progress bars of the glcnn command (glcnn.commands.progress, GL-free): drawn on a terminal,
silent elsewhere and with quiet; the compile hook counts each layer once."""

import io
import sys
from types import SimpleNamespace

import pytest

from glcnn.commands.progress import bar, compiling, steps, waiting


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self):
        return True


def stderr(monkeypatch, stream):
    """Make `stream` sys.stderr (inside the test: pytest sets its own between phases)."""
    monkeypatch.setattr(sys, "stderr", stream)
    return stream


def test_bar_draws_on_a_terminal_only(monkeypatch):
    terminal = stderr(monkeypatch, Terminal())
    with bar(3, "images", unit="image") as progress:
        progress.update(3)
    assert "images:   0%" in terminal.getvalue() and "0/3" in terminal.getvalue()


@pytest.mark.parametrize("quiet", [False, True])
def test_bar_is_silent_off_a_terminal_or_quiet(quiet, monkeypatch):
    stream = stderr(monkeypatch, Terminal() if quiet else io.StringIO())
    with bar(3, "images", quiet) as progress:
        progress.update(3)
    assert stream.getvalue() == ""


def test_compiling_counts_each_layer_once_and_restores_the_hook(monkeypatch):
    terminal = stderr(monkeypatch, Terminal())
    ctx = SimpleNamespace(progress=None)
    graph = SimpleNamespace(nodes=["enc1", "enc2", "dec1"])  # only its layer count is read
    with compiling(graph, ctx=ctx) as progress:
        for layer in ("enc1", "enc1", "enc2", "dec1", "dec1", "extra"):  # a blocked conv's
            ctx.progress(layer)                                          # unblock pass: twice
        assert progress.n == 3
    assert ctx.progress is None and "compiling" in terminal.getvalue()


def test_steps_bar_on_a_terminal_lines_elsewhere_nothing_quiet(monkeypatch):
    terminal = stderr(monkeypatch, Terminal())
    with steps(2, "bench") as report:
        report("timing glcnn fp32")
        report("timing glcnn fp32 per layer")
    assert "timing glcnn fp32 per layer" in terminal.getvalue()
    lines = stderr(monkeypatch, io.StringIO())
    with steps(2, "bench") as report:
        report("timing glcnn fp32")
    assert lines.getvalue() == "glcnn bench: timing glcnn fp32\n"
    silent = stderr(monkeypatch, Terminal())
    with steps(2, "bench", quiet=True) as report:
        report("timing glcnn fp32")
    assert silent.getvalue() == ""


def test_waiting_redraws_the_elapsed_time_until_the_block_ends(monkeypatch):
    import time
    terminal = stderr(monkeypatch, Terminal())
    with waiting("comparing 4 layers with numpy", every=0.05):
        time.sleep(0.3)
    drawn = terminal.getvalue()
    assert drawn.count("comparing 4 layers with numpy  00:0") >= 3, drawn
    settled = terminal.getvalue()
    time.sleep(0.15)
    assert terminal.getvalue() == settled  # the redrawing thread has stopped
    silent = stderr(monkeypatch, io.StringIO())
    with waiting("comparing", every=0.05):
        time.sleep(0.1)
    assert silent.getvalue() == ""
