"""What the TF.js importer and its layer converters pass between them: `Tensor`, a TF tensor
as glcnn holds it. Its own module so that tfjs.py, which calls the converters, and
tfjs_layers.py / tfjs_shapes.py, which are the converters, need not import each other."""

from dataclasses import dataclass

import numpy as np

# The largest vector a permutation Gemm reorders (an F×F weight matrix).
PERMUTATION_GEMM_MAX = 4096


@dataclass
class Tensor:
    """A TF tensor: the glcnn tensor holding it and its TF rank (2 or 4, batch included).

    `order`: for a vector in TF's flattening order, tf[i] = glcnn[order[i]]; None when the
    two orders agree.
    """

    name: str
    rank: int
    order: np.ndarray | None = None
