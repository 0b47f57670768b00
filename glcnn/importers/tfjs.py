"""TF.js layers-model importer: `model.json` + `*.bin` weight shards to a glcnn Graph (no GL).

Reads what TF.js's `model.save()` and the Python `tensorflowjs` converter write (format
"layers-model"; graph models, "graph-model", go to glcnn/importers/tfjs_graph.py): a Keras 2
style `modelTopology` (a Sequential or Functional/"Model" config, bare or wrapped as
`{"model_config": ...}`) and a `weightsManifest` (glcnn/importers/tfjs_weights.py: shards,
float16 and uint8/uint16 quantization).

Steps:
1. parse the topology into layer calls (`Call`: Keras class, layer name, config, the layers
   it reads) in dependency order; a Sequential gets the InputLayer "<first layer>_input",
   as Keras and TF.js name it;
2. check every class has a converter (a built-in one, or a custom class's builder registered
   with `register_layer`, glcnn/importers/tfjs_custom.py) and every activation is known,
   raising one `UnsupportedOpError` listing all that are not; settle the data format;
3. read every weight; layers find theirs by name ("<layer>/kernel"), never by position;
4. convert layer by layer (glcnn/importers/tfjs_layers.py).

Layout. glcnn tensors are (C, H, W). A model is channels_last (NHWC, the Keras default) or
channels_first (NCHW) as its layers' `data_format` says; a model mixing both is refused.
Only the importer converts: kernels from Keras HWIO to OIHW, TF's "same" padding to
explicit pads (the odd one at the bottom/right), TF axes to NCHW. A vector (1, F) is
glcnn's (F, 1, 1). Flattening a channels_last map gives TF's H, W, C order while glcnn's
Flatten gives C, H, W: the vector carries that permutation (`Tensor.order`) until the Dense
reading it takes it into its kernel rows (any other reader gets an exact permutation Gemm).

Inputs and outputs keep the model's own layout: `meta["layout"]` is "NHWC" or "NCHW" and
`meta["onnx_input_shapes"]` / `meta["onnx_output_shapes"]` give each input's and output's
TF shape with batch 1, e.g. [1, 64, 64, 3] (the keys Pipeline reads for own-layout
shapes). Graph inputs are named after the InputLayers, outputs after the output layers,
nodes after their layers (helper nodes "<layer>/<role>").
"""

import json
from pathlib import Path

import numpy as np

from ..errors import (
    GlcnnError,
    ModelFileError,
    ShapeError,
    UnsupportedOpError,
    WeightError,
    kinds_and_names,
    quote,
)
from ..graph.graph import Graph, Node, bind_output, float32
from ..limits import check_atlas
from ..ops import make_op
from . import tfjs_graph
from .tfjs_custom import (  # noqa: F401 (the public hook)
    CUSTOM,
    HOW,
    custom_layer,
    register_layer,
    unregister_layer,
)
from .tfjs_tensor import PERMUTATION_GEMM_MAX, Tensor  # noqa: F401 (importers' names)
from .tfjs_topology import Call, ConfigError, parse_topology
from .tfjs_weights import read_weights

# What a config value of the wrong type or form raises while it is read; reported as a
# ModelFileError naming the file (and the layer, during conversion).
MALFORMED = (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError,
             ZeroDivisionError)


def load(path, input_size=None) -> Graph:
    """Read a TF.js layers model into a Graph.

    Args:
        path: model.json; its weight shards are read from the same folder.
        input_size: (H, W) for inputs whose height and width the model leaves open (None in
            `batch_input_shape`, as fully convolutional super-resolution models do).
    Returns:
        The graph (not optimised: glcnn.load runs the passes), with meta["layout"].
    Raises:
        ModelFileError: not JSON, not a layers model, a malformed topology or manifest,
            missing or short weight shards.
        UnsupportedOpError: layer classes, activations or settings glcnn cannot run;
            unsupported classes and activations are all listed in one error.
        WeightError: a weight missing, undecodable, or not of the shape its layer needs.
    """
    path = Path(path)
    doc = read_model_json(path)
    if tfjs_graph.is_graph_model(doc):
        return tfjs_graph.load(path, input_size, doc)
    try:
        calls, inputs, outputs = parse_topology(doc["modelTopology"], path.name)
        check_supported(calls, path.name)
        layout = data_layout(calls, path.name)
        weights = read_weights(path, doc.get("weightsManifest", []))
        return TfjsImport(path.name, layout, weights, input_size).run(calls, inputs, outputs)
    except MALFORMED as exc:
        raise ModelFileError(f"{path.name}: malformed layers model ({type(exc).__name__}: "
                             f"{str(exc)[:300]})") from None


