"""A GL-free description of a network: named tensors, ops with attributes and numpy weights.

Importers and the builder produce a `Graph`; passes in `glcnn.graph.passes` rewrite it; a
`Pipeline` compiles it onto a GL context. Tensors are (C, H, W) float32 (batch 1).
"""

import re
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError, WeightError, quote
from ..limits import MAX_TEXTURE_SIDE, check_atlas

# Integer attributes that size loops or textures: bounded so that no hostile value can make
# shape inference loop or allocate for long before the texture limits are checked.
SPATIAL_ATTRS = ("kernel_shape", "strides", "dilations", "pads", "output_padding",
                 "blocksize", "group")
FLOAT32_MAX = float(np.finfo(np.float32).max)
OP_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")  # ONNX op types and glcnn's own


@dataclass
class Node:
    """One op application.

    Args:
        op: the ONNX op type, e.g. "Conv".
        name: unique layer name; also the name of the tensor it produces.
        inputs: names of the tensors it reads, in the op's order.
        attrs: plain JSON-able attributes (ints, floats, strings, lists, dicts).
        weights: named numpy arrays (ONNX input names: "W", "B", "scale", ...).
    """

    op: str
    name: str
    inputs: list[str]
    attrs: dict = field(default_factory=dict)
    weights: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def output(self) -> str:
        return self.name

    @property
    def residual_after_activation(self) -> bool:
        """Whether the fused residual input is added after the activation (attrs["residual"]
        is RESIDUAL_AFTER: y = act(conv) + r, YOLO's and CSP bottlenecks) rather than
        before it (True: y = act(conv + r), ResNet's)."""
        return self.attrs.get("residual") == RESIDUAL_AFTER

    @property
    def label(self) -> str:
        """The op with what was fused into it, in execution order: "Conv+Add+Relu",
        "Conv+Silu+Add" for a residual added after the activation,
        "LeakyRelu+Conv" for an activation the conv applies to its input, "Mean+Conv" or
        "Mul+Conv" for a conv reading its input's spatial mean or its input times a gate
        (glcnn.graph.fuse_gate), "Resize+Add" and "Resize+Conv" for an Add reading an operand
        or a conv its input upscaled (glcnn.graph.fuse_resize), "Conv+dRelu" for a gradient
        times an activation's derivative (glcnn/train/backward.py)."""
        a = self.attrs
        pre, act, grad = a.get("input_activation"), a.get("activation"), a.get("output_grad")
        return (("Resize+" if a.get("input_upsample") else "")
                + (f"{_fused_op(pre)}+" if pre else "") + ("Mean+" if a.get("input_mean") else "")
                + ("Mul+" if a.get("input_gate") else "")
                + ("Resize+" if a.get("upsample") else "") + self.op
                + ("+Add" if a.get("residual") and not self.residual_after_activation else "")
                + (f"+d{_fused_op(grad)}" if grad else "")
                + (f"+{_fused_op(act)}" if act else "")
                + ("+Add" if self.residual_after_activation else "")
                + ("+Affine" if a.get("affine") else ""))

    def __repr__(self):
        return f"{self.label}({', '.join(self.inputs)}) -> {self.name}"


# attrs["residual"] of a node whose residual input is added after its activation (True: before)
RESIDUAL_AFTER = "after"


def _fused_op(part) -> str:
    """The op name of a fused activation attribute ({"op": ..., params}); as given if the
    attribute is malformed (ops refuse it when they check the node)."""
    return str(part.get("op")) if isinstance(part, dict) else str(part)


