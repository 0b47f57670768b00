"""The subprocess side of tests/hostile.py: one hostile case, measured. Reads the job (JSON)
from stdin and prints one JSON line: outcome, message, rss_mib, seconds, opened_outside."""

import contextlib
import io
import json
import os
import sys
import time
import warnings

import numpy as np  # noqa: F401 - imported before the baseline, as the case may use it
import PIL.Image  # noqa: F401

import glcnn
import glcnn.cli

with contextlib.suppress(ImportError):
    import onnx  # noqa: F401 - the ONNX importer's dependency, imported before the baseline

ALWAYS_ALLOWED = ("/dev/null", "/proc/", "/sys/", "/dev/urandom", "/dev/dri/", "/etc/")


def _status_mib(field: str) -> float:
    """VmRSS (now) or VmHWM (peak) of this process, from /proc/self/status."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} missing from /proc/self/status")


def _start_peak() -> float:
    """Reset the peak RSS to the current RSS (Linux: "5" into clear_refs) and return it: the
    imports' own transient peak must not hide what the case allocates."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    return _status_mib("VmRSS")


def main() -> None:
    job = json.loads(sys.stdin.read())
    folder = job["folder"]
    roots = [os.path.realpath(p) for p in job["allowed"]]
    opened = []

    def audit(event, args):
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if not path.startswith(ALWAYS_ALLOWED) and not any(
                    path == root or path.startswith(root + os.sep) for root in roots):
                opened.append(path)

    namespace = {"glcnn": glcnn, "np": np, "folder": __import__("pathlib").Path(folder)}
    baseline, start = _start_peak(), time.perf_counter()
    sys.addaudithook(audit)
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), \
            warnings.catch_warnings():
        warnings.simplefilter("default")
        try:
            if job["api"] is not None:
                exec(compile(job["api"], "<hostile case>", "exec"), namespace)  # noqa: S102
                outcome, message = "ok", ""
            else:
                code = glcnn.cli.main(job["cli"])
                outcome, message = f"exit {code}", stderr.getvalue()
        except SystemExit as exc:  # argparse refusing the arguments
            outcome, message = f"exit {exc.code}", stderr.getvalue()
        except BaseException as exc:  # noqa: BLE001 - reported, the test judges it
            outcome, message = type(exc).__name__, str(exc)
    seconds, peak = time.perf_counter() - start, _status_mib("VmHWM")
    if job["api"] is not None and stderr.getvalue().strip():  # e.g. numpy RuntimeWarnings
        message = f"{message} [stderr: {stderr.getvalue().strip()}]"
    print(stdout.getvalue())
    print(json.dumps({"outcome": outcome, "message": message, "seconds": seconds,
                      "rss_mib": peak - baseline, "opened_outside": opened}))


if __name__ == "__main__":
    main()
