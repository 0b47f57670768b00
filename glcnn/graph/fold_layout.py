"""Channels-last model inputs held as glcnn's (C, H, W) images (a GL-free graph pass).

An ONNX model converted from TensorFlow (tf2onnx: MTCNN and most Keras exports) takes NHWC
images and transposes them to NCHW in its first node. Imported as it is, glcnn holds such an
input (1, H, W, C) as the "channels" H of an atlas of W × C tiles, and runs the Transpose as a
pass over that unwieldy layout (MTCNN P-Net at 120×160 on llvmpipe: 0.42 of its 5.3 ms).
`fold_input_transposes` takes the Transpose out: the input becomes the (C, H, W) image the
Transpose made, named in meta["channels_last_inputs"], and the arrays given in the model's own
(1, H, W, C) shape are transposed on the CPU as they are uploaded, as for TF.js's
channels-last models (glcnn.inputs.channels_last). The input texture then holds an ordinary
image, which the viewer and GPU pre-processing can write.
"""

from .graph import Graph

NHWC_TO_NCHW = [0, 3, 1, 2]  # the ONNX perm of the Transpose taken out


def fold_input_transposes(graph: Graph) -> Graph:
    """For each graph input of own shape (1, H, W, C) (meta onnx_input_shapes) read only by
    Transposes with perm [0, 3, 1, 2] whose outputs are no graph outputs: the input becomes
    (C, H, W), its Transposes go (their readers read the input) and it is listed in
    meta["channels_last_inputs"]. In place; returns `graph`. A TF.js model's graph (meta
    layout "NHWC", inputs (C, H, W) already) is left as it is."""
    if graph.meta.get("layout") == "NHWC":
        return graph
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
    return (node.op == "Transpose" and not node.weights and len(node.inputs) == 1
            and [int(p) for p in node.attrs.get("perm", ())] == NHWC_TO_NCHW
            and node.name not in graph.outputs)
