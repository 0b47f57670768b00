"""What `glcnn bench --against` times glcnn against, and the output checks that come first.

- "onnxruntime": an `InferenceSession` on the same `.onnx` file (CPU execution provider,
  intra_op_num_threads = cores, onnxruntime's default graph optimisations).
- "torch": PyTorch on the CPU running the model's glcnn Graph with torch.nn.functional
  (`glcnn.commands.torch_runner`), set_num_threads(cores), inference mode. It runs the graph as
  imported with BatchNorm folded and activations and residual adds fused (as
  `glcnn.graph.passes.optimize` does), but not split into glcnn's multi-pass reductions.

Neither runs glcnn's shaders, so each is an independent check of glcnn's output. torch and
onnxruntime are imported only when asked for.
"""

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import GlcnnError, MismatchError, quote
from ..inputs import channels_last, checked_input, onnx_as_stored, own_input

AGAINST = ("onnxruntime", "torch")


def parse_against(text: str | None) -> tuple[str, ...]:
    """`--against` as names: "onnxruntime,torch" -> ("onnxruntime", "torch").

    Raises:
        GlcnnError: a name other than onnxruntime or torch.
    """
    names = tuple(n.strip() for n in (text or "").split(",") if n.strip())
    unknown = [n for n in names if n not in AGAINST]
    if unknown:
        raise GlcnnError(f"--against takes {' and/or '.join(AGAINST)} (comma-separated); "
                         f"got {', '.join(map(repr, unknown))}")
    return tuple(dict.fromkeys(names))


def check_against(against, model) -> None:
    """Refuse, before anything runs, what cannot be compared.

    Raises:
        GlcnnError: onnxruntime on a model that is not an .onnx file, or a package that is
            not installed.
    """
    for name in against:
        if name == "onnxruntime" and Path(model).suffix.lower() != ".onnx":
            raise GlcnnError(f"--against onnxruntime needs an .onnx model; {model} is not one "
                             "(onnxruntime cannot read glcnn .npz or TF.js files); use "
                             "--against torch")
        if importlib.util.find_spec(name) is None:
            hint = "torch==2.13.0" if name == "torch" else "onnxruntime"
            raise GlcnnError(f"--against {name} needs the {name} package: pip install {hint}")


@dataclass
class Reference:
    """Another implementation of the model, prepared on one input.

    Attributes:
        label: what the tables call it, e.g. "onnxruntime (2 threads)".
        run: one inference on the prepared input (what is timed).
        outputs: its result, graph output name -> float32 (C, H, W) as glcnn holds it.
    """

    label: str
    run: Callable[[], object]
    outputs: dict[str, np.ndarray]


def make_reference(name: str, model, graph, inputs: dict, shapes: dict,
                   input_size=None) -> Reference:
    """Reference `name` ("onnxruntime" or "torch") of `model`, run once on `inputs`.

    Args:
        name: one of AGAINST.
        model: the model file.
        graph: its optimised glcnn Graph (for output names and ONNX shapes).
        inputs: graph input name -> float32 (C, H, W) array (see `chw_inputs`).
        shapes: tensor name -> glcnn (C, H, W) shape, graph inputs and outputs included.
        input_size: (H, W) the graph was imported at, for a model with open input sizes.
    Raises:
        GlcnnError: the implementation failed or cannot run the model (naming the layer).
    """
    threads = len(os.sched_getaffinity(0))
    if name == "onnxruntime":
        return _onnxruntime(model, graph, inputs, shapes, threads)
    return _torch(model, inputs, shapes, threads, input_size)


