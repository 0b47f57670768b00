"""A GL-free description of a network: named tensors, ops with attributes and numpy weights.

Importers and the builder produce a `Graph`; passes in `glcnn.passes` rewrite it; a
`Pipeline` compiles it onto a GL context. Tensors are (C, H, W) float32 (batch 1).
"""

from dataclasses import dataclass, field

import numpy as np

from .errors import GraphError


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

    def __repr__(self):
        extra = f" +{self.attrs['activation']['op']}" if "activation" in self.attrs else ""
        return f"{self.op}{extra}({', '.join(self.inputs)}) -> {self.name}"


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
        raise GraphError(f"graph has no layer named {name!r}")

    def consumers(self, tensor: str) -> list[Node]:
        return [n for n in self.nodes if tensor in n.inputs]

    def validate(self) -> None:
        """Check names are unique, every input is defined before use, and outputs exist.

        Raises:
            GraphError: naming the offending layer and tensor.
        """
        defined = set()
        for name, shape in self.inputs.items():
            if len(shape) != 3 or any(int(v) <= 0 for v in shape):
                raise GraphError(f"graph input {name!r} has shape {shape}; expected (C, H, W) > 0")
            defined.add(name)
        for node in self.nodes:
            missing = [t for t in node.inputs if t not in defined]
            if missing:
                raise GraphError(
                    f"layer {node.name!r} ({node.op}) reads {missing} before they are produced "
                    "(dangling edge or nodes not in topological order)"
                )
            if node.name in defined:
                raise GraphError(f"tensor name {node.name!r} is defined twice")
            defined.add(node.name)
        for name in self.outputs:
            if name not in defined:
                raise GraphError(f"graph output {name!r} is not produced by any layer")

    def __repr__(self):
        lines = [f"Graph(inputs={self.inputs}, outputs={self.outputs})"]
        lines += [f"  {node!r}" for node in self.nodes]
        return "\n".join(lines)
