"""Define a model in code, PyTorch-style, and load a PyTorch `state_dict` saved as `.npz`.

    b = Builder()
    x = b.input("x", (3, 32, 32))
    h = b.conv(x, 64, 4, stride=2, padding=1, activation="Relu", name="enc1")
    y = b.conv_transpose(h, 3, 4, stride=2, padding=1, activation="Sigmoid", name="dec")
    graph = b.build([y], weights="autoencoder.npz")   # keys "enc1.weight", "enc1.bias", ...

Layers get PyTorch-like default initial weights (seeded), so a graph runs before any
weights are loaded. Layer names double as the `state_dict` prefixes.
"""

import math
from pathlib import Path

import numpy as np

from ..errors import WeightError, quote
from ..npy import read_state_dict
from ..ops import make_op
from .graph import Graph, Node, float32

# PyTorch state_dict suffix -> glcnn (ONNX) weight name, per op type.
TORCH_NAMES = {
    "Conv": {"weight": "W", "bias": "B"},
    "ConvTranspose": {"weight": "W", "bias": "B"},
    "BatchNormalization": {"weight": "scale", "bias": "B", "running_mean": "mean",
                           "running_var": "var"},
    "PRelu": {"weight": "slope"},
}
_IGNORED = ("num_batches_tracked",)


def _pair(v) -> list[int]:
    return [int(v), int(v)] if np.isscalar(v) else [int(e) for e in v]


