"""Channels-last model inputs and outputs held as glcnn's (C, H, W) images (GL-free graph
passes; `fold_layout` runs them all).

An ONNX model converted from TensorFlow (tf2onnx: MTCNN and most Keras exports) takes NHWC
images and transposes them to NCHW in its first node, and transposes its NCHW results back to
NHWC before its outputs. Imported as it is, glcnn holds such an input (1, H, W, C) as the
"channels" H of an atlas of W × C tiles, and runs each Transpose as a pass (MTCNN P-Net at
120×160 on llvmpipe: 0.42 ms of its 5.3 for the input's, 0.19 for its two outputs').

- `fold_input_transposes` takes the input's Transpose out: the input becomes the (C, H, W)
  image the Transpose made, named in meta["channels_last_inputs"], and the arrays given in the
  model's own (1, H, W, C) shape are transposed on the CPU as they are uploaded, as for
  TF.js's channels-last models (glcnn.inputs.channels_last). The input texture then holds an
  ordinary image, which the viewer and GPU pre-processing can write.
- `move_softmax_before_transposes`: Transpose → Softmax becomes Softmax over the same
  values' axis → Transpose (P-Net's face scores: a Softmax over the channels), so that
- `fold_output_transposes` can take out a graph output's Transpose NCHW → NHWC: the output
  stays the (C, H, W) tensor before it, named in meta["channels_last_outputs"] (as ONNX
  sequences held (C, 1, L) are), and `run` transposes it to the model's own (1, H, W, C) as
  it returns it.
- `matmuls_to_convs`: a sequence's MatMul by a constant (tokens on the channels, features along
  W), with its bias, whose result is rearranged to channels last (features on the channels)
  runs as a 1×1 conv on the input rearranged so (PP-OCRv4 rec's attention output projections:
  MatMul 0.8 ms, bias Add and Rearrange passes → a Rearrange and a conv that also takes the
  residual Add, on llvmpipe).
"""

import numpy as np

from ..ops import build_ops
from ..ops.softmax import softmax_axis
from .graph import Graph, Node

NHWC_TO_NCHW = [0, 3, 1, 2]  # the ONNX perm of an input's Transpose taken out
NCHW_TO_NHWC = [0, 2, 3, 1]  # ... and of an output's


def fold_layout(graph: Graph) -> Graph:
    """`fold_input_transposes`, `move_softmax_before_transposes`, `fold_output_transposes`,
    `matmuls_to_convs`, in place; returns `graph`. A TF.js model's graph (meta layout "NHWC",
    its inputs and outputs transposed by glcnn already) is left as it is."""
    if graph.meta.get("layout") == "NHWC":
        return graph
    graph = move_softmax_before_transposes(fold_input_transposes(graph))
    return matmuls_to_convs(fold_output_transposes(graph))


def fold_input_transposes(graph: Graph) -> Graph:
    """For each graph input of own shape (1, H, W, C) (meta onnx_input_shapes) read only by
    Transposes with perm [0, 3, 1, 2] whose outputs are no graph outputs: the input becomes
    (C, H, W), its Transposes go (their readers read the input) and it is listed in
    meta["channels_last_inputs"]. In place; returns `graph`."""
    own = graph.meta.get("onnx_input_shapes", {})
    for name, shape in list(graph.inputs.items()):
        users = graph.consumers(name)
        if (not users or name in graph.outputs or list(own.get(name, ())) != [1, *shape]
                or not all(_nhwc_to_nchw(user, graph) for user in users)):
            continue
        h, w, c = shape
        graph.inputs[name] = (c, h, w)
        for user in users:  # now the identity: it would transpose (C, H, W) to (C, H, W)
            graph.bypass(user)
        graph.meta["channels_last_inputs"] = [*graph.meta.get("channels_last_inputs", ()), name]
    return graph


def _nhwc_to_nchw(node, graph: Graph) -> bool:
    return _transpose(node) == NHWC_TO_NCHW and node.name not in graph.outputs


def _transpose(node) -> list[int] | None:
    """The perm of a plain Transpose node; None for any other node."""
    if node is None or node.op != "Transpose" or node.weights or len(node.inputs) != 1:
        return None
    return [int(p) for p in node.attrs.get("perm", ())]


