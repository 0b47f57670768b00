"""Generate the README's op tables: glcnn ops (the registry), and what each importer accepts
(ONNX op types, TF.js layer classes, TF.js graph ops), from the converter tables.

    python -m glcnn.commands.docs               # print the glcnn ops table
    python -m glcnn.commands.docs README.md     # rewrite every table between its markers
"""

import re
import sys
from pathlib import Path

from ..importers import onnx_ops, tfjs_graph, tfjs_graph_ops, tfjs_layers
from ..ops import REGISTRY
from ..ops.base import ACTIVATION_DEFAULTS
from ..ops.conv import INPUT_ACTIVATIONS

NOTES = {
    "Conv": "any kernel, stride, dilation, asymmetric pads, groups (dense / depthwise / "
            "generic); dense and depthwise ones read a nearest upscale by whole factors of their "
            "input in their pass (`glcnn/graph/fuse_resize.py`: Conv(Resize(u)))",
    "ConvTranspose": "PyTorch/ONNX output size, output_padding, dilation, groups",
    "BatchNormalization": "inference form; folded into a preceding Conv/ConvTranspose",
    "Add": "same shape, (C,1,1) tensor, per-channel constant (fast paths), or any per-axis "
           "broadcast of tensors / a glcnn-shaped constant; fused into a conv as residual; a "
           "nearest upscale by whole factors of its operand read in its pass "
           "(`glcnn/graph/fuse_resize.py`: a feature pyramid's Add(x, Resize(u))), and a "
           "squeeze-excitation gate's Mul(x, g) (`fuse_gate.fuse_gated_adds`)",
    "Sub": "as Add; swap=1 computes b − a (c − x); ONNX x − c becomes an Add (fuses into a conv)",
    "Mul": "as Add (same shape, (C,1,1), per channel, or any per-axis broadcast)",
    "Div": "as Mul; x / 0 = ±Inf by the sign of x, 0 / 0 = 0 (no NaN: GLSL 3.30 has none); "
           "ONNX division by a constant becomes a Mul",
    "Max": "as Add (two tensors or a tensor and a constant, any per-axis broadcast); own pass, "
           "never fused; ONNX Max of exactly 2 inputs",
    "Min": "as Max",
    "Sqrt": "own pass; sqrt(max(x, 0)): 0 where ONNX gives NaN",
    "Erf": "own pass; polynomial, ≤ 2e-7 relative (PyTorch's GELU export runs)",
    "Pow": "own pass; constant scalar exponent; x² exact, integers ≤ 16 as products; a non-integer "
           "exponent reads x < 0 as 0 (ONNX: NaN); 0^−p = +Inf",
    "Slice": "H/W with positive steps, C range with step 1; ONNX clamping; a Focus "
             "(Concat of x[:, a::k, b::k]) is one Rearrange pass",
    "Transpose": "(1,C,H,W), any perm [0, …] of C, H, W; gathers from the input atlas; "
                 "before a Flatten into a dense layer, folded into its weights",
    "GlobalAveragePool": "→ (C,1,1); large planes split into a W pass and an H pass",
    "GlobalMaxPool": "→ (C,1,1); large planes split into a W pass and an H pass",
    "ReduceMean": "axes [1] (→ (1,H,W)), [2,3], [2] or [3]; keepdims=0 only over H and W",
    "ReduceMax": "axes [1] (→ (1,H,W)), [2,3], [2] or [3]; keepdims=0 only over H and W",
    "ReduceSum": "axes [1] (→ (1,H,W)), [2,3], [2] or [3]; keepdims=0 only over H and W",
    "InstanceNormalization": "shifted two-pass statistics; optimize expands it into "
                             "mean / variance / normalise passes (≤ 64×64 runs unexpanded too)",
    "InstanceNormMean": "internal: made by glcnn.graph.passes.expand_reductions",
    "InstanceNormVariance": "internal: made by glcnn.graph.passes.expand_reductions",
    "InstanceNormApply": "internal: InstanceNormalization's last pass, takes fused activations",
    "Softmax": "any one axis: 1 (C), 2 (H), 3 (W); -1 on a (C,1,1) vector is C; "
               "max-subtracted; long lines: optimize makes a stats and a normalise pass",
    "SoftmaxStats": "internal: made by glcnn.graph.passes.expand_reductions",
    "SoftmaxApply": "internal: made by glcnn.graph.passes.expand_reductions",
    "Flatten": "axis 0 or 1 → vector (C·H·W,1,1) in C order; dropped when already a vector",
    "Reshape": "to a vector (1,F), (F,), (1,F,1,1) or to the input's own shape",
    "Gemm": "vector input (K,1,1), constant B and C, transB, alpha, beta; K wraps (50k fine); "
            "a per-output Add/Mul after it folds into B and C",
    "MatMul": "vector (K,1,1) × constant (K,N); or batched tensor × tensor / constant with "
              "batch, row, column on any glcnn axes (a_axes, b_axes, out_axes)",
    "LayerNormalization": "one axis (C, H or W), scale and optional bias; optimize fuses the "
                          "decomposed ReduceMean/Sub/Pow/…/Div chain into it",
    "MaxPool": "kernel, stride, dilation, asymmetric pads, ceil_mode, auto_pad",
    "AveragePool": "as MaxPool, plus count_include_pad (ONNX/PyTorch divisor rule)",
    "Resize": "H/W by scales or sizes; nearest (4 rounding modes) or bilinear; 6 coordinate modes",
    "Upsample": "pre-opset-10 Resize: asymmetric coordinates, floor; scales ≥ 1",
    "ConvGradWeight": "training (glcnn.Trainer): dL/dW of a Conv / ConvTranspose in its filter "
                      "layout; sums of > 4096 terms drawn in chunks added by blending",
    "ConvGradBias": "training: dL/dB of a conv, in its bias layout",
    "ActivationGrad": "training: dY · f′ of Relu, LeakyRelu, Sigmoid, Tanh, Elu from their output",
    "LossGrad": "training: dL/dy of a mean MSE, L1 or BCE (PyTorch's)",
    "LossSum": "training: the loss of a sample as one texel (BCE logs clamped at −100)",
    "PoolGrad": "training: dL/dx of MaxPool (to the first maximum, as PyTorch) / AveragePool",
    "ResizeGrad": "training: dL/dx of a nearest / bilinear Resize (its adjoint)",
    "GemmGradWeight": "training: dL/dW of a Gemm in its weight layout (dY ⊗ x)",
    "GemmGradInput": "training: dL/dx = Wᵀ dY of a Gemm, reading its live weight layout",
    "Pad": "H/W only; constant, reflect, edge, wrap; negative pads crop",
    "Concat": "axis C (1–8 inputs of any channel counts), H or W (whole texels); copies of "
              "tiles instead of the shader where every output texel is one input texel (fp32, "
              "fp16)",
    "Rearrange": "internal: any element gather (reshape across layouts, rank-3/5/6 transpose, "
                 "strided slice, gather, expand); made by the ONNX importer",
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


def tfjs_graph_table() -> str:
    """Markdown table of the TF.js graph importer: TF op types (those sharing a converter in
    one row), the glcnn ops they become, notes; then the ops folded on constants only."""
    rows = ["| TF op | glcnn | notes |", "|---|---|---|"]
    groups: dict = {}
    for op, fn in tfjs_graph_ops.CONVERTERS.items():
        groups.setdefault(fn, []).append(op)
    for ops in sorted(groups.values()):
        emits = ", ".join(f"`{e}`" for e in tfjs_graph_ops.EMITS[ops[0]]) or "(none)"
        names = ", ".join(f"`{op}`" for op in ops)
        rows.append(f"| {names} | {emits} | {tfjs_graph_ops.NOTES[ops[0]]} |")
    folded = sorted(set(tfjs_graph_ops.FOLDS) - set(tfjs_graph_ops.CONVERTERS))
    rows.append(f"| {', '.join(f'`{op}`' for op in folded)} | (none) | folded in the importer "
                "when every input is a constant (shape arithmetic) |")
    rows.append(f"| {', '.join(f'`{op}`' for op in tfjs_graph.SOURCES)} | (none) | inputs, "
                "weights (from the manifest), nothing |")
    return "\n".join(rows)


def _first_sentence(fn) -> str:
    """The converter's docstring up to its first full stop, on one line ("" without one)."""
    text = " ".join((fn.__doc__ or "").split())
    return re.split(r"\.\s+(?=[A-Z])", text)[0].rstrip(".").replace("|", "\\|")


def _grouped(converters: dict) -> list[tuple[list[str], object]]:
    """[(names sharing a converter function, the function)], sorted by first name."""
    groups: dict = {}
    for name, fn in converters.items():
        groups.setdefault(fn, []).append(name)
    return sorted(((sorted(names), fn) for fn, names in groups.items()), key=lambda g: g[0])


def onnx_table() -> str:
    """Markdown table of the ONNX importer: ONNX op types (sharing a converter in one row),
    the glcnn op they need, the converter's own summary."""
    rows = ["| ONNX op | glcnn op | notes |", "|---|---|---|"]
    for names, fn in _grouped({op: entry[0] for op, entry in onnx_ops.CONVERTERS.items()}):
        needs = {onnx_ops.CONVERTERS[n][1] for n in names} - {None}
        moves = fn.__module__.endswith("onnx_moves")  # element moves: no op, or Rearrange
        glcnn = ", ".join(f"`{op}`" for op in sorted(needs)) or \
            ("(alias or `Rearrange`)" if moves else "(none: an alias)")
        rows.append(f"| {', '.join(f'`{n}`' for n in names)} | {glcnn} | "
                    f"{_first_sentence(fn)} |")
    return "\n".join(rows)


def tfjs_layers_table() -> str:
    """Markdown table of the TF.js layers importer: Keras classes, glcnn ops, summary."""
    rows = ["| Keras layer | glcnn ops | notes |", "|---|---|---|"]
    for names, fn in _grouped(tfjs_layers.CONVERTERS):
        emits = ", ".join(f"`{e}`" for e in tfjs_layers.EMITS[names[0]][:4]) or "(none)"
        more = "…" if len(tfjs_layers.EMITS[names[0]]) > 4 else ""
        rows.append(f"| {', '.join(f'`{n}`' for n in names)} | {emits}{more} | "
                    f"{_first_sentence(fn)} |")
    return "\n".join(rows)


def _between(readme: str, marker: str, table: str) -> str:
    start, end = f"<!-- {marker} -->\n", f"<!-- /{marker} -->"
    head, rest = readme.split(start, 1)
    return head + start + table + "\n" + end + rest.split(end, 1)[1]


def with_ops_table(readme: str) -> str:
    """`readme` with the text between <!-- ops-table --> markers replaced by `ops_table()`,
    and between the onnx-table, tfjs-layers-table and tfjs-graph-table markers (when
    present) by the importers' tables."""
    readme = _between(readme, "ops-table", ops_table())
    for marker, table in (("onnx-table", onnx_table), ("tfjs-layers-table", tfjs_layers_table),
                          ("tfjs-graph-table", tfjs_graph_table)):
        if f"<!-- {marker} -->\n" in readme:
            readme = _between(readme, marker, table())
    return readme


if __name__ == "__main__":
    if len(sys.argv) > 1:
        path = Path(sys.argv[1])
        path.write_text(with_ops_table(path.read_text()))
    else:
        print(ops_table())
