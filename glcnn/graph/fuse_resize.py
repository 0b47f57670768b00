"""A nearest upscale by whole factors read by an Add or a Conv, in that op's pass (GL-free graph
passes).

A feature pyramid's top-down path (PP-OCRv4 det's and DBNet's, FPN's) adds each level to the
level above it upscaled 2× nearest: Add(x, Resize(u)). The Resize pass writes the large tensor
only for the Add to read it once (PP-OCRv4 det at 192×384: 1.0 ms for its 96 channels at
48×96). `fuse_upsampled_adds` takes it out: the Add reads u itself at (y div ky, x div kx)
(attrs["upsample"]: the Resize's op and attributes; glcnn/ops/binary.py, binary.glsl
OTHER_UPSAMPLE), the reference evaluates the Resize on the way, and training sends the Add's
gradient to u through the Resize's gradient pass, as it did before.

A decoder that upscales, then convolves (ESRGAN's ×4 tail: 48 channels from 128² to 512² for a
3×3 conv to RGB; nearest-upsample autoencoders) pays a pass writing the large tensor and, on
llvmpipe, a copy of it into the conv's input buffer. `fuse_upsampled_convs` has each Conv read
u at (y div ky, x div kx) itself (attrs["input_upsample"], glcnn/ops/conv.py); the reference
evaluates the Resize on the way, and a Trainer runs the two apart again (glcnn/train/backward.py
`unfuse_upsamples`).
"""

from ..ops import build_ops
from ..ops.resize import RESIZES, fused_upscale
from .graph import Graph


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
            add.attrs = {"upsample": fused_upscale(resize)}
            graph.nodes.remove(resize)
            break
    return graph


# Conv attributes that already change how it reads its input: those convs keep the Resize.
_READS = ("input_upsample", "input_mean", "input_gate")


def fuse_upsampled_convs(graph: Graph) -> Graph:
    """Each Resize or Upsample, a nearest upscale by whole factors (Resize.integer_upscale) that
    is no graph output and only Convs read, each once as its data input and none already
    reading it otherwise (`_READS`): the Convs read its input with attrs["input_upsample"] =
    {"op": the Resize's op, **its attributes} and the Resize goes. Convs DENSE or DEPTHWISE
    only (the generic form gathers lane by lane). In place; returns `graph`."""
    candidates = []  # (resize, its readers): those the graph's structure allows, before ops
    for resize in (n for n in graph.nodes if n.op in RESIZES and n.name not in graph.outputs):
        users = graph.consumers(resize.name)
        if users and all(u.op == "Conv" and u.inputs[0] == resize.name
                         and u.inputs.count(resize.name) == 1
                         and not any(u.attrs.get(k) for k in _READS) for u in users):
            candidates.append((resize, users))
    if not candidates:
        return graph
    ops = {op.node.name: op for op in build_ops(graph)[0]}
    for resize, users in candidates:
        if ops[resize.name].integer_upscale() is None or \
                not all(ops[u.name].variant() in ("DENSE", "DEPTHWISE") for u in users):
            continue
        for user in users:
            user.inputs = [resize.inputs[0], *user.inputs[1:]]
            user.attrs = {**user.attrs, "input_upsample": fused_upscale(resize)}
        graph.nodes.remove(resize)
    return graph
