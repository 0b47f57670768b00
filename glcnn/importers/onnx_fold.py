"""Static facts about an ONNX graph for the importer: attributes, shapes, constant folding.

PyTorch exports compute shapes at run time (Shape → Gather → Unsqueeze → Concat → Reshape,
Constant, Cast, ...). With a static input shape all of that is constant, so the importer
evaluates it here once, with onnx's own reference implementation, and the glcnn graph only
keeps ops that touch activations. GL-free; needs the `onnx` package.
"""

import math

import numpy as np

from ..errors import ModelFileError, UnsupportedOpError, quote
from . import onnx_sizes

# Ops whose output is not a function of their inputs: never folded.
RANDOM_OPS = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
              "Multinomial", "Bernoulli"}
# Most elements folding one node may allocate at once, its output or the reference
# implementation's temporaries (256 MiB as float32): a model whose shape arithmetic would
# build anything larger is refused before it is evaluated (onnx_sizes).
MAX_FOLDED_ELEMENTS = 1 << 26


def onnx_module():
    """The `onnx` package, imported on first use.

    Raises:
        ModelFileError: onnx is not installed.
    """
    try:
        import onnx
    except ImportError:
        raise ModelFileError("reading .onnx files needs the onnx package: pip install onnx "
                             "(or pip install 'glcnn[onnx]')") from None
    return onnx


def attributes(node) -> dict:
    """The node's attributes as plain Python values (str for strings, ndarray for tensors)."""
    onnx = onnx_module()
    out = {}
    for attr in node.attribute:
        try:
            value = onnx.helper.get_attribute_value(attr)
            if isinstance(value, bytes):
                value = value.decode()
            elif isinstance(value, onnx.TensorProto):
                value = onnx.numpy_helper.to_array(value)
            elif isinstance(value, list) and value and isinstance(value[0], bytes):
                value = [v.decode() for v in value]
        except Exception as exc:  # noqa: BLE001 - onnx raises ValueError, TypeError, ...
            raise ModelFileError(f"node {quote(node.name)} ({node.op_type}): attribute "
                                 f"{quote(attr.name)} is unreadable ({type(exc).__name__}: "
                                 f"{str(exc)[:200]})") from None
        out[attr.name] = value
    return out


def infer(model) -> tuple[dict[str, tuple], dict[str, int]]:
    """Run onnx shape inference.

    Returns:
        (tensor name -> dims (int, or None where unknown),
         tensor name -> ONNX element type such as TensorProto.FLOAT).
    Raises:
        ModelFileError: shape inference found the model inconsistent.
    """
    onnx = onnx_module()
    try:
        inferred = onnx.shape_inference.infer_shapes(_without_weights(model), data_prop=True)
    except Exception as exc:  # InferenceError, ValidationError, RuntimeError
        raise ModelFileError(f"ONNX shape inference failed: {exc}") from None
    graph = inferred.graph
    shapes, types = {}, {}
    for info in list(graph.value_info) + list(graph.input) + list(graph.output):
        if not info.type.HasField("tensor_type"):
            continue
        types[info.name] = info.type.tensor_type.elem_type
        if info.type.tensor_type.HasField("shape"):
            shapes[info.name] = tuple(d.dim_value if d.HasField("dim_value") else None
                                      for d in info.type.tensor_type.shape.dim)
    return shapes, types


# Initializers with more elements than this reach shape inference as typed graph inputs,
# without their data: inference needs their shapes only, and serialising a 167 MB model for
# it took longer than the rest of the import. Smaller ones (shape tensors) keep their values.
INFER_DATA_LIMIT = 4096


def _without_weights(model):
    """A copy of `model` for shape inference whose large initializers are inputs instead."""
    onnx = onnx_module()
    light = onnx.ModelProto(ir_version=model.ir_version, producer_name=model.producer_name)
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    graph, source = light.graph, model.graph
    graph.name = source.name
    for field in ("node", "input", "output", "value_info", "sparse_initializer"):
        getattr(graph, field).extend(getattr(source, field))
    inputs = {i.name for i in source.input}
    for init in source.initializer:
        if math.prod(init.dims) <= INFER_DATA_LIMIT:
            graph.initializer.append(init)
        elif init.name not in inputs:
            graph.input.append(onnx.helper.make_tensor_value_info(
                init.name, init.data_type, list(init.dims)))
    return light


