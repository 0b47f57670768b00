"""References for `glcnn diff` (GL-free): every layer's expected output, by glcnn name.

- "numpy": `glcnn.graph.reference.run` on the same optimised graph, in float64.
- "onnxruntime": the `.onnx` file with every intermediate that has a glcnn counterpart
  added as a graph output. glcnn names an ONNX tensor with "::" replaced by "_" (and a
  fused layer by its last ONNX tensor, e.g. the Relu after a Conv); layers that passes or
  the importer created (multi-pass helpers) and ambiguous names have no counterpart.
- "tfjs-outputs": a folder of per-layer `.npy` files, `<layer>.npy` with the glcnn layer
  name (`safe_name`: characters other than letters, digits, ".", "_", "-" become "_"), e.g.
  written from TF.js with `layer.apply` per layer. Shapes (1, H, W, C) or (H, W, C) are
  transposed to (C, H, W) when the graph's meta says layout "NHWC"; (1, F) or (F,) vectors
  become (F, 1, 1). Layers without a file have no reference; a folder where no file
  matches a layer is a `NothingComparedError` naming the folder and the expected names.

A comparison that compares nothing proves nothing, so it fails (`NothingComparedError`)
instead of passing.
"""

import re
from pathlib import Path

import numpy as np

from ..errors import GlcnnError, NothingComparedError, quote
from ..inputs import onnx_as_stored, own_input

AGAINST = ("onnxruntime", "numpy", "tfjs-outputs")
EXAMPLES = 5  # expected file or layer names an error lists


def default_against(model) -> str:
    """onnxruntime for an .onnx model when it is importable, numpy otherwise."""
    if Path(model).suffix.lower() != ".onnx":
        return "numpy"
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return "numpy"
    return "onnxruntime"


def check_against(against, model, tfjs_dir) -> str:
    """`against`, or the default for `model`, checked before anything runs.

    Raises:
        GlcnnError: unknown reference, onnxruntime on a non-.onnx model, a missing folder.
    """
    against = against or default_against(model)
    if against not in AGAINST:
        raise GlcnnError(f"unknown reference {quote(against)}; expected one of "
                         f"{', '.join(AGAINST)}")
    if against == "onnxruntime" and Path(str(model)).suffix.lower() != ".onnx":
        raise GlcnnError(f"--against onnxruntime needs an .onnx model, not {model}; "
                         "use --against numpy")
    if against == "tfjs-outputs" and (tfjs_dir is None or not Path(tfjs_dir).is_dir()):
        raise GlcnnError(f"--against tfjs-outputs needs a folder of per-layer .npy files; "
                         f"{tfjs_dir} is not a folder")
    return against


def reference_outputs(against: str, graph, inputs: dict, model=None, tfjs_dir=None) -> dict:
    """Expected (C, H, W) float64 output of every layer the reference knows, by glcnn name.

    Args:
        against: one of AGAINST.
        graph: the optimised graph glcnn runs.
        inputs: name -> (C, H, W) input, as stored on the GPU.
        model: the model file (for onnxruntime); tfjs_dir: the .npy folder.
    Raises:
        GlcnnError: see `check_against`, `onnxruntime_outputs`, `tfjs_outputs`.
    """
    if against == "numpy":
        from ..graph import reference
        return reference.run(graph, inputs)
    if against == "onnxruntime":
        return onnxruntime_outputs(model, graph, inputs)
    return tfjs_outputs(tfjs_dir, graph)


# --- onnxruntime ----------------------------------------------------------------------------
def onnx_counterparts(onnx_model, graph) -> dict[str, str]:
    """glcnn layer name -> the ONNX tensor it holds, for layers that have one.

    A glcnn name is an ONNX tensor name with "::" replaced by "_"; names two ONNX tensors
    would share are left out rather than guessed.
    """
    by_glcnn: dict[str, list[str]] = {}
    for node in onnx_model.graph.node:
        for name in filter(None, node.output):
            by_glcnn.setdefault(name.replace("::", "_"), []).append(name)
    return {n.name: by_glcnn[n.name][0] for n in graph.nodes
            if len(by_glcnn.get(n.name, ())) == 1}


def exposed_model(onnx_model, names):
    """A copy of `onnx_model` with ONNX tensors `names` added as float graph outputs."""
    from onnx import TensorProto, helper
    model = type(onnx_model)()
    model.CopyFrom(onnx_model)
    present = {o.name for o in model.graph.output}
    model.graph.output.extend(helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                              for n in names if n not in present)
    return model


def _onnxruntime():
    try:
        import onnxruntime
    except ImportError:
        raise GlcnnError("--against onnxruntime needs the onnxruntime package "
                         "(pip install onnxruntime), or use --against numpy") from None
    return onnxruntime


