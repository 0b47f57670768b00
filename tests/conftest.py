"""Shared fixtures: one headless GL context for the whole run, with GL error checks.

With GLCNN_REQUIRE_GL=1 (set by .ci/run) or CI set, a missing GL context fails every GL test
instead of skipping it. The prepared-model cache (glcnn.importers.prepared) lives in a temporary
folder
for the run, never in the user's.
"""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# The PyTorch twins of glcnn.graph.models (train/torch_models.py) for parity tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))

import glcnn

os.environ["GLCNN_CACHE_DIR"] = tempfile.mkdtemp(prefix="glcnn-test-cache-")
atexit.register(shutil.rmtree, os.environ["GLCNN_CACHE_DIR"], ignore_errors=True)


GL_FIXTURES = {"ctx", "_session_ctx", "display"}


def pytest_collection_modifyitems(items):
    """Mark `gl` every test that takes a GL fixture (`pytest -m "not gl"` runs the GL-free
    ones); modules that make contexts themselves carry `pytestmark = pytest.mark.gl`."""
    for item in items:
        if GL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.gl)


@pytest.fixture(autouse=True)
def _gl_only_when_marked(request, monkeypatch):
    """A test not marked `gl` that makes a GL context fails, so the marker stays true."""
    if request.node.get_closest_marker("gl") is None:
        def refuse(*args, **kwargs):
            raise AssertionError(f"{request.node.nodeid} uses a GL context but is not marked "
                                 "gl (take the ctx fixture or set pytestmark)")
        monkeypatch.setattr("glcnn.runtime.context._create", refuse)
        monkeypatch.setattr("glcnn.runtime.context.Context.default", refuse)
        monkeypatch.setattr("moderngl.create_context", refuse)
    yield


@pytest.fixture(scope="session")
def _session_ctx():
    try:
        return glcnn.Context()
    except glcnn.ContextError as exc:
        if os.environ.get("GLCNN_REQUIRE_GL") == "1" or os.environ.get("CI"):
            pytest.fail(f"GLCNN_REQUIRE_GL=1 but no GL context: {exc}")
        pytest.skip(f"no GL context: {exc}")


@pytest.fixture
def ctx(_session_ctx):
    """The shared glcnn.Context; fails the test if it leaves a GL error behind."""
    _session_ctx.activate()  # an earlier test may have left another context current
    gl = _session_ctx.gl
    assert gl.error == "GL_NO_ERROR", "GL error pending before the test"
    yield _session_ctx
    _session_ctx.activate()
    assert gl.error == "GL_NO_ERROR", "test left a GL error"


@pytest.fixture(scope="module")
def display():
    """An Xvfb display (":N") for tests that open windows; under CI (GLCNN_REQUIRE_GL=1 or CI
    set, where .ci/run installs xvfb) a missing Xvfb fails instead of skipping."""
    if shutil.which("Xvfb") is None:
        if os.environ.get("GLCNN_REQUIRE_GL") == "1" or os.environ.get("CI"):
            pytest.fail("Xvfb is not installed (apt-get install xvfb)")
        pytest.skip("Xvfb is not installed: window tests need a virtual display "
                    "(apt-get install xvfb); under CI this is a failure, not a skip")
    read, write = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x720x24",
                             "-nolisten", "tcp"], pass_fds=[write], stderr=subprocess.DEVNULL)
    os.close(write)
    number = os.read(read, 16).decode().strip()
    yield f":{number}"
    proc.terminate()
    proc.wait(10)
    os.close(read)  # only now: Xvfb fails if the pipe closes while it is still writing