@dataclass
class Graph:
    """A DAG of nodes in topological order.

    Args:
        inputs: graph input name -> (C, H, W).
        nodes: nodes, each only reading graph inputs or earlier nodes.
        outputs: names of the tensors the model returns.
        meta: JSON-able facts for tools, e.g. {"input_range": [0, 1], "output_range": [0, 1]}
            (how `glcnn run` maps images to tensors and back).
    """

    inputs: dict[str, tuple[int, int, int]]
    nodes: list[Node]
    outputs: list[str]
    meta: dict = field(default_factory=dict)

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise GraphError(f"graph has no layer named {quote(name)}")

    def consumers(self, tensor: str) -> list[Node]:
        return [n for n in self.nodes if tensor in n.inputs]

    def producer(self, tensor: str) -> Node | None:
        """The node making `tensor` (None for a graph input)."""
        return next((n for n in self.nodes if n.name == tensor), None)

    def sole_consumer(self, tensor: str) -> Node | None:
        """The one node reading `tensor`, if exactly one does (once) and it is no output."""
        users = self.consumers(tensor)
        if len(users) != 1 or tensor in self.outputs or users[0].inputs.count(tensor) != 1:
            return None
        return users[0]

    def absorb(self, host: Node, absorbed: Node) -> None:
        """Remove `absorbed` (whose only input from `host` is host's sole use); `host` takes
        its name, so every reader of the absorbed tensor, and the outputs, stay valid."""
        self.nodes.remove(absorbed)
        host.name = absorbed.name

    def bypass(self, node: Node) -> None:
        """Remove `node` (of one tensor input, no graph output), its readers reading its
        input instead: for a node that leaves its input's values as they are."""
        for user in self.consumers(node.name):
            user.inputs = [node.inputs[0] if t == node.name else t for t in user.inputs]
        self.nodes.remove(node)

    def fresh(self, name: str) -> str:
        """`name`, with a numeric suffix if a tensor of the graph already has it."""
        taken = set(self.inputs) | {n.name for n in self.nodes}
        candidates = (f"{name}{i or ''}" for i in range(len(taken) + 1))
        return next(c for c in candidates if c not in taken)

    def validate(self) -> None:
        """Check the graph is well formed, before any op looks at it.

        Inputs are (C, H, W) of positive ints whose texture could exist; names are unique
        non-empty strings; each node reads at least one tensor, only graph inputs or earlier
        nodes (else: a dangling edge, or a cycle / nodes out of topological order); weights
        are real-valued numpy arrays; the sizing attributes (SPATIAL_ATTRS) are ints of
        magnitude ≤ MAX_TEXTURE_SIDE; outputs exist; the meta keys tools read have their
        documented form (e.g. input_range: [lo, hi] finite with lo < hi).

        Raises:
            GraphError: naming the offending layer and tensor.
            TextureSizeError: an input too large for any GL texture.
            WeightError: a weight that is not a real-valued array.
        """
        defined = set(self._check_inputs())
        produced_later = {n.name for n in self.nodes
                          if isinstance(n, Node) and isinstance(n.name, str)}
        for node in self.nodes:
            _check_node(node)
            missing = [t for t in node.inputs if t not in defined]
            if missing:
                later = [t for t in missing if t in produced_later]
                raise GraphError(
                    f"layer {quote(node.name)} ({node.op}) reads {quote(missing)}, which "
                    + ("a later layer produces: a cycle, or nodes not in topological order"
                       if later else "no graph input or layer produces (a dangling edge)"))
            if node.name in defined:
                raise GraphError(f"tensor name {quote(node.name)} is defined twice (layer "
                                 f"{quote(node.name)}, {node.op})")
            defined.add(node.name)
        self._check_outputs(defined)
        _check_meta(self.meta)

    def _check_inputs(self) -> list[str]:
        if not isinstance(self.inputs, dict) or not self.inputs:
            raise GraphError(f"graph inputs {quote(self.inputs)}: expected a non-empty dict "
                             "name -> (C, H, W)")
        for name, shape in self.inputs.items():
            _check_name(name, "graph input")
            if not isinstance(shape, tuple | list) or len(shape) != 3 or \
                    not all(_is_int(v) and v > 0 for v in shape):
                raise GraphError(f"graph input {quote(name)} has shape {quote(shape)}; expected "
                                 "(C, H, W) of positive integers")
            check_atlas(shape, f"graph input {quote(name)}")
        return list(self.inputs)

    def _check_outputs(self, defined: set) -> None:
        if not isinstance(self.outputs, list) or not self.outputs:
            raise GraphError(f"graph outputs {quote(self.outputs)}: expected a non-empty list")
        for name in self.outputs:
            if not isinstance(name, str) or name not in defined:
                raise GraphError(f"graph output {quote(name)} is not produced by any layer")
        if len(set(self.outputs)) != len(self.outputs):
            raise GraphError(f"graph outputs {quote(self.outputs)} name a tensor twice")

    def __repr__(self):
        lines = [f"Graph(inputs={self.inputs}, outputs={self.outputs})"]
        lines += [f"  {node!r}" for node in self.nodes]
        return "\n".join(lines)


def bind_output(nodes: list[Node], source: str, name: str, keep_source: bool) -> bool:
    """Make tensor `source` available under the output name `name`, as every importer must:
    the node making `source` takes the name (its readers follow) unless `keep_source` (the
    name is itself an output) or no node makes it (a graph input); else an exact copy x·1
    named `name` is appended. Returns True if it renamed, so the caller can update its maps."""
    if not keep_source and any(node.name == source for node in nodes):
        for node in nodes:
            node.name = name if node.name == source else node.name
            node.inputs = [name if t == source else t for t in node.inputs]
        return True
    nodes.append(Node("Mul", name, [source], {}, {"B": np.ones(1, np.float32)}))
    return False


