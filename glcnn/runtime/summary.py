"""Per-layer tables for `glcnn info` and `Pipeline.summary()` (GL-free)."""

import numpy as np

from ..layout import Atlas

BYTES = {"fp32": 4, "fp16": 2, "u8": 1}  # per channel of an activation texel (u8: RGBA8)


def layer_bytes(op, shape, precision: str) -> int:
    """Texture bytes a layer owns: its output atlas plus its fp32 weight textures."""
    w, h = Atlas.of(shape).size
    weights = sum(int(np.prod(shape)) * 4 for shape in op.all_texture_shapes().values())
    return w * h * 4 * BYTES[precision] + weights


def table(ops, shapes, precision: str = "fp32", footer: str = "") -> str:
    """A table of layer, op (with fused parts), output shape, params, MFLOPs, texture KiB."""
    head = (f"{'layer':<24} {'op':<24} {'output':<18} {'params':>10} {'MFLOPs':>10}"
            f" {'tex KiB':>9}")
    rows, total_bytes = [], 0
    for op in ops:
        size = layer_bytes(op, shapes[op.node.name], precision)
        total_bytes += size
        rows.append(f"{op.summary()} {size / 1024:>9.1f}")
    params = sum(int(np.asarray(w).size) for op in ops for w in op.node.weights.values())
    flops = sum(op.flops() for op in ops) / 1e6
    total = (f"{len(ops)} passes, {params:,} params, {flops:.2f} MFLOPs, "
             f"{total_bytes / 2**20:.2f} MiB textures without reuse ({precision})")
    return "\n".join([head, *rows, total] + ([footer] if footer else []))