def open_inputs(path) -> dict[str, tuple]:
    """InputLayers of TF.js model `path` whose height or width is None, in the model's layout
    with "H" / "W" in their place, e.g. {"input_1": (1, "H", "W", 3)}; only model.json is read.

    Raises:
        UnsupportedOpError: an open channel count.
        ModelFileError: not a readable layers model.
    """
    path = Path(path)
    doc = read_model_json(path)
    if tfjs_graph.is_graph_model(doc):
        return tfjs_graph.open_inputs(path, doc)
    try:
        calls = parse_topology(doc["modelTopology"], path.name)[0]
        spatial = (1, 2) if data_layout(calls, path.name) == "NHWC" else (2, 3)
        shapes = {c.name: c.config.get("batch_input_shape", c.config.get("batch_shape"))
                  for c in calls if c.cls == "InputLayer"}
    except MALFORMED as exc:
        raise ModelFileError(f"{path.name}: malformed layers model ({type(exc).__name__}: "
                             f"{str(exc)[:300]})") from None
    found = {}
    for name, shape in shapes.items():
        if not isinstance(shape, list) or len(shape) != 4 or None not in shape[1:]:
            continue  # fixed, or refused by the import with its own message
        if shape[({1, 2, 3} - set(spatial)).pop()] is None:
            raise UnsupportedOpError(f"{path.name}: input {quote(name)} has shape "
                                     f"{quote(shape)}; only its height and width may be open")
        dims = [1, *shape[1:]]
        for axis, label in zip(spatial, "HW"):
            dims[axis] = label if dims[axis] is None else dims[axis]
        found[name] = tuple(dims)
    return found


