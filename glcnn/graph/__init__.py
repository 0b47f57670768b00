"""The model as data, GL-free: `Graph` and `Node`, the optimisation passes, the `Builder`, the
shipped model definitions and the float64 numpy reference every op is tested against.

Knows ops (shapes, weight layouts) but no GL, file format, window or tooling.
"""

from .graph import FLOAT32_MAX, OP_TYPE, Graph, Node, float32

__all__ = ["FLOAT32_MAX", "OP_TYPE", "Graph", "Node", "float32"]
