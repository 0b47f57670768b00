"""Generate the README's supported-ops table from the registry.

    python -m glcnn.commands.docs               # print the table
    python -m glcnn.commands.docs README.md     # rewrite the table between the ops-table markers
"""

import sys
from pathlib import Path

from ..ops import REGISTRY
from ..ops.base import ACTIVATION_DEFAULTS
from ..ops.conv import INPUT_ACTIVATIONS

NOTES = {
    "Conv": "any kernel, stride, dilation, asymmetric pads, groups (dense / depthwise / generic)",
    "ConvTranspose": "PyTorch/ONNX output size, output_padding, dilation, groups",
    "BatchNormalization": "inference form; folded into a preceding Conv/ConvTranspose",
    "Add": "same shape, (C,1,1) tensor, or per-channel constant; fused into a conv as residual",
    "Sub": "as Add (ONNX x − c becomes an Add, so it fuses into a conv)",
    "Mul": "same shape, (C,1,1) tensor, or per-channel constant",
    "Div": "as Mul; x / 0 = ±Inf by the sign of x, 0 / 0 = 0 (no NaN: GLSL 3.30 has none); "
           "ONNX division by a constant becomes a Mul",
    "Sqrt": "own pass; sqrt(max(x, 0)): 0 where ONNX gives NaN",
    "Erf": "own pass; polynomial, ≤ 2e-7 relative (PyTorch's GELU export runs)",
    "Pow": "own pass; constant scalar exponent; x² exact, integers ≤ 16 as products; a non-integer "
           "exponent reads x < 0 as 0 (ONNX: NaN); 0^−p = +Inf",
    "Slice": "H/W with positive steps (YOLOv5 Focus), C range with step 1; ONNX clamping",
    "Transpose": "(1,C,H,W), any perm [0, …] of C, H, W; gathers from the input atlas",
    "GlobalAveragePool": "→ (C,1,1); large planes split into a W pass and an H pass",
    "GlobalMaxPool": "→ (C,1,1); large planes split into a W pass and an H pass",
    "ReduceMean": "axes [2,3], [2] or [3]; keepdims=0 only over both (→ vector (C,1,1))",
    "ReduceMax": "axes [2,3], [2] or [3]; keepdims=0 only over both (→ vector (C,1,1))",
    "InstanceNormalization": "shifted two-pass statistics; optimize expands it into "
                             "mean / variance / normalise passes (≤ 64×64 runs unexpanded too)",
    "InstanceNormMean": "internal: made by glcnn.graph.passes.expand_reductions",
    "InstanceNormVariance": "internal: made by glcnn.graph.passes.expand_reductions",
    "InstanceNormApply": "internal: InstanceNormalization's last pass, takes fused activations",
    "Softmax": "over channels: axis 1 / -3, or -1 on a (C,1,1) vector; max-subtracted; "
               "many channels: optimize makes it a stats pass and a normalise pass",
    "SoftmaxStats": "internal: made by glcnn.graph.passes.expand_reductions",
    "SoftmaxApply": "internal: made by glcnn.graph.passes.expand_reductions",
    "Flatten": "axis 0 or 1 → vector (C·H·W,1,1) in C order; dropped when already a vector",
    "Reshape": "to a vector (1,F), (F,), (1,F,1,1) or to the input's own shape",
    "Gemm": "vector input (K,1,1), constant B and C, transB, alpha, beta; K wraps (50k fine)",
    "MatMul": "vector input (K,1,1) times a constant (K, N) matrix",
    "MaxPool": "kernel, stride, dilation, asymmetric pads, ceil_mode, auto_pad",
    "AveragePool": "as MaxPool, plus count_include_pad (ONNX/PyTorch divisor rule)",
    "Resize": "H/W by scales or sizes; nearest (4 rounding modes) or bilinear; 6 coordinate modes",
    "Upsample": "pre-opset-10 Resize: asymmetric coordinates, floor; scales ≥ 1",
    "Pad": "H/W only; constant, reflect, edge, wrap; negative pads crop",
    "Concat": "channel axis, 1–8 inputs of any channel counts",
    "DepthToSpace": "pixel shuffle, DCR (ONNX) and CRD (PyTorch PixelShuffle)",
}


def ops_table() -> str:
    """Markdown table: ONNX op type, shader file, Python module, notes."""
    rows = ["| op | shader | module | notes |", "|---|---|---|---|"]
    for name in sorted(REGISTRY):
        cls = REGISTRY[name]
        note = NOTES.get(name, "own pass, or fused into the op before it (conv, BN, Add, Mul, "
                         "InstanceNorm, Gemm, Concat, Pad, Resize, pool, DepthToSpace)"
                         if name in ACTIVATION_DEFAULTS else "")
        if name in INPUT_ACTIVATIONS:
            note += "; or into the convs after it when only convs read it"
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