def move_softmax_before_transposes(graph: Graph) -> Graph:
    """Each Softmax that alone reads a Transpose (perm p, output read once, no graph output)
    runs first instead, over axis p[a] of the Transpose's input for its axis a, the Transpose
    after it keeping the Softmax's name: the same values, in an order that leaves the
    Transpose last (for `fold_output_transposes`). In place; returns `graph`."""
    pairs = [(graph.producer(n.inputs[0]), n) for n in graph.nodes
             if n.op == "Softmax" and len(n.inputs) == 1]
    pairs = [(t, s) for t, s in pairs
             if _transpose(t) and graph.sole_consumer(t.name) is s]
    if not pairs:
        return graph
    shapes = build_ops(graph)[1]
    for transpose, softmax in pairs:
        axis = softmax_axis(int(softmax.attrs.get("axis", -1)), shapes[transpose.name])
        if axis is None:
            continue  # the Softmax's own check names the axis
        moved = graph.fresh(f"{softmax.name}_before_transpose")
        graph.nodes[graph.nodes.index(transpose)] = Node(
            "Softmax", moved, list(transpose.inputs),
            {**softmax.attrs, "axis": _transpose(transpose)[axis]})
        graph.nodes[graph.nodes.index(softmax)] = Node(
            "Transpose", softmax.name, [moved], dict(transpose.attrs))
    return graph


def fold_output_transposes(graph: Graph) -> Graph:
    """For each graph output made by a Transpose with perm [0, 2, 3, 1] of own shape
    (1, H, W, C) (meta onnx_output_shapes) from a node's (C, H, W) result that nothing else
    reads: the Transpose goes, its input's node takes the output's name, listed in
    meta["channels_last_outputs"] and ["channels_last_tensors"] (glcnn diff compares it with
    onnxruntime's NHWC tensor). In place; returns `graph`."""
    own, shapes = graph.meta.get("onnx_output_shapes", {}), None
    for name in list(graph.outputs):
        transpose = graph.producer(name)
        if _transpose(transpose) != NCHW_TO_NHWC:
            continue
        source = graph.producer(transpose.inputs[0])
        if source is None or graph.sole_consumer(source.name) is not transpose \
                or graph.outputs.count(name) != 1 or len(own.get(name, ())) != 4:
            continue
        shapes = shapes or build_ops(graph)[1]  # once: the folds leave the sources' shapes
        c, h, w = shapes[source.name]
        if list(own[name]) != [1, h, w, c]:
            continue
        graph.nodes.remove(transpose)
        source.name = name
        for key in ("channels_last_outputs", "channels_last_tensors"):
            graph.meta[key] = [*graph.meta.get(key, ()), name]
    return graph


def _channels_last(attrs: dict, rows: int, features: int) -> bool:
    """Whether Rearrange `attrs` take a (rows, 1, features) tensor to (features, 1, rows)."""
    return (list(attrs.get("shape", ())) == [features, 1, rows]
            and list(attrs.get("dims", ())) == [features, rows]
            and list(attrs.get("strides", ())) == [1, features]
            and not attrs.get("offset") and "dims2" not in attrs)


def matmuls_to_convs(graph: Graph) -> Graph:
    """Each MatMul of a (M, 1, K) tensor (rows on the channels: a_axes = out_axes = [1, 0, 2]) by
    a constant B (K, N), possibly then an Add of a constant bias (1, 1, N), read only by a
    Rearrange to (N, 1, M) (channels last) becomes a Rearrange of its input to (K, 1, M) and a
    1×1 Conv with weights Bᵀ and that bias, named as the Rearrange was: the same sums. In
    place; returns `graph`."""
    matmuls = [n for n in graph.nodes if n.op == "MatMul" and len(n.inputs) == 1
               and list(n.weights) == ["B"] and n.weights["B"].ndim == 2
               and n.attrs == {"a_axes": [1, 0, 2], "out_axes": [1, 0, 2]}]
    if not matmuls:
        return graph
    shapes = build_ops(graph)[1]
    for matmul in matmuls:
        rows, one, k = shapes[matmul.inputs[0]]
        b = matmul.weights["B"]
        bias, user = graph.sole_consumer(matmul.name), None
        if bias is not None and bias.op == "Add" and len(bias.inputs) == 1 and not bias.attrs \
                and list(bias.weights) == ["B"] and bias.weights["B"].shape == (1, 1, b.shape[1]):
            user = graph.sole_consumer(bias.name)
        else:
            user, bias = bias, None
        if one != 1 or b.shape[0] != k or user is None or user.op != "Rearrange" \
                or user.weights or not _channels_last(user.attrs, rows, b.shape[1]):
            continue
        rearranged = graph.fresh(f"{matmul.inputs[0]}/channels_last")
        graph.nodes[graph.nodes.index(matmul)] = Node(
            "Rearrange", rearranged, list(matmul.inputs),
            {"shape": [k, 1, rows], "dims": [k, rows], "strides": [1, k], "offset": 0})
        weights = {"W": np.ascontiguousarray(b.T[:, :, None, None])}
        if bias is not None:
            weights["B"] = np.ascontiguousarray(bias.weights["B"].reshape(-1))
            graph.nodes.remove(bias)
        graph.nodes[graph.nodes.index(user)] = Node(
            "Conv", user.name, [rearranged],
            {"kernel_shape": [1, 1], "strides": [1, 1], "pads": [0, 0, 0, 0],
             "dilations": [1, 1], "group": 1}, weights)
    return graph
