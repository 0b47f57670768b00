"""Generate the README's supported-ops table from the registry.

    python -m glcnn.docs               # print the table
    python -m glcnn.docs README.md     # rewrite the table between the ops-table markers
"""

import sys
from pathlib import Path

from .ops import REGISTRY
from .ops.base import ACTIVATION_DEFAULTS

NOTES = {
    "Conv": "any kernel, stride, dilation, asymmetric pads, groups (dense / depthwise / generic)",
    "ConvTranspose": "PyTorch/ONNX output size, output_padding, dilation, groups",
    "BatchNormalization": "inference form; folded into a preceding Conv/ConvTranspose",
    "Add": "same shape, (C,1,1) tensor, or per-channel constant; fused into a conv as residual",
    "Mul": "same shape, (C,1,1) tensor, or per-channel constant",
    "Slice": "crop on H/W (Cropping2D), step 1",
}


def ops_table() -> str:
    """Markdown table: ONNX op type, shader file, Python module, notes."""
    rows = ["| op | shader | module | notes |", "|---|---|---|---|"]
    for name in sorted(REGISTRY):
        cls = REGISTRY[name]
        note = NOTES.get(name, "own pass, or fused into a preceding Conv, BN, Add or Mul"
                         if name in ACTIVATION_DEFAULTS else "")
        module = cls.__module__.replace(".", "/") + ".py"
        rows.append(f"| `{name}` | `shaders/{cls.shader}` | `{module}` | {note} |")
    return "\n".join(rows)


def with_ops_table(readme: str) -> str:
    """`readme` with the text between <!-- ops-table --> markers replaced by `ops_table()`."""
    start, end = "<!-- ops-table -->\n", "<!-- /ops-table -->"
    head, rest = readme.split(start, 1)
    return head + start + ops_table() + "\n" + end + rest.split(end, 1)[1]


if __name__ == "__main__":
    if len(sys.argv) > 1:
        path = Path(sys.argv[1])
        path.write_text(with_ops_table(path.read_text()))
    else:
        print(ops_table())
