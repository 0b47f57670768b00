"""Op registry: one module per op family, each registering ONNX op types.

Importing this package imports every op module, which fills `REGISTRY`.
"""

from ..errors import quote
from ..limits import check_atlas
from . import (  # noqa: F401  (registration)
    activation,
    batchnorm,
    binary,
    concat,
    conv,
    depth_to_space,
    flatten,
    gemm,
    instancenorm,
    layernorm,
    matmul,
    pad,
    pool,
    rearrange,
    reduce,
    resize,
    slice,
    softmax,
    transpose,
)
from .base import REGISTRY, Op, make_op, register


def build_ops(graph) -> tuple[list[Op], dict[str, tuple]]:
    """Validate `graph`, instantiate an op per node and infer every tensor's shape.

    Returns:
        (ops in graph order, tensor name -> (C, H, W)).
    Raises:
        GraphError, UnsupportedOpError, WeightError, ShapeError: naming the layer.
        TextureSizeError: a layer's output no GL texture could hold (checked before the
            next op looks at it, so no hostile size makes later checks loop for long).
    """
    graph.validate()
    shapes = {name: tuple(int(v) for v in s) for name, s in graph.inputs.items()}
    ops = []
    for node in graph.nodes:
        op = make_op(node, [shapes[t] for t in node.inputs])
        shapes[node.name] = op.output_shape()
        check_atlas(shapes[node.name], f"output of layer {quote(node.name)} ({node.op})")
        ops.append(op)
    return ops, shapes


__all__ = ["REGISTRY", "Op", "build_ops", "make_op", "register"]
