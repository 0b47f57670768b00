"""Trained weights between their texture layouts and PyTorch's shapes, GL-free."""

import numpy as np

from ..ops import Op


def from_layout(op: Op, key: str, layout: np.ndarray) -> np.ndarray:
    """Weight `key` ("W" or "B") of conv `op` in its node's (PyTorch's) shape, from the
    (height, width, 4) layout of its texture (layout.pack_filters of the op's `conv_weights`
    view; layout.pack_channels for B)."""
    ci, co, cg, cog = op.channels()
    if key == "B":
        return np.array(layout[0].reshape(-1)[:co], np.float32)
    kh, kw = op.W.shape[2:]
    s, columns = (co + 3) // 4, layout.shape[1] // kw
    view = layout[:s * kh].reshape(s, kh, columns, kw, 4).transpose(0, 4, 2, 1, 3)
    view = view.reshape(s * 4, columns, kh, kw)[:co, :cg]  # (Co, Cg, kh, kw)
    if op.op_type == "ConvTranspose":  # inverse of ConvTranspose.conv_weights
        group = op.group
        view = view.reshape(group, cog, cg, kh, kw).transpose(0, 2, 1, 3, 4)
        view = view.reshape(ci, cog, kh, kw)
    return np.ascontiguousarray(view, np.float32)
