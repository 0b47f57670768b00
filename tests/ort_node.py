"""Run one ONNX node on onnxruntime: the independent implementation glcnn.graph.reference is
checked against (GL-free)."""

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ort.set_default_logger_severity(3)  # ORT warns about shapes its own inference gets wrong


def run_node(op: str, xs, attrs=None, constants=(), opset: int = 19) -> np.ndarray:
    """`op` applied to the (C, H, W) arrays `xs` as a batch of 1; returns (C', H', W').

    `constants` are the node's further inputs in order, as initializers (None = omitted).
    """
    names = [f"x{i}" for i in range(len(xs))]
    inits, inputs = [], list(names)
    for i, value in enumerate(constants):
        inputs.append("" if value is None else f"k{i}")
        if value is not None:
            inits.append(numpy_helper.from_array(np.asarray(value), f"k{i}"))
    node = helper.make_node(op, inputs, ["y"], **(attrs or {}))
    graph = helper.make_graph(
        [node], op, [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, *np.shape(x)])
                     for n, x in zip(names, xs)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {n: np.asarray(x, np.float32)[None] for n, x in zip(names, xs)}
    return session.run(None, feeds)[0][0]
