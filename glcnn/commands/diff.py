"""`glcnn diff`: every layer of a model on the GPU against a reference, first divergence named.

    report = glcnn.commands.diff.diff("model.onnx", x, against="onnxruntime", precision="fp16")
    rows, first = report                  # LayerDiff rows in execution order, layer or None
    print(glcnn.commands.diff.format_table(report, "fp16"))

The model runs once with every intermediate kept (`Pipeline(keep="all")`). The reference
(see `glcnn.commands.diff_refs`: numpy float64, onnxruntime with intermediates exposed, or per-layer
`.npy` files) is fed the input *as the GPU stored it*, so each row measures the layers, not
the input's rounding; the input rows compare the stored input with the given one.

Error per layer: max |glcnn − ref| / max(1, max |ref|) (the tests' scaled error), held to
glcnn.runtime.precision.TOLERANCE[precision]. Errors propagate, so the layers after a divergent one
usually exceed the tolerance too; only the first is named. Layers without a reference are
listed as such, but a diff where no layer has one raises `NothingComparedError`: a
comparison of nothing must not pass.
"""

import os
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..errors import GlcnnError, quote
from ..runtime.precision import TOLERANCE  # the one table, shared with the tests
from .diff_refs import (
    NothingComparedError,
    abs_error,
    check_against,
    examples,
    reference_outputs,
)

__all__ = ["TOLERANCE", "DiffReport", "LayerDiff", "NothingComparedError", "diff",
           "diff_pipeline", "format_table"]


@dataclass
class LayerDiff:
    """One row of the table: a layer's (or graph input's) output against its reference.

    Errors are None when the reference has no counterpart for this layer.
    """

    layer: str
    op: str  # op type with fused parts, e.g. "Conv+Add+Relu"; "Input" for graph inputs
    shape: tuple
    max_abs: float | None
    max_rel: float | None  # the scaled error: max_abs / max(1, max |ref|)
    mean_abs: float | None
    lo: float  # range of glcnn's output (finite values)
    hi: float
    nonfinite: int  # NaN and Inf values in glcnn's output
    tolerance: float

    @property
    def compared(self) -> bool:
        return self.max_rel is not None

    @property
    def exceeds(self) -> bool:
        return self.compared and not self.max_rel <= self.tolerance


class DiffReport(NamedTuple):
    """What `diff` returns: the rows in execution order and the first divergent layer."""

    rows: list[LayerDiff]
    first_divergence: str | None


# --- comparing (GL-free) -----------------------------------------------------------------
def op_label(op) -> str:
    """The op type with its fused parts in execution order (`Node.label`)."""
    return op.node.label


