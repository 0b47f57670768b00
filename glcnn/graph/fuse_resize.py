"""A nearest upscale by whole factors read by an Add, in the Add's pass (a GL-free graph pass).

A feature pyramid's top-down path (PP-OCRv4 det's and DBNet's, FPN's) adds each level to the
level above it upscaled 2× nearest: Add(x, Resize(u)). The Resize pass writes the large tensor
only for the Add to read it once (PP-OCRv4 det at 192×384: 1.0 ms for its 96 channels at
48×96). `fuse_upsampled_adds` takes it out: the Add reads u itself at (y div ky, x div kx)
(attrs["upsample"]: the Resize's op and attributes; glcnn/ops/binary.py, binary.glsl
OTHER_UPSAMPLE), the reference evaluates the Resize on the way, and training sends the Add's
gradient to u through the Resize's gradient pass, as it did before.
"""

from ..ops import build_ops
from .graph import Graph

RESIZES = ("Resize", "Upsample")  # also what glcnn/train/backward.py trains


def fuse_upsampled_adds(graph: Graph) -> Graph:
    """Each Add of two tensors (nothing fused into it) where one is a Resize or Upsample that
    only this Add reads, a nearest upscale by whole factors (Resize.integer_upscale) to the
    other's shape: the Add reads the Resize's input with attrs["upsample"] = {"op": the
    Resize's op, **its attributes}, as its second input; the Resize goes. In place; returns
    `graph`."""
    resizes = {n.name: n for n in graph.nodes if n.op in RESIZES}
    adds = [n for n in graph.nodes if n.op == "Add" and len(n.inputs) == 2 and not n.attrs
            and not n.weights and any(t in resizes for t in n.inputs)]
    if not adds:
        return graph
    ops, shapes = build_ops(graph)
    upscales = {op.node.name: op.integer_upscale() for op in ops if op.node.name in resizes}
    for add in adds:
        for k in (1, 0):
            resize = resizes.get(add.inputs[k])
            other = add.inputs[1 - k]
            if (resize is None or graph.sole_consumer(resize.name) is not add
                    or upscales[resize.name] is None or shapes[other] != shapes[resize.name]):
                continue
            add.inputs = [other, resize.inputs[0]]
            add.attrs = {"upsample": {"op": resize.op, **resize.attrs}}
            graph.nodes.remove(resize)
            break
    return graph
