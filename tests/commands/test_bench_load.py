"""The load-time probes of `glcnn bench` (glcnn/commands/bench_load.py), GL-free here: the
processes they start import the glcnn they belong to (tests/commands/test_bench_open_size.py
runs them end to end)."""

import os
import subprocess
import sys

import glcnn
from glcnn.commands.bench_load import import_root


def test_the_probe_path_holds_this_glcnn_package():
    root = import_root()
    assert (root / "glcnn" / "__init__.py").samefile(glcnn.__file__)
    # On PYTHONPATH it imports this glcnn, not glcnn's own modules as top-level ones.
    code = "import glcnn, sys; print(glcnn.__file__, 'inputs' in sys.modules)"
    env = os.environ | {"PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    path, top_level = done.stdout.split()
    assert os.path.samefile(path, glcnn.__file__) and top_level == "False"