class Folder:
    """Evaluates nodes whose inputs are all known, keeping every constant tensor by name.

    Args:
        consts: tensor name -> array, initially the initializers.
        shapes: static shapes of activations (for Shape / Size of an activation).
        opsets: the model's opset imports, so each node folds with its own version.
    """

    def __init__(self, consts: dict, shapes: dict, opsets):
        self.consts, self.shapes, self.opsets = consts, shapes, list(opsets)

    def fold(self, node) -> bool:
        """Compute `node` into `consts` if it is constant; returns whether it was."""
        if node.op_type in ("Shape", "Size") and node.input[0] not in self.consts:
            return self._fold_shape(node)
        if node.op_type in RANDOM_OPS or any(a.HasField("g") or a.graphs for a in node.attribute):
            return False
        if not all(name in self.consts for name in node.input if name):
            return False
        outputs = [name for name in node.output if name]
        self._check_size(node, outputs)
        values = _constant(node) if node.op_type == "Constant" else None
        for name, value in zip(outputs, values or self._evaluate(node, outputs)):
            self.consts[name] = np.asarray(value)
        return True

    def _check_size(self, node, outputs) -> None:
        """Refuse to fold a node that would allocate more than MAX_FOLDED_ELEMENTS elements
        at once, judged before evaluating it from its inputs' shapes and values and its
        attributes (`onnx_sizes`), and from inferred output shapes.

        Raises:
            UnsupportedOpError: naming the node and the count (or that its size cannot be
                bounded).
        """
        values = [self.consts[n] if n else None for n in node.input]
        try:
            with np.errstate(all="ignore"):
                bound = onnx_sizes.elements(node, values, attributes(node), self.opset)
        except (TypeError, ValueError, IndexError, KeyError, AttributeError, ArithmeticError):
            bound = None  # malformed inputs or attributes: not evaluated either
        if bound is None:
            raise UnsupportedOpError(f"node {quote(node.name)} ({node.op_type}): glcnn cannot "
                                     "bound the size of computing it from its constant "
                                     "inputs, so it does not fold it")
        inferred = [math.prod(self.shapes[n]) for n in outputs
                    if self.shapes.get(n) and None not in self.shapes[n]]
        size = max(inferred + [bound])
        if size > MAX_FOLDED_ELEMENTS:
            raise UnsupportedOpError(f"node {quote(node.name)} ({node.op_type}) would build a "
                                     f"constant of {size:,} elements (limit "
                                     f"{MAX_FOLDED_ELEMENTS:,})")

    @property
    def opset(self) -> int:
        return next((o.version for o in self.opsets if o.domain in ("", "ai.onnx")), 1)

    def _fold_shape(self, node) -> bool:
        dims = self.shapes.get(node.input[0])
        if dims is None or None in dims:
            return False
        if node.op_type == "Size":
            self.consts[node.output[0]] = np.array(int(np.prod(dims)), np.int64)
            return True
        a = attributes(node)
        start, end = a.get("start", 0), a.get("end", len(dims))
        self.consts[node.output[0]] = np.array(dims[start:end], np.int64)
        return True

    def _evaluate(self, node, outputs) -> list:
        onnx = onnx_module()
        from onnx.reference import ReferenceEvaluator
        h = onnx.helper
        typeless = onnx.TypeProto()
        graph = h.make_graph([node], "fold",
                             [h.make_value_info(n, typeless) for n in node.input if n],
                             [h.make_value_info(n, typeless) for n in outputs])
        model = h.make_model(graph, opset_imports=self.opsets)
        feeds = {n: self.consts[n] for n in node.input if n}
        try:
            return ReferenceEvaluator(model).run(None, feeds)
        except Exception as exc:  # the reference implementation raises anything
            raise UnsupportedOpError(f"node {quote(node.name)} ({node.op_type}): cannot evaluate "
                                     f"it on its constant inputs ({exc})") from None


# Constant's numeric forms, read directly: most exported models (PyTorch's ReLU6 clips, say)
# carry dozens of Constant nodes, and the reference evaluator costs ~0.1 s to import.
_CONSTANT_DTYPES = {"value": None, "value_float": np.float32, "value_floats": np.float32,
                    "value_int": np.int64, "value_ints": np.int64}


def _constant(node) -> list | None:
    """[value] of a Constant node in a numeric form, else None (the evaluator decides)."""
    a = attributes(node)
    if len(a) != 1 or next(iter(a)) not in _CONSTANT_DTYPES:
        return None
    (key, value), = a.items()
    return [np.asarray(value, _CONSTANT_DTYPES[key])]


def fold_graph(model, consts: dict, rounds: int = 8) -> tuple[list, dict, dict]:
    """Fold every constant node of `model`, re-running shape inference while folded
    values (e.g. Pad's pads, computed by a chain onnx's data propagation cannot follow)
    can reveal shapes still unknown.

    Args:
        model: the ModelProto (inputs with a static shape).
        consts: tensor name -> array; initializers in, every folded tensor added.
    Returns:
        (nodes left to convert, tensor name -> dims, tensor name -> element type).
    """
    nodes = list(model.graph.node)
    shapes, types = infer(model)
    for _ in range(rounds):
        folder = Folder(consts, shapes, model.opset_import)
        left = [node for node in nodes if not folder.fold(node)]
        folded, nodes = len(left) < len(nodes), left
        if not folded or all(_static(shapes, name) for n in nodes for name in n.output if name):
            break
        shapes, types = infer(_with_constants(model, nodes, consts))
    return nodes, shapes, types


def _static(shapes: dict, name: str) -> bool:
    return name in shapes and None not in shapes[name]


def _with_constants(model, nodes: list, consts: dict):
    """A copy of `model` running only `nodes`, with folded tensors they read as initializers."""
    onnx = onnx_module()
    known = {t.name for t in model.graph.initializer}
    read = {name for node in nodes for name in node.input}
    extra = [onnx.numpy_helper.from_array(np.asarray(consts[name]), name)
             for name in sorted(read & set(consts) - known)]
    graph = onnx.helper.make_graph(nodes, model.graph.name, list(model.graph.input),
                                   list(model.graph.output),
                                   list(model.graph.initializer) + extra)
    return onnx.helper.make_model(graph, opset_imports=list(model.opset_import),
                                  ir_version=model.ir_version)