class Builder:
    """Accumulates nodes; every method returns the name of the tensor it produces.

    Args:
        seed: seed of the default initial weights.
    """

    def __init__(self, seed: int = 0):
        self.inputs: dict[str, tuple] = {}
        self.nodes: list[Node] = []
        self.shapes: dict[str, tuple] = {}
        self.rng = np.random.default_rng(seed)

    def input(self, name: str, shape) -> str:
        """Declare a graph input of shape (C, H, W)."""
        self.inputs[name] = self.shapes[name] = tuple(int(v) for v in shape)
        return name

    def _add(self, op, inputs, name, attrs=None, weights=None) -> str:
        name = name or f"{op.lower()}{len(self.nodes)}"
        node = Node(op, name, list(inputs), attrs or {}, weights or {})
        self.shapes[name] = make_op(node, [self.shapes[t] for t in inputs]).output_shape()
        self.nodes.append(node)
        return name

    def _uniform(self, shape, fan_in):
        bound = 1.0 / math.sqrt(fan_in)  # PyTorch's default conv init range
        return self.rng.uniform(-bound, bound, shape).astype(np.float32)

    def conv(self, x, out_channels, kernel, stride=1, padding=0, dilation=1, groups=1,
             bias=True, activation=None, name=None) -> str:
        """nn.Conv2d. `padding` is an int, (ph, pw), or ONNX (top, left, bottom, right)."""
        kh, kw = _pair(kernel)
        cin = self.shapes[x][0]
        w = self._uniform((out_channels, cin // groups, kh, kw), cin // groups * kh * kw)
        weights = {"W": w} | ({"B": self._uniform(out_channels, w[0].size)} if bias else {})
        attrs = {"strides": _pair(stride), "pads": _pads(padding), "dilations": _pair(dilation),
                 "group": groups} | _activation(activation)
        return self._add("Conv", [x], name, attrs, weights)

    def conv_transpose(self, x, out_channels, kernel, stride=1, padding=0, output_padding=0,
                       dilation=1, groups=1, bias=True, activation=None, name=None) -> str:
        """nn.ConvTranspose2d (same arguments and output size)."""
        kh, kw = _pair(kernel)
        cin = self.shapes[x][0]
        w = self._uniform((cin, out_channels // groups, kh, kw), out_channels // groups * kh * kw)
        weights = {"W": w} | ({"B": self._uniform(out_channels, w[0].size)} if bias else {})
        attrs = {"strides": _pair(stride), "pads": _pads(padding), "dilations": _pair(dilation),
                 "group": groups, "output_padding": _pair(output_padding)} | _activation(activation)
        return self._add("ConvTranspose", [x], name, attrs, weights)

    def batchnorm(self, x, eps=1e-5, name=None) -> str:
        """nn.BatchNorm2d in eval mode."""
        c = self.shapes[x][0]
        ones, zeros = np.ones(c, np.float32), np.zeros(c, np.float32)
        weights = {"scale": ones, "B": zeros, "mean": zeros.copy(), "var": ones.copy()}
        return self._add("BatchNormalization", [x], name, {"epsilon": eps}, weights)

    def activation(self, x, op: str, name=None, **attrs) -> str:
        """A standalone activation by ONNX name ("Relu", "LeakyRelu", alpha=0.2, ...)."""
        weights = {}
        if op == "PRelu":
            weights["slope"] = np.full(self.shapes[x][0], 0.25, np.float32)
        return self._add(op, [x], name, attrs, weights)

    def add(self, a, b, name=None) -> str:
        return self._add("Add", [a, b], name)

    def mul(self, a, b, name=None) -> str:
        return self._add("Mul", [a, b], name)

    def crop(self, x, top=0, bottom=0, left=0, right=0, name=None) -> str:
        """Cropping2D: remove rows/columns from each side."""
        _, h, w = self.shapes[x]
        attrs = {"starts": [top, left], "ends": [h - bottom, w - right], "axes": [2, 3]}
        return self._add("Slice", [x], name, attrs)

    def build(self, outputs, weights=None, meta=None) -> Graph:
        """The Graph producing `outputs`; `weights` (dict or .npz path) as in load_state_dict."""
        graph = Graph(dict(self.inputs), list(self.nodes), list(outputs), dict(meta or {}))
        graph.validate()
        if weights is not None:
            load_state_dict(graph, weights)
        return graph


def _pads(padding) -> list[int]:
    p = _pair(padding) if np.isscalar(padding) or len(padding) == 2 else list(padding)
    return p + p if len(p) == 2 else p


def _activation(op) -> dict:
    return {"activation": {"op": op}} if op else {}


def load_state_dict(graph: Graph, state, strict: bool = True) -> Graph:
    """Copy PyTorch-named weights ("layer.weight", "bn.running_var", ...) into `graph`.

    Args:
        state: a dict name -> array, or the path of an `.npz` (loaded with
            allow_pickle=False).
        strict: require that every weight of the graph is given and every key is used.
    Raises:
        WeightError: naming the key, and both shapes on a mismatch.
        ModelFileError: if the file cannot be read, or is a glcnn native model (open that
            with `glcnn.load`).
    """
    nodes = {n.name: n for n in graph.nodes}
    if not isinstance(state, dict):
        state = _read_npz(state, nodes, strict)
    used = set()
    for key, value in state.items():
        layer, _, suffix = str(key).rpartition(".")
        if suffix in _IGNORED:
            continue
        node = nodes.get(layer)
        target = TORCH_NAMES.get(node.op, {}).get(suffix) if node else None
        if target is None:
            if strict:
                raise WeightError(f"weight {quote(key)} matches no layer of the graph "
                                  f"(layers: {', '.join(nodes)})")
            continue
        old = node.weights.get(target)
        value = _float_array(key, value)
        if old is not None and np.shape(old) != value.shape:
            raise WeightError(f"weight {quote(key)}: file has shape {value.shape}, layer "
                              f"{quote(layer)} ({node.op}) expects {np.shape(old)}")
        node.weights[target] = value
        used.add((layer, target))
    missing = [f"{n.name}.{k}" for n in graph.nodes for k in n.weights if (n.name, k) not in used
               and n.op in TORCH_NAMES]
    if strict and missing:
        raise WeightError(f"weights missing for {', '.join(missing)}")
    return graph


def _float_array(key, value) -> np.ndarray:
    """`value` as float32, or WeightError naming `key`."""
    try:
        return float32(value)
    except (ValueError, TypeError) as exc:
        raise WeightError(f"weight {quote(key)} is not an array of numbers ({exc})") from None


def _read_npz(path, nodes: dict, strict: bool) -> dict:
    """The arrays of a state_dict .npz, nothing unpickled; each member's header is compared
    with its layer's weight before any data is read.

    Raises:
        ModelFileError: naming the file; for a native model, saying to use glcnn.load.
        WeightError: naming the file, the member and both shapes (or the layers, for a
            member of no layer when `strict`).
    """
    def check(headers):
        for key, (shape, _) in headers.items():
            layer, _, suffix = key.rpartition(".")
            node = nodes.get(layer)
            target = TORCH_NAMES.get(node.op, {}).get(suffix) if node else None
            if target is None and strict and suffix not in _IGNORED:
                raise WeightError(f"{path}: member {quote(key)} matches no layer of the graph "
                                  f"(layers: {quote(', '.join(nodes), 200)})")
            old = node.weights.get(target) if target else None
            if old is not None and np.shape(old) != shape:
                raise WeightError(f"{path}: member {quote(key)} has shape {shape} in its "
                                  f"header, layer {quote(layer)} ({node.op}) expects "
                                  f"{np.shape(old)}")
    return read_state_dict(Path(path), check)
