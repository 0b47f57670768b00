"""GLCNN_DEBUG, glcnn's one debug variable (README "Debugging"); levels add up:

1. each pass's wall time on every run (Pipeline.timings); `glcnn` commands show tracebacks
2. every program compile and cache hit
3. the final GLSL source of every program compiled
4. per-layer min / max / mean and NaN / Inf counts (reads every layer back)
"""

import os


def level() -> int:
    """GLCNN_DEBUG as a level: unset, empty, "0" or not a number all mean 0."""
    try:
        return int(os.environ.get("GLCNN_DEBUG", "0") or 0)
    except ValueError:
        return 0
