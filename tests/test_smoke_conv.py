import numpy as np
import pytest

from helpers import check_op


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_conv_basic(ctx, precision):
    rng = np.random.default_rng(1)
    w = {"W": rng.standard_normal((6, 5, 3, 3)).astype(np.float32),
         "B": rng.standard_normal(6).astype(np.float32)}
    check_op(ctx, "Conv", {"pads": [1, 1, 1, 1]}, [(5, 7, 9)], w, precision)
