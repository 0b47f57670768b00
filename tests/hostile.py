"""Run one hostile case in a fresh process and measure what it cost (issue 18's "must show").

A case is a folder of generated files (the model folder) and either Python code calling the
API or a `glcnn` command line. `run_case` runs it in a subprocess (tests/hostile_runner.py)
that imports glcnn, resets its peak RSS to the current one (the baseline), installs an audit
hook on `open`, runs the
case, and reports:

- the outcome: "ok", the exception's class (from the API) or "exit N" (from the CLI), with
  the message or stderr;
- `rss_mib`: how far the peak RSS rose above the baseline;
- `seconds`: wall time of the case;
- `opened_outside`: files opened (Python-level `open`, `os.open`, `io.open`, numpy/PIL/onnx
  reads through Python) outside the model folder and the allowed roots (the Python install,
  the repository, the prepared-model cache, /dev/null, /proc, /sys).

`check_refused` asserts the contract of every hostile case: refused with one clear line
(a GlcnnError from the API; exit 2 and one stderr line from the CLI), at most MAX_RSS_MIB
above the baseline, at most MAX_SECONDS, nothing opened outside. A canary file beside the
model folder (`CANARY`) must never be opened.
"""

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNNER = Path(__file__).with_name("hostile_runner.py")
MAX_RSS_MIB = 1024
MAX_SECONDS = 60
CANARY = "canary-outside-the-model-folder.bin"


@dataclass
class Outcome:
    outcome: str  # "ok", an exception class name, or "exit N"
    message: str  # the exception's message, or the CLI's stderr
    rss_mib: float
    seconds: float
    opened_outside: list[str]
    stdout: str = ""

    def __str__(self):
        return (f"{self.outcome}: {self.message[:500]!r} (+{self.rss_mib:.0f} MiB, "
                f"{self.seconds:.1f} s, opened outside: {self.opened_outside[:5]})")


def case_folder(tmp_path: Path) -> Path:
    """A model folder inside `tmp_path`, with the canary file beside it (outside)."""
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (tmp_path / CANARY).write_bytes(b"secret " * 16)
    return folder


def run_case(folder: Path, api: str | None = None, cli: list[str] | None = None,
             env: dict | None = None, timeout: float = MAX_SECONDS * 2) -> Outcome:
    """Run `api` (Python code; `folder` is a pathlib.Path of the model folder, `glcnn` and
    `np` are imported) or `cli` (argv after `glcnn`) in a fresh process; see the module doc."""
    assert (api is None) != (cli is None), "give api or cli"
    job = {"folder": str(folder), "api": api, "cli": cli,
           "allowed": [str(folder), sys.prefix, sys.base_prefix, str(REPO),
                       os.environ.get("GLCNN_CACHE_DIR", str(folder))]}
    environment = {**os.environ, "PYTHONPATH": str(REPO / "tests"), **(env or {})}
    done = subprocess.run([sys.executable, str(RUNNER)], input=json.dumps(job),
                          capture_output=True, text=True, timeout=timeout, cwd=folder.parent,
                          env=environment)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("{"):
        raise AssertionError(f"the case runner failed (exit {done.returncode}):\n"
                             f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    report = json.loads(lines[-1])
    return Outcome(**report, stdout="\n".join(lines[:-1]))


def check_refused(outcome: Outcome, contains: str = "", cli: bool = False) -> None:
    """The contract of a hostile case (module doc); `contains`: a piece of the message."""
    if cli:
        assert outcome.outcome == "exit 2", outcome
        lines = outcome.message.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("glcnn "), outcome
    else:
        assert outcome.outcome not in ("ok", "exit 0"), outcome
        assert outcome.message and "\n" not in outcome.message.strip(), outcome
        assert outcome.outcome in GLCNN_ERRORS, outcome
    assert contains.lower() in outcome.message.lower(), (contains, str(outcome))
    assert len(outcome.message) <= MAX_MESSAGE, f"message of {len(outcome.message)} chars"
    assert not any(ord(ch) < 32 and ch not in "\n\t" for ch in outcome.message), outcome
    check_bounded(outcome)


def check_bounded(outcome: Outcome) -> None:
    """Memory, time and files of any case, refused or not."""
    assert outcome.rss_mib <= MAX_RSS_MIB, outcome
    assert outcome.seconds <= MAX_SECONDS, outcome
    assert not outcome.opened_outside, outcome


MAX_MESSAGE = 2000  # characters of one error line
GLCNN_ERRORS = {"GlcnnError", "ContextError", "GraphError", "MismatchError", "ModelFileError",
                "NothingComparedError", "ShaderCompileError", "ShapeError", "TextureSizeError",
                "UnsupportedOpError", "WeightError"}