def _onnxruntime(model, graph, inputs, shapes, threads) -> Reference:
    import onnxruntime as ort
    feeds = {n: own_input(graph.meta, n, x) for n, x in inputs.items()}
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    try:
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        values = session.run(graph.outputs, feeds)
    except Exception as exc:  # onnxruntime raises its own (non-GlcnnError) exception types
        raise GlcnnError(f"onnxruntime failed on {model}: {str(exc).splitlines()[0]}") from None
    last = set(graph.meta.get("channels_last_outputs", ()))  # held (C, 1, L) or (C, H, W)
    outputs = {n: _as_chw(onnx_as_stored(v, n in last), shapes[n],
                          f"onnxruntime output {quote(n)}")
               for n, v in zip(graph.outputs, values)}
    return Reference(f"onnxruntime ({threads} threads)",
                     lambda: session.run(graph.outputs, feeds), outputs)


def torch_graph(model, input_size=None):
    """The graph torch runs: `model` as imported (at `input_size` for open sizes), with
    BatchNorm folded and activations and residual adds fused, but reductions not split into
    glcnn's multi-pass form; NHWC inputs and outputs held (C, H, W) without their Transposes
    (fold_layout), as `chw_inputs` gives them and glcnn's outputs are."""
    from ..graph import passes
    from ..importers import load_graph
    graph = passes.drop_identity_reshapes(passes.fold_layout(load_graph(model, input_size)))
    return passes.fuse_activations(passes.fuse_residual_add(passes.fold_batchnorm(graph)))


def _torch(model, inputs, shapes, threads, input_size=None) -> Reference:
    from .torch_runner import TorchRunner
    runner = TorchRunner(torch_graph(model, input_size), threads)
    tensors = runner.feeds(inputs)
    outputs = {n: _as_chw(y.numpy(), shapes[n], f"torch output {quote(n)}")
               for n, y in runner.forward(tensors).items()}
    return Reference(f"torch ({threads} threads)", lambda: runner.forward(tensors), outputs)


def chw_inputs(graph, feeds: dict) -> dict[str, np.ndarray]:
    """`feeds` (in the model's own layout) as glcnn's float32 (C, H, W) arrays.

    Raises:
        ShapeError: an input of the wrong shape, dtype, or with NaN/Inf.
    """
    own = graph.meta.get("onnx_input_shapes", {})
    return {name: checked_input(name, x, tuple(graph.inputs[name]), tuple(own.get(name, ())),
                                channels_last(graph.meta, name)).astype(np.float32, copy=False)
            for name, x in feeds.items()}


def _as_chw(value, shape, what: str) -> np.ndarray:
    a = np.asarray(value, np.float32)
    if a.size != int(np.prod(shape)):
        raise GlcnnError(f"{what} has shape {a.shape}; glcnn's has {tuple(shape)} (C, H, W)")
    return a.reshape(shape)


# --- agreement --------------------------------------------------------------------------------
@dataclass
class Agreement:
    """Outputs of implementation `a` against those of `b`, over all graph outputs.

    scaled = max_abs / max(1, max |b|): the absolute difference for outputs within ±1,
    relative to the largest value for larger ones.
    """

    a: str
    b: str
    max_abs: float
    scaled: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.scaled <= self.tolerance  # False for NaN

    def require(self) -> "Agreement":
        """Self, or MismatchError when the difference exceeds the tolerance."""
        if not self.ok:
            raise MismatchError(f"{self.a} and {self.b} disagree: max abs diff "
                                f"{self.max_abs:.3g} (scaled {self.scaled:.3g} > "
                                f"{self.tolerance:g}); refusing to time a wrong computation")
        return self


def agreement(a: str, a_out: dict, b: str, b_out: dict, tolerance: float) -> Agreement:
    """Compare two implementations' outputs (name -> array, same names and sizes)."""
    diffs, scale = [], 1.0
    for name, ref in b_out.items():
        ref = np.asarray(ref, np.float64)
        y = np.asarray(a_out[name], np.float64).reshape(ref.shape)
        diffs.append(np.max(np.abs(y - ref), initial=0.0))
        scale = max(scale, float(np.max(np.abs(ref), initial=0.0)))
    max_abs = float(np.max(diffs))  # NaN if any output holds NaN
    return Agreement(a, b, max_abs, max_abs / scale, tolerance)