def read_model_json(path: Path) -> dict:
    """model.json as a dict holding a `modelTopology` (a layers model's, or a graph model's
    GraphDef: `tfjs_graph.is_graph_model` tells them apart).

    Raises:
        ModelFileError: naming the file.
    """
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ModelFileError(f"{path}: not a readable JSON model file ({type(exc).__name__}: "
                             f"{exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("modelTopology"), dict):
        raise ModelFileError(f"{path}: not a TF.js model (no 'modelTopology' object)")
    if doc.get("format", "layers-model") not in ("layers-model", "graph-model"):
        raise ModelFileError(f"{path}: format {quote(doc['format'])} is not 'layers-model' or "
                             "'graph-model'")
    return doc


def check_supported(calls: list[Call], filename: str) -> None:
    """Raise one UnsupportedOpError naming every unknown layer class and activation, each
    with the layers using it, and how to register custom classes (glcnn/importers/
    tfjs_custom.py). A custom class's activation is its builder's to check."""
    layers = _layers()
    missing: dict[str, list[str]] = {}
    for call in calls:
        activation = layers.activation_name(call.config.get("activation"))
        if call.cls not in layers.CONVERTERS:
            missing.setdefault(call.cls, []).append(call.name)
        elif activation not in layers.ACTIVATIONS and call.cls not in CUSTOM:
            missing.setdefault(f"activation {quote(activation)}", []).append(call.name)
    if not missing:
        return
    # classes are identifiers (tfjs_topology); names are quoted, lists cut
    listed = kinds_and_names(missing, "layers")
    classes = [kind for kind in missing if not kind.startswith("activation ")]
    hook = (f". Custom layer classes (registered in TF.js with tf.serialization.registerClass) "
            f"load once each has a builder: {HOW}, before loading (README: 'Custom TF.js "
            "layers')" if classes else "")
    raise UnsupportedOpError(
        f"{filename}: {len(missing)} unsupported layer class(es)/activation(s): {listed}"
        f"{hook}. Supported layers: {', '.join(sorted(layers.CONVERTERS))}; activations: "
        f"{', '.join(sorted(a for a in layers.ACTIVATIONS if a))}")


def _layers():
    """The converters (imported late: they import Call and Tensor from this module)."""
    from . import tfjs_layers, tfjs_shapes  # noqa: F401  (tfjs_shapes registers its own)
    return tfjs_layers


def data_layout(calls: list[Call], filename: str) -> str:
    """"NHWC" or "NCHW": the one data_format of the model's layers (Flatten's aside).

    Raises:
        UnsupportedOpError: layers disagree, naming one of each.
    """
    formats: dict[str, str] = {}
    for call in calls:
        if call.cls != "Flatten" and call.config.get("data_format"):
            formats.setdefault(call.config["data_format"], call.name)
    unknown = set(formats) - {"channels_last", "channels_first"}
    if unknown or len(formats) > 1:
        raise UnsupportedOpError(f"{filename}: layers use data formats {formats} (format: "
                                 "first layer); glcnn needs one of channels_last, "
                                 "channels_first for the whole model")
    return "NCHW" if "channels_first" in formats else "NHWC"


# --- conversion ----------------------------------------------------------------------------
class TfjsImport:
    """The state of one conversion; converters in tfjs_layers call its helpers."""

    def __init__(self, filename: str, layout: str, weights: dict, input_size=None):
        self.filename, self.layout, self.weights = filename, layout, weights
        self.input_size = input_size
        self.inputs: dict[str, tuple] = {}
        self.nodes: list[Node] = []
        self.shapes: dict[str, tuple] = {}
        self.tensors: dict[str, Tensor] = {}
        self._reordered: dict[str, Tensor] = {}
        self._output_names: set[str] = set()

    def run(self, calls: list[Call], inputs: list[str], outputs: list[str]) -> Graph:
        convert = _layers().convert
        for call in calls:
            try:
                self.tensors[call.name] = convert(self, call)
            except ConfigError as exc:
                raise ModelFileError(f"{self.where(call)}: {exc}") from None
            except MALFORMED as exc:
                raise ModelFileError(f"{self.where(call)}: malformed config "
                                     f"({type(exc).__name__}: {str(exc)[:300]})") from None
        stray = [name for name in inputs if name not in self.inputs]
        if stray:
            raise ModelFileError(f"{self.filename}: input_layers {quote(stray)} are not "
                                 "InputLayers")
        names = [self._bind_output(name) for name in outputs]
        meta = {"source": "tfjs", "layout": self.layout,
                "onnx_input_shapes": {n: self.tf_shape(self.tensors[n]) for n in inputs},
                "onnx_output_shapes": {n: self.tf_shape(self.tensors[n]) for n in names}}
        graph = Graph({n: self.inputs[n] for n in inputs}, self.nodes, names, meta)
        graph.validate()
        return graph

    # --- what converters use ---------------------------------------------------------------
    def where(self, call: Call) -> str:
        return f"{self.filename}: layer {quote(call.name)} ({call.cls})"

    def fail(self, call: Call, message: str):
        raise UnsupportedOpError(f"{self.where(call)}: {message}")

    def act(self, call: Call, index: int = 0, keep_order: bool = False) -> Tensor:
        """The tensor input `index` of `call` reads; in glcnn's order unless `keep_order`."""
        tensor = self.tensors[call.inputs[index]]
        if tensor.order is None or keep_order:
            return tensor
        return self.reorder(tensor)

    def shape(self, tensor: Tensor) -> tuple[int, int, int]:
        return self.shapes[tensor.name]

    def tf_shape(self, tensor: Tensor) -> list[int]:
        """The TF shape of `tensor`, batch 1: [1, F], [1, H, W, C] or [1, C, H, W]."""
        c, h, w = self.shapes[tensor.name]
        if tensor.rank == 2:
            return [1, c]
        return [1, h, w, c] if self.layout == "NHWC" else [1, c, h, w]

    def channel_axis(self, call: Call, tensor: Tensor, axis, what: str = "axis") -> None:
        """Check TF `axis` of `tensor` is its channel axis (glcnn's C).

        Raises:
            UnsupportedOpError: any other axis.
        """
        axis = axis[0] if isinstance(axis, list) and len(axis) == 1 else axis
        channel = 1 if tensor.rank == 2 or self.layout == "NCHW" else 3
        if not isinstance(axis, int) or axis % tensor.rank != channel:
            self.fail(call, f"{what}={axis} on a tensor of shape {self.tf_shape(tensor)}; only "
                            f"the channel axis ({channel} in {self.layout}) is supported")

    def weight(self, call: Call, key: str, shape: tuple) -> np.ndarray:
        """Weight "<layer>/<key>" of `call`, checked to have `shape`.

        Raises:
            WeightError: missing from the manifest or of another shape, naming both shapes.
        """
        name = self._weight_name(call, key)
        value = self.weights[name]
        if tuple(value.shape) != tuple(shape):
            raise WeightError(f"{self.where(call)}: weight {quote(name)} has shape "
                              f"{list(value.shape)} in the manifest, but the layer's config "
                              f"and input need {list(shape)}")
        return value

    def _weight_name(self, call: Call, key: str) -> str:
        name = f"{call.name}/{key}"
        if name in self.weights:
            return name
        nested = [w for w in self.weights if w.endswith("/" + name)]  # "<model>/<layer>/..."
        if len(nested) == 1:
            return nested[0]
        mine = sorted(w for w in self.weights if f"{call.name}/" in w)
        raise WeightError(f"{self.where(call)}: weight {quote(name)} is not in the weights "
                          f"manifest (its weights there: {mine or 'none'})")

    def add_input(self, call: Call, shape: tuple[int, int, int], rank: int) -> Tensor:
        """Register graph input `call` of glcnn shape `shape`.

        Raises:
            ShapeError, TextureSizeError: sizes < 1, or too large for any texture.
        """
        shape = tuple(int(v) for v in shape)
        if min(shape) < 1:
            raise ShapeError(f"{self.where(call)}: input shape {shape} has sizes below 1")
        check_atlas(shape, f"{self.where(call)}: input")
        self.inputs[call.name] = self.shapes[call.name] = shape
        return Tensor(call.name, rank)

    def emit(self, call: Call, op: str, inputs: list[str], attrs=None, weights=None,
             suffix: str = "") -> str:
        """Append a glcnn node for `call` (or a helper "<layer>/<suffix>"); absent (None)
        weights are left out. Returns the node's name.

        Raises:
            GlcnnError: the glcnn op refuses its attributes, weights or input shapes.
        """
        name = f"{call.name}/{suffix}" if suffix else call.name
        weights = {k: float32(v) for k, v in (weights or {}).items() if v is not None}
        node = Node(op, name, list(inputs), dict(attrs or {}), weights)
        try:
            shape = make_op(node, [self.shapes[t] for t in inputs]).output_shape()
        except GlcnnError as exc:
            raise type(exc)(f"{self.filename}: {exc}") from None
        self.nodes.append(node)
        self.shapes[name] = tuple(int(v) for v in shape)
        return name

    def reorder(self, tensor: Tensor) -> Tensor:
        """`tensor` (a vector in TF order) in glcnn's order, by an exact permutation Gemm.

        Raises:
            UnsupportedOpError: vectors longer than PERMUTATION_GEMM_MAX.
        """
        if tensor.name in self._reordered:
            return self._reordered[tensor.name]
        size = len(tensor.order)
        if size > PERMUTATION_GEMM_MAX:
            raise UnsupportedOpError(
                f"{self.filename}: the flattened {quote(tensor.name)} ({size} values, TF's H, W, C "
                "order) feeds a layer other than Dense; glcnn reorders at most "
                f"{PERMUTATION_GEMM_MAX} values")
        matrix = np.zeros((size, size), np.float32)
        matrix[tensor.order, np.arange(size)] = 1.0  # y[i] = x[order[i]]
        name = f"{tensor.name}/tf_order"
        node = Node("Gemm", name, [tensor.name], {}, {"B": matrix})
        self.nodes.append(node)
        self.shapes[name] = (size, 1, 1)
        self._reordered[tensor.name] = Tensor(name, 2)
        return self._reordered[tensor.name]

    # --- outputs ------------------------------------------------------------------------------
    def _bind_output(self, layer: str) -> str:
        """Make output layer `layer` a glcnn tensor of that name; returns the name."""
        tensor = self.tensors[layer]
        if tensor.order is not None:
            tensor = self.reorder(tensor)
        if tensor.name != layer:
            old = tensor.name
            if bind_output(self.nodes, old, layer, old in self._output_names):
                self.shapes[layer] = self.shapes.pop(old)
                self.tensors = {k: Tensor(layer, t.rank, t.order) if t.name == old else t
                                for k, t in self.tensors.items()}
            else:
                self.shapes[layer] = self.shapes[old]
        self.tensors[layer] = Tensor(layer, tensor.rank)
        self._output_names.add(layer)
        return layer