def float32(value) -> np.ndarray:
    """`value` as a float32 array. Values beyond float32's range become ±Inf without numpy's
    RuntimeWarning: the ops refuse non-finite weights with an error naming the layer
    (glcnn.ops.base.Op.weight), which is all the user should see."""
    with np.errstate(over="ignore"):
        return np.asarray(value, np.float32)


def _is_int(value) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def _check_name(name, what: str) -> None:
    if not isinstance(name, str) or not name:
        raise GraphError(f"{what} name {quote(name)} must be a non-empty string")


def _check_node(node) -> None:
    """Types of one node's fields, its weights and its sizing attributes."""
    if not isinstance(node, Node):
        raise GraphError(f"graph node {quote(node)} is not a glcnn.graph.Node")
    _check_name(node.name, "layer")
    if not isinstance(node.op, str) or not isinstance(node.attrs, dict) or \
            not isinstance(node.weights, dict):
        raise GraphError(f"layer {quote(node.name)}: op {quote(node.op)} must be a string, "
                         "attrs and weights dicts")
    if not OP_TYPE.match(node.op):  # so that messages may print it bare
        raise GraphError(f"layer {quote(node.name)}: op type {quote(node.op)} is not an "
                         "identifier")
    if not isinstance(node.inputs, list) or not node.inputs or \
            not all(isinstance(t, str) for t in node.inputs):
        raise GraphError(f"layer {quote(node.name)} ({node.op}): inputs {quote(node.inputs)} "
                         "must be a non-empty list of tensor names")
    for key, w in node.weights.items():
        if not isinstance(w, np.ndarray) or w.dtype.kind not in "biuf":
            raise WeightError(f"layer {quote(node.name)} ({node.op}): weight {quote(key)} is "
                              f"{type(w).__name__} {getattr(w, 'dtype', '')}; expected a real "
                              "numeric numpy array")
    for key in SPATIAL_ATTRS:  # Rearrange's strides step through elements: it bounds them
        if key in node.attrs and not (node.op == "Rearrange" and key == "strides"):
            _check_sizing_attr(node, key, node.attrs[key])


def _check_sizing_attr(node, key: str, value) -> None:
    values = value if isinstance(value, list | tuple) else [value]
    if len(values) > 16 or not all(_is_int(v) and abs(v) <= MAX_TEXTURE_SIDE for v in values):
        raise GraphError(f"layer {quote(node.name)} ({node.op}): attribute {key}={quote(value)} "
                         f"must be integers of magnitude at most {MAX_TEXTURE_SIDE}")


def _numbers(value, count=None) -> bool:
    """Whether `value` is a list of numbers within float32's range (of length `count` if
    given): no NaN, Inf, or a JSON integer of 400 digits."""
    return isinstance(value, list | tuple) and (count is None or len(value) == count) and \
        all(isinstance(v, int | float) and not isinstance(v, bool) and abs(v) <= FLOAT32_MAX
            for v in value)


def _meta_ok(key: str, value) -> bool:
    if key in ("input_range", "output_range"):
        return _numbers(value, 2) and value[0] < value[1]
    if key in ("mean", "std"):
        return _numbers(value) and (key == "mean" or all(v != 0 for v in value))
    if key in ("onnx_input_shapes", "onnx_output_shapes"):
        return isinstance(value, dict) and all(
            isinstance(dims, list | tuple) and all(_is_int(d) and d >= 0 for d in dims)
            for dims in value.values())
    if key in ("channels_last_outputs", "channels_last_tensors",  # ONNX rank-3 (C, 1, L)
               "channels_last_inputs"):  # ONNX NHWC images held (C, H, W): fold_layout.py
        return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
    if key == "channel_order":
        return value in ("rgb", "bgr")
    if key == "u8_ranges":  # tensor name -> [lows, highs], one number per channel
        return isinstance(value, dict) and all(
            isinstance(r, list | tuple) and len(r) == 2 and _numbers(r[0]) and _numbers(r[1])
            and len(r[0]) == len(r[1]) for r in value.values())
    return True


def _check_meta(meta) -> None:
    """The meta keys tools read ("input_range", "mean", ...) must have their documented form."""
    if not isinstance(meta, dict):
        raise GraphError(f"graph meta {quote(meta)} must be a dict")
    for key, value in meta.items():
        if not _meta_ok(key, value):
            raise GraphError(f"graph meta {key}={quote(value)} is malformed (e.g. input_range: "
                             "[lo, hi] with lo < hi; mean/std: lists of numbers; "
                             "channel_order: 'rgb' or 'bgr'; u8_ranges: tensor name -> "
                             "[lows, highs])")
