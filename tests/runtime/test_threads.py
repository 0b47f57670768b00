"""The rasteriser threads glcnn asks llvmpipe for (glcnn.runtime.threads): chosen from the
first model's layers when glcnn makes its default context, never over LP_NUM_THREADS.

Mesa reads LP_NUM_THREADS once per process, so the GL checks run in fresh processes; they
count llvmpipe's rasteriser threads (named llvmpipe-N) in /proc rather than time anything."""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from glcnn.runtime import threads

CHILD = Path(__file__).with_name("threads_child.py")


def layers(*mflops):
    return [SimpleNamespace(flops=lambda m=m: m * 1e6) for m in mflops]


@pytest.mark.parametrize("mflops, expected", [
    ((0.3, 0.3, 2.0), 0),  # MTCNN R-Net-like: 11 layers of 0.3 MFLOP
    ((1.0, 3.9), 0),
    ((1.0, 7.0), None),  # mean 4.0: large enough for threads
    ((70.0,), None),
    ((), None),  # no layers: the driver's default
])
def test_preferred_threads_follow_the_mean_layer_size(mflops, expected):
    assert threads.preferred(layers(*mflops)) == expected


def test_asking_sets_the_variable_only_while_unset_and_restores_it(monkeypatch):
    monkeypatch.delenv(threads.VARIABLE, raising=False)
    with threads.asking(0) as asked:
        assert asked == 0 and os.environ[threads.VARIABLE] == "0"
    assert threads.VARIABLE not in os.environ
    with threads.asking(None) as asked:
        assert asked is None and threads.VARIABLE not in os.environ
    monkeypatch.setenv(threads.VARIABLE, "3")
    with threads.asking(0) as asked:  # the user's setting wins
        assert asked == 3 and os.environ[threads.VARIABLE] == "3"
    assert os.environ[threads.VARIABLE] == "3"


def child(models: str, env_threads: str | None = None) -> dict:
    """Run threads_child.py on `models` in a fresh process; its JSON report."""
    env = {k: v for k, v in os.environ.items() if k != threads.VARIABLE}
    if env_threads is not None:
        env[threads.VARIABLE] = env_threads
    done = subprocess.run([sys.executable, str(CHILD), models], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def llvmpipe_only(report: dict) -> None:
    if "llvmpipe" not in report["renderer"]:
        pytest.fail(f"these checks count llvmpipe's threads; the renderer is "
                    f"{report['renderer']}")


@pytest.mark.gl
def test_a_small_first_model_rasterises_on_the_calling_thread_and_a_large_one_warns():
    report = child("small,large,large")
    llvmpipe_only(report)
    assert report["asked"] == [0, 0, 0] and report["chosen"]
    assert report["llvmpipe_threads"] == 0, "LP_NUM_THREADS=0 should start no thread"
    assert report["variable_after"] is None, "the environment is restored"
    assert report["warnings"] == 1, "one RuntimeWarning for the later large models"
    assert max(report["errors"]) < 1e-4  # both models still match the float64 reference


@pytest.mark.gl
def test_a_large_first_model_keeps_the_driver_threads():
    report = child("large,small")
    llvmpipe_only(report)
    assert report["asked"] == [None, None] and not report["chosen"]
    if (os.cpu_count() or 1) > 1:  # llvmpipe's default: one thread per core, none on one
        assert report["llvmpipe_threads"] >= 2
    assert report["warnings"] == 0 and max(report["errors"]) < 1e-4


@pytest.mark.gl
def test_the_environment_wins_over_the_choice():
    report = child("small,large", env_threads="2")
    llvmpipe_only(report)
    assert report["asked"] == [2, 2] and not report["chosen"]
    assert report["llvmpipe_threads"] == 2 and report["variable_after"] == "2"
    assert report["warnings"] == 0 and max(report["errors"]) < 1e-4


@pytest.mark.gl
def test_a_context_made_earlier_decides_and_is_reported():
    """Mesa starts the rasteriser threads with the process's first context: a default
    context made later for a small model asks for none in vain, and says how many run."""
    report = child("context,small")
    llvmpipe_only(report)
    if (os.cpu_count() or 1) > 1:
        assert report["asked"] == [report["llvmpipe_threads"]] and report["asked"][0] >= 2
    assert not report["chosen"] and report["warnings"] == 0 and max(report["errors"]) < 1e-4
