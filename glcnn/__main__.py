"""`python -m glcnn ...`: the `glcnn` command (glcnn/cli.py), for when the console script
is not on PATH.

The CLI module is run by name rather than imported: the package layout lets only the CLI
reach commands/ and viewer/ (tests/test_architecture.py), and this file is its other door.
"""

import runpy

if __name__ == "__main__":
    runpy.run_module("glcnn.cli", run_name="__main__", alter_sys=True)