def onnxruntime_outputs(model, graph, inputs: dict) -> dict:
    """Every layer with an ONNX counterpart, computed by onnxruntime (CPU, no graph rewrites).

    Raises:
        GlcnnError: onnxruntime not installed; onnxruntime failing on the model; an ONNX
            tensor whose size does not match its glcnn layer.
    """
    ort = _onnxruntime()
    from ..importers.onnx import read_model
    onnx_model = read_model(model)
    names = onnx_counterparts(onnx_model, graph)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    feeds = {name: own_input(graph.meta, name, np.asarray(x, np.float32))
             for name, x in inputs.items()}
    try:
        session = ort.InferenceSession(
            exposed_model(onnx_model, names.values()).SerializeToString(), options,
            providers=["CPUExecutionProvider"])
        values = session.run(list(names.values()), feeds)
    except Exception as exc:  # onnxruntime raises its own (non-GlcnnError) exception types
        raise GlcnnError(f"onnxruntime failed on {model}: {str(exc).splitlines()[0]}") from None
    from ..ops import build_ops
    shapes = build_ops(graph)[1]
    last = set(graph.meta.get("channels_last_tensors", ()))
    return {layer: _as_chw(onnx_as_stored(v, layer in last), shapes[layer],
                           f"ONNX tensor {quote(names[layer])}")
            for layer, v in zip(names, values)}


# --- per-layer .npy files --------------------------------------------------------------------
def safe_name(layer: str) -> str:
    """`layer` as a file name: characters other than letters, digits, ".", "_", "-" → "_"."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", layer)


def tfjs_outputs(folder, graph) -> dict:
    """Per-layer reference arrays from `folder/<safe_name(layer)>.npy` (see module docstring).

    Raises:
        GlcnnError: an unreadable file, or one whose shape does not fit its layer.
        NothingComparedError: no file of `folder` matches a layer.
    """
    from ..ops import build_ops
    shapes = build_ops(graph)[1]
    channels_last = graph.meta.get("layout") == "NHWC"
    refs = {}
    for node in graph.nodes:
        path = Path(folder) / f"{safe_name(node.name)}.npy"
        if path.is_file():
            refs[node.name] = _as_chw(_load_npy(path), shapes[node.name], str(path),
                                      channels_last)
    if not refs:
        raise NothingComparedError(no_files_message(folder, graph))
    return refs


def no_files_message(folder, graph) -> str:
    """"nothing compared: no file in DIR matches a layer; looked for a.npy, ..." and, as a
    hint at the naming, which .npy files the folder does hold."""
    expected = [f"{safe_name(n.name)}.npy" for n in graph.nodes]
    found = sorted(p.name for p in Path(folder).glob("*.npy"))
    return (f"nothing compared: no file in {folder} matches a layer of the model; looked for "
            f"{examples(expected)}; the folder holds {len(found)} .npy files"
            + (f" ({examples(found)})" if found else ""))


def examples(names: list[str]) -> str:
    """The first EXAMPLES names, and how many more there are."""
    more = len(names) - EXAMPLES
    return ", ".join(names[:EXAMPLES]) + (f", ... ({more} more)" if more > 0 else "")


def _load_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise GlcnnError(f"{path}: not a readable .npy array ({exc})") from None


def _as_chw(value, shape, what: str, channels_last: bool = False) -> np.ndarray:
    """`value` as a float64 (C, H, W) array of `shape`.

    Drops a leading batch of 1, moves channels first for channels-last 3-D arrays, and
    reshapes vectors and other arrays of the right size.

    Raises:
        GlcnnError: the size does not match `shape`, naming `what` and both shapes.
    """
    a = np.asarray(value, np.float64)
    if a.ndim == 4 and a.shape[0] == 1:
        a = a[0]
    if a.ndim == 3 and channels_last:
        a = a.transpose(2, 0, 1)
    if a.shape != tuple(shape) and a.size == int(np.prod(shape)) and a.ndim != 3:
        a = a.reshape(shape)
    if a.shape != tuple(shape):
        raise GlcnnError(f"{what} has shape {np.shape(value)}; its glcnn layer has "
                         f"{tuple(shape)} (C, H, W)")
    return a


def abs_error(y, ref) -> np.ndarray:
    """|y − ref| in float64, 0 where both hold the same NaN/Inf, Inf where only one does."""
    y, ref = np.asarray(y, np.float64), np.asarray(ref, np.float64)
    with np.errstate(invalid="ignore"):
        err = np.abs(y - ref)
    same = (y == ref) | (np.isnan(y) & np.isnan(ref))
    return np.where(same, 0.0, np.where(np.isnan(err), np.inf, err))
