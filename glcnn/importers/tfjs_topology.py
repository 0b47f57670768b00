"""The topology of a TF.js layers model: Keras 2 Sequential and Functional configs as
layer calls in dependency order (no weights, no GL).

`modelTopology` is a `{"class_name", "config"}` pair, or the Python converter's
`{"keras_version", "backend", "model_config": {...}}` wrapper around one. A Sequential's
config is `{"name", "layers": [...]}` (or a bare list); its first layer carries
`batch_input_shape`, from which the InputLayer "<first layer>_input" is made, as Keras and
TF.js name it. A Functional ("Model") config lists layers with `inbound_nodes`
`[[[layer, node, tensor, kwargs], ...]]` and `input_layers` / `output_layers` refs.
"""

from dataclasses import dataclass

from ..errors import ModelFileError, UnsupportedOpError, quote
from ..graph.graph import OP_TYPE


@dataclass
class Call:
    """One layer of the topology: Keras class, name, config and the layers it reads."""

    cls: str
    name: str
    config: dict
    inputs: list[str]



def parse_topology(topology: dict, filename: str) -> tuple[list[Call], list[str], list[str]]:
    """(layer calls in dependency order, input layer names, output layer names).

    Raises:
        ModelFileError: not a Sequential or Functional config, or malformed.
        UnsupportedOpError: shared layers (called more than once).
    """
    config = topology.get("model_config", topology)
    cls, body = config.get("class_name"), config.get("config")
    if cls == "Sequential":
        return _sequential(body, filename)
    if cls in ("Model", "Functional") and isinstance(body, dict):
        return _functional(body, filename)
    raise ModelFileError(f"{filename}: modelTopology holds a {quote(cls)}; expected a "
                         "Sequential or a Functional ('Model') config")


def _call(layer, filename: str) -> Call:
    if not isinstance(layer, dict) or not isinstance(layer.get("config"), dict) or \
            "class_name" not in layer:
        raise ModelFileError(f"{filename}: layer entry {quote(str(layer)[:80])} needs 'class_name' "
                             "and a 'config' object")
    if not isinstance(layer["class_name"], str) or not OP_TYPE.match(layer["class_name"]):
        raise ModelFileError(f"{filename}: layer class {quote(layer['class_name'])} is not an "
                             "identifier")  # so that messages may print classes bare
    name = layer.get("name") or layer["config"].get("name")
    if not name:
        raise ModelFileError(f"{filename}: a {layer['class_name']} layer has no name")
    return Call(layer["class_name"], str(name), layer["config"], [])


class ConfigError(ModelFileError):
    """A value of a layer config or manifest entry of the wrong form; the importer re-raises
    it as a ModelFileError naming the file and the layer."""


def integers(values, what: str, minimum: int | None = None) -> tuple[int, ...]:
    """A JSON integer or list of integers as a tuple of ints. Floats (3.5) and strings ("8")
    are refused, not converted: a TF.js writer never stores a size that way.

    Raises:
        ConfigError: naming `what`.
    """
    items = list(values) if isinstance(values, list | tuple) else [values]
    if not all(isinstance(v, int) and not isinstance(v, bool) and
               (minimum is None or v >= minimum) for v in items):
        bound = "" if minimum is None else f" ≥ {minimum}"
        raise ConfigError(f"{what} {quote(values)} must be integers{bound}")
    return tuple(items)


def _sequential(body, filename: str):
    layers = body.get("layers") if isinstance(body, dict) else body
    if not isinstance(layers, list) or not layers:
        raise ModelFileError(f"{filename}: the Sequential config has no layers")
    calls = [_call(layer, filename) for layer in layers]
    if calls[0].cls != "InputLayer":
        first = calls[0]
        shape = first.config.get("batch_input_shape")
        if shape is None and first.config.get("input_shape") is not None:
            shape = [None, *first.config["input_shape"]]
        if shape is None:
            raise ModelFileError(f"{filename}: the first layer {quote(first.name)} declares no "
                                 "batch_input_shape, so the model's input size is unknown")
        calls.insert(0, Call("InputLayer", f"{first.name}_input",
                             {"batch_input_shape": shape}, []))
    for previous, call in zip(calls, calls[1:]):
        call.inputs = [previous.name]
    return calls, [calls[0].name], [calls[-1].name]


def _functional(body: dict, filename: str):
    calls = []
    for layer in body.get("layers") or []:
        call = _call(layer, filename)
        call.inputs = _inbound(layer.get("inbound_nodes") or [], call, filename)
        calls.append(call)
    inputs = [_ref(ref, "input_layers", filename)[0] for ref in _refs(body.get("input_layers"))]
    outputs = [_ref(ref, "output_layers", filename)[0]
               for ref in _refs(body.get("output_layers"))]
    if not calls or not inputs or not outputs:
        raise ModelFileError(f"{filename}: the Functional config needs layers, input_layers "
                             "and output_layers")
    return _in_order(calls, filename), inputs, outputs


def _refs(value) -> list:
    """input_layers / output_layers: a list of [name, node, tensor], or one such ref."""
    value = value or []
    return [value] if value and isinstance(value[0], str) else value


def _ref(ref, where: str, filename: str) -> tuple[str, int, int]:
    if not isinstance(ref, list) or len(ref) < 3 or not isinstance(ref[0], str):
        raise ModelFileError(f"{filename}: {where} entry {quote(ref)} is not [layer, node, tensor] "
                             "(a Keras 3 file? glcnn reads the Keras 2 format TF.js writes)")
    return ref[0], int(ref[1]), int(ref[2])


def _inbound(nodes: list, call: Call, filename: str) -> list[str]:
    """Names of the layers `call` reads (each layer's output 0, first call)."""
    if len(nodes) > 1:
        raise UnsupportedOpError(f"{filename}: layer {quote(call.name)} ({call.cls}) is called "
                                 f"{len(nodes)} times; shared layers are not supported")
    refs = [_ref(ref, f"layer {quote(call.name)} inbound_nodes", filename)
            for ref in (nodes[0] if nodes else [])]
    for name, node, tensor in refs:
        if node or tensor:
            raise UnsupportedOpError(f"{filename}: layer {quote(call.name)} reads output "
                                     f"{quote(tensor)} of call {quote(node)} of layer "
                                     f"{quote(name)}; only single-output, single-call layers "
                                     "are supported")
    return [name for name, _, _ in refs]


def _in_order(calls: list[Call], filename: str) -> list[Call]:
    """`calls` sorted so each comes after the layers it reads (stable).

    Raises:
        ModelFileError: a layer reads a layer that is not defined, or a cycle.
    """
    known = {call.name for call in calls}
    for call in calls:
        missing = [name for name in call.inputs if name not in known]
        if missing:
            raise ModelFileError(f"{filename}: layer {quote(call.name)} ({call.cls}) reads "
                                 f"{quote(missing)}, which no layer of the model defines")
    done, ordered, pending = set(), [], list(calls)
    while pending:
        ready = next((c for c in pending if all(i in done for i in c.inputs)), None)
        if ready is None:
            raise ModelFileError(f"{filename}: layers {[c.name for c in pending]} form a cycle")
        pending.remove(ready)
        ordered.append(ready)
        done.add(ready.name)
    return ordered