def compare(layer: str, op: str, y, ref, tolerance: float) -> LayerDiff:
    """One row: glcnn's `y` against `ref` (None: no reference for this layer).

    Raises:
        GlcnnError: `y` and `ref` differ in shape, naming the layer and both shapes.
    """
    y = np.asarray(y, np.float64)
    finite = y[np.isfinite(y)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (np.nan, np.nan)
    errors = (None, None, None)
    if ref is not None:
        if np.shape(ref) != y.shape:
            raise GlcnnError(f"layer {quote(layer)}: glcnn output has shape {y.shape}, the "
                             f"reference {np.shape(ref)}")
        err = abs_error(y, ref)
        ref_abs = np.abs(np.asarray(ref, np.float64))
        scale = max(1.0, float(np.max(ref_abs[np.isfinite(ref_abs)], initial=0.0)))
        errors = (float(err.max()), float(err.max()) / scale, float(err.mean()))
    return LayerDiff(layer, op, tuple(y.shape), *errors, lo, hi,
                     int(y.size - finite.size), tolerance)


def compare_all(order: list[tuple[str, str]], outputs: dict, refs: dict,
                tolerance: float) -> DiffReport:
    """Rows for every (layer, op label) of `order`, and the first layer over `tolerance`.

    Args:
        order: (tensor name, op label) in execution order, graph inputs first.
        outputs: glcnn's (C, H, W) arrays by name; refs: the reference's (missing: no row
            errors).
    Raises:
        NothingComparedError: no layer (graph inputs aside) has a reference.
    """
    rows = [compare(name, op, outputs[name], refs.get(name), tolerance) for name, op in order]
    if not any(row.compared for row in rows if row.op != "Input"):
        layers = [name for name, op in order if op != "Input"]
        raise NothingComparedError(f"nothing compared: none of the {len(layers)} layers "
                                   f"({examples(layers)}) has a reference")
    first = next((row.layer for row in rows if row.exceeds), None)
    return DiffReport(rows, first)


# --- printing ------------------------------------------------------------------------------
def _num(value) -> str:
    return "-" if value is None else f"{value:.3g}"


def _status(row: LayerDiff) -> str:
    return "no ref" if not row.compared else ("OVER" if row.exceeds else "ok")


def format_table(report: DiffReport, precision: str) -> str:
    """The per-layer table and the verdict line (first divergence, or all within tolerance)."""
    width = max([len("layer")] + [len(r.layer) for r in report.rows])
    op_width = max([len("op")] + [len(r.op) for r in report.rows])
    head = (f"{'layer':<{width}}  {'op':<{op_width}}  {'shape':<16} {'max abs':>9} "
            f"{'max rel':>9} {'mean abs':>9}  {'range':<21} {'nan/inf':>7}  status")
    lines = [head]
    for r in report.rows:
        lines.append(f"{r.layer:<{width}}  {r.op:<{op_width}}  {str(r.shape):<16} "
                     f"{_num(r.max_abs):>9} {_num(r.max_rel):>9} {_num(r.mean_abs):>9}  "
                     f"{f'{r.lo:.4g}..{r.hi:.4g}':<21} {r.nonfinite:>7}  {_status(r)}")
    return "\n".join(lines + [verdict(report, precision)])


def verdict(report: DiffReport, precision: str) -> str:
    """"first divergence: layer X (Conv+Relu): scaled error 0.31 > 1e-05", or all within."""
    tolerance = TOLERANCE[precision]
    if report.first_divergence is not None:
        row = next(r for r in report.rows if r.layer == report.first_divergence)
        nonfinite = f" ({row.nonfinite} NaN/Inf values)" if row.nonfinite else ""
        return (f"first divergence: layer {row.layer} ({row.op}): scaled error "
                f"{row.max_rel:.3g} > {tolerance:g}{nonfinite}")
    layers = [r for r in report.rows if r.op != "Input"]
    compared = sum(r.compared for r in layers)
    missing = len(layers) - compared
    text = f"all {compared} layers within tolerance ({precision}: {tolerance:g})"
    return text + (f"; {missing} layers have no reference" if missing else "")


# --- running ----------------------------------------------------------------------------------
def diff(model, inputs, against: str | None = None, precision: str = "fp32", ctx=None,
         tfjs_dir=None, png_dir=None) -> DiffReport:
    """Run `model` on the GPU keeping every layer and compare each with a reference.

    Args:
        model: a model file (.onnx, .npz, ...) as for `glcnn.load`. Not a Pipeline: its
            precision and context are already chosen, and onnxruntime needs the file; use
            `diff_pipeline` for one.
        inputs: one array for a one-input model, or a dict name -> array (model layout).
        against: "numpy", "onnxruntime", "tfjs-outputs" or None (`diff_refs.default_against`).
        precision: storage precision of the pipeline ("fp32", "fp16", "u8"; u8 needs the
            model's calibrated ranges, see glcnn.calibrate).
        ctx: as for `Pipeline`; tfjs_dir: the .npy folder for "tfjs-outputs".
        png_dir: if given, write glcnn | reference | |difference| images there
            (`glcnn.commands.diff_png`).
    Returns:
        DiffReport(rows, first_divergence).
    Raises:
        GlcnnError: `model` not a file name (e.g. a Pipeline), unreadable model or input,
            unknown precision or reference, onnxruntime missing, reference files of the
            wrong shape.
        NothingComparedError: no layer has a reference (e.g. no file of `tfjs_dir` matches).
    """
    from ..importers.prepared import load_optimized
    from ..runtime.pipeline import Pipeline
    if isinstance(model, Pipeline):
        raise GlcnnError("glcnn.commands.diff.diff takes a model file; for a compiled Pipeline "
                         "(built with keep=\"all\") call "
                         "glcnn.commands.diff.diff_pipeline(pipe, x, against)")
    if not isinstance(model, (str, os.PathLike)):
        raise GlcnnError(f"glcnn.commands.diff.diff takes a model file (str or path), not "
                         f"{type(model).__name__}")
    against = check_against(against, model, tfjs_dir)
    graph = load_optimized(model)
    calibrate_if_needed(graph, precision, _named_inputs(graph, inputs), ctx)
    with Pipeline(graph, ctx, precision, keep="all") as pipe:
        return diff_pipeline(pipe, inputs, against, model, tfjs_dir, png_dir)


def diff_pipeline(pipe, inputs, against: str = "numpy", model=None, tfjs_dir=None,
                  png_dir=None) -> DiffReport:
    """`diff` on an already compiled Pipeline (built with keep="all").

    The reference is computed from `pipe.graph`'s numpy weights (or the model file), so a
    test can corrupt a weight texture on the GPU and see that layer named.

    Args and Returns: as for `diff`; `model` is the file ("onnxruntime" needs the .onnx).
    Raises:
        GlcnnError: as for `diff`; `pipe` not a Pipeline; a pipeline without keep="all".
        NothingComparedError: as for `diff`.
    """
    from ..runtime.pipeline import Pipeline
    if not isinstance(pipe, Pipeline):
        raise GlcnnError(f"glcnn.commands.diff.diff_pipeline takes a compiled Pipeline, not "
                         f"{type(pipe).__name__}; for a model file call "
                         "glcnn.commands.diff.diff(model, x, against)")
    given = _named_inputs(pipe.graph, inputs)
    outputs = run_layers(pipe, given)
    stored = {name: outputs[name] for name in pipe.graph.inputs}
    refs = reference_outputs(against, pipe.graph, stored, model, tfjs_dir)
    refs.update(given)  # input rows: what the texture holds against what was given
    order = [(name, "Input") for name in pipe.graph.inputs]
    order += [(op.node.name, op_label(op)) for op in pipe.ops]
    report = compare_all(order, outputs, refs, TOLERANCE[pipe.precision])
    if png_dir is not None:
        from .diff_png import write_pngs
        write_pngs(png_dir, report.rows, outputs, refs)
    return report


def calibrate_if_needed(graph, precision: str, inputs: dict, ctx=None) -> bool:
    """For u8 on a model without stored ranges, calibrate `graph` on `inputs` (the best case
    for u8: no value falls outside its range). Returns whether it calibrated."""
    if precision != "u8" or graph.meta.get("u8_ranges"):
        return False
    from ..runtime.calibration import calibrate
    calibrate(graph, [inputs], ctx)
    return True


def run_layers(pipe, inputs: dict) -> dict:
    """Run `pipe` on `inputs` and read back every tensor, graph inputs included (GL)."""
    pipe.run(inputs, readback=False)
    return {name: pipe.read(name) for name in pipe.shapes}


def _named_inputs(graph, inputs) -> dict:
    """`inputs` as a dict name -> float64 (C, H, W), from one array or a dict in any layout
    whose size matches (e.g. (1, C, H, W), or ONNX (1, F) for a (F, 1, 1) input).

    Raises:
        GlcnnError: several model inputs but one array, unknown names, wrong sizes.
    """
    if not isinstance(inputs, dict):
        if len(graph.inputs) != 1:
            raise GlcnnError(f"model has inputs {list(graph.inputs)}; pass a dict of arrays")
        inputs = {next(iter(graph.inputs)): inputs}
    if set(inputs) != set(graph.inputs):
        raise GlcnnError(f"inputs {sorted(inputs)} do not match the model's "
                         f"{list(graph.inputs)}")
    named = {}
    for name, shape in graph.inputs.items():
        x = np.asarray(inputs[name], np.float64)
        if x.size != int(np.prod(shape)):
            raise GlcnnError(f"input {quote(name)} has shape {x.shape}; expected {tuple(shape)} "
                             f"or {(1, *shape)}")
        named[name] = x.reshape(shape)
    return named
