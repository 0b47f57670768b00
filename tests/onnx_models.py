"""Small ONNX models for the importer tests: hand-built graphs (onnx.helper) and PyTorch
architectures exported with torch.onnx.export. Weights are seeded; nothing is downloaded."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make_model(nodes, inputs: dict, outputs: dict, initializers=None, opset=17):
    """A ModelProto: `inputs`/`outputs` map names to shapes (None: let inference decide)."""
    def info(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
    graph = helper.make_graph(
        nodes, "test", [info(k, v) for k, v in inputs.items()],
        [info(k, v) for k, v in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model


def rand(*shape, seed=0, scale=0.5):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def flatten_gemm():
    """Conv → Relu → x.view(x.size(0), -1) as PyTorch writes it → Gemm (1, 5)."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "W", "B"], ["conv"], pads=[1, 1, 1, 1]),
        n("Relu", ["conv"], ["relu"]),
        n("Shape", ["relu"], ["shape"]),
        n("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, np.int64))),
        n("Gather", ["shape", "zero"], ["batch"], axis=0),
        n("Unsqueeze", ["batch", "axes0"], ["batch1"]),
        n("Cast", ["batch1"], ["batch64"], to=TensorProto.INT64),
        n("Concat", ["batch64", "minus1"], ["target"], axis=0),
        n("Reshape", ["relu", "target"], ["flat"]),
        n("Gemm", ["flat", "fc_W", "fc_B"], ["logits"], transB=1),
    ]
    weights = {"W": rand(4, 3, 3, 3), "B": rand(4, seed=1), "axes0": np.array([0], np.int64),
               "minus1": np.array([-1], np.int64), "fc_W": rand(5, 144, seed=2, scale=0.1),
               "fc_B": rand(5, seed=3)}
    return make_model(nodes, {"x": [1, 3, 6, 6]}, {"logits": [1, 5]}, weights)


def clip_from_inputs():
    """Conv → Clip(min from a Constant node, max from an initializer) → Clip(max only)."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "W"], ["conv"], pads=[1, 1, 1, 1]),
        n("Constant", [], ["lo"], value=numpy_helper.from_array(np.array(-0.25, np.float32))),
        n("Clip", ["conv", "lo", "hi"], ["clip"]),
        n("Clip", ["clip", "", "hi2"], ["y"]),
    ]
    weights = {"W": rand(5, 3, 3, 3), "hi": np.array(0.5, np.float32),
               "hi2": np.array(0.3, np.float32)}
    return make_model(nodes, {"x": [1, 3, 7, 5]}, {"y": [1, 5, 7, 5]}, weights)


def identity_dropout():
    """Conv → Identity → Dropout(ratio) → Relu → Identity → y: two real nodes."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "W"], ["conv"]),
        n("Identity", ["conv"], ["same"]),
        n("Dropout", ["same", "ratio"], ["dropped"]),
        n("Relu", ["dropped"], ["relu"]),
        n("Identity", ["relu"], ["y"]),
    ]
    weights = {"W": rand(6, 2, 1, 1), "ratio": np.array(0.5, np.float32)}
    return make_model(nodes, {"x": [1, 2, 5, 6]}, {"y": [1, 6, 5, 6]}, weights)


def conv_bn_relu():
    """Conv (no bias) → BatchNormalization → Relu: one pass after glcnn's passes."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "W"], ["conv"], strides=[2, 2], pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["conv", "scale", "bias", "mean", "var"], ["bn"],
          epsilon=1e-3),
        n("Relu", ["bn"], ["y"]),
    ]
    weights = {"W": rand(7, 3, 3, 3), "scale": rand(7, seed=1) + 1, "bias": rand(7, seed=2),
               "mean": rand(7, seed=3), "var": np.abs(rand(7, seed=4)) + 0.5}
    return make_model(nodes, {"x": [1, 3, 9, 8]}, {"y": [1, 7, 5, 4]}, weights)


def normalise_and_excite():
    """(x − mean) / std with constants, then squeeze-excitation: Mul(gate (1,C,1,1), x)."""
    n = helper.make_node
    nodes = [
        n("Sub", ["x", "mean"], ["centred"]),
        n("Div", ["centred", "std"], ["normed"]),
        n("Conv", ["normed", "W"], ["conv"], pads=[1, 1, 1, 1]),
        n("GlobalAveragePool", ["conv"], ["pooled"]),
        n("Sigmoid", ["pooled"], ["gate"]),
        n("Mul", ["gate", "conv"], ["y"]),
    ]
    weights = {"mean": np.array([0.5, 0.4, 0.3], np.float32).reshape(1, 3, 1, 1),
               "std": np.array([0.2, 0.25, 0.3], np.float32).reshape(1, 3, 1, 1),
               "W": rand(6, 3, 3, 3)}
    return make_model(nodes, {"x": [1, 3, 8, 8]}, {"y": [1, 6, 8, 8]}, weights)


def single_node(op, shape, attrs=None, weights=None, extra_inputs=(), opset=17):
    """x → op(x, *extra_inputs) → y, for error cases."""
    node = helper.make_node(op, ["x", *extra_inputs], ["y"], **(attrs or {}))
    return make_model([node], {"x": list(shape)}, {"y": None}, weights, opset)


def _i64(*values):
    return np.array(values, np.int64)


def _f32(*values):
    return np.array(values, np.float32)


def variants() -> dict:
    """id -> single-node model: attribute forms across opsets (constant inputs vs
    attributes, auto_pad, output_shape, negative axes, vectors)."""
    s = single_node
    pads = _i64(0, 0, 1, 2, 0, 0, 2, 1)
    return {
        "pad-opset10-edge": s("Pad", (1, 2, 4, 5), {"mode": "edge", "pads": pads.tolist()},
                              opset=10),
        "pad-opset18-axes-reflect": s("Pad", (1, 2, 4, 5), {"mode": "reflect"},
                                      {"p": _i64(1, 2, 1, 0), "ax": _i64(-2, -1)},
                                      ["p", "", "ax"], opset=18),
        "pad-constant-value": s("Pad", (1, 3, 4, 4), {}, {"p": pads, "v": _f32(0.5)[0]},
                                ["p", "v"]),
        "clip-opset6-attributes": s("Clip", (1, 3, 4, 4), {"min": -0.5, "max": 0.25}, opset=6),
        "resize-opset10-nearest": s("Resize", (1, 2, 3, 4), {"mode": "nearest"},
                                    {"s": _f32(1, 1, 2, 3)}, ["s"], opset=10),
        "resize-linear-align-corners-sizes": s(
            "Resize", (1, 2, 3, 4), {"mode": "linear",
                                     "coordinate_transformation_mode": "align_corners"},
            {"s": _i64(1, 2, 7, 9)}, ["", "", "s"]),
        "resize-linear-pytorch-half-pixel-down": s(
            "Resize", (1, 2, 8, 9), {"mode": "linear",
                                     "coordinate_transformation_mode": "pytorch_half_pixel"},
            {"s": _f32(1, 1, 0.5, 0.75)}, ["", "s"]),
        "upsample-opset9-linear": s("Upsample", (1, 2, 3, 4), {"mode": "linear"},
                                    {"s": _f32(1, 1, 2, 2)}, ["s"], opset=9),
        "softmax-opset11-vector": s("Softmax", (1, 10), {"axis": 1}, opset=11),
        "softmax-channels": s("Softmax", (1, 5, 3, 4), {"axis": 1}),
        "slice-opset9-attributes": s("Slice", (1, 2, 6, 7),
                                     {"starts": [1, -4], "ends": [5, 100], "axes": [2, 3]},
                                     opset=9),
        "slice-negative-axes": s("Slice", (1, 2, 6, 7), {},
                                 {"a": _i64(1, 2), "b": _i64(-1, 6), "c": _i64(-1, -2)},
                                 ["a", "b", "c"]),
        "reducemean-keepdims-0": s("ReduceMean", (1, 6, 5, 4), {"axes": [2, 3], "keepdims": 0},
                                   opset=13),
        "reducemean-opset18-axes-input": s("ReduceMean", (1, 6, 5, 4), {},
                                           {"a": _i64(-1, -2)}, ["a"], opset=18),
        "convtranspose-output-shape": s("ConvTranspose", (1, 3, 4, 5),
                                        {"strides": [2, 2], "output_shape": [10, 12]},
                                        {"W": rand(3, 2, 3, 3)}, ["W"]),
        "conv-same-lower-strided": s("Conv", (1, 3, 7, 6),
                                     {"auto_pad": "SAME_LOWER", "strides": [2, 2]},
                                     {"W": rand(4, 3, 3, 3)}, ["W"]),
        "averagepool-same-upper": s("AveragePool", (1, 3, 7, 6),
                                    {"kernel_shape": [3, 3], "strides": [2, 2],
                                     "auto_pad": "SAME_UPPER"}),
        "maxpool-ceil": s("MaxPool", (1, 3, 7, 6),
                          {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
        "depthtospace-crd": s("DepthToSpace", (1, 8, 3, 2), {"blocksize": 2, "mode": "CRD"}),
        "instancenorm": s("InstanceNormalization", (1, 3, 5, 4), {"epsilon": 1e-3},
                          {"s": rand(3), "b": rand(3, seed=1)}, ["s", "b"]),
        "prelu-channel-slope": s("PRelu", (1, 4, 3, 3), {}, {"s": rand(4, 1, 1)}, ["s"]),
        "hardsigmoid": s("HardSigmoid", (1, 3, 4, 4), {"alpha": 0.3, "beta": 0.4}),
        "elu": s("Elu", (1, 3, 4, 4), {"alpha": 0.7}),
        "leakyrelu": s("LeakyRelu", (1, 3, 4, 4), {"alpha": 0.1}),
        "hardswish": s("HardSwish", (1, 3, 4, 4)),
        "globalmaxpool": s("GlobalMaxPool", (1, 5, 4, 3)),
        "concat-same-tensor": s("Concat", (1, 3, 2, 2), {"axis": -3}, extra_inputs=["x"]),
        "gemm-alpha-beta": s("Gemm", (1, 6), {"alpha": 0.5, "beta": 2.0},
                             {"B": rand(6, 4), "C": rand(4, seed=1)}, ["B", "C"]),
        "matmul-vector": s("MatMul", (1, 6), {}, {"B": rand(6, 3)}, ["B"]),
        "div-by-scalar": s("Div", (1, 3, 4, 4), {}, {"d": _f32(4.0)[0]}, ["d"]),
        "sub-from-constant": make_model(
            [helper.make_node("Sub", ["c", "x"], ["y"])], {"x": [1, 3, 2, 2]},
            {"y": None}, {"c": _f32(1, 2, 3).reshape(3, 1, 1)}),
    }


# --- x -> Conv -> the nodes under test, against onnxruntime ------------------------------------
def conv_then(tmp_path, nodes, out_shape, inits=(), x_shape=(1, 3, 8, 10), opset=17,
              name="m.onnx", rng=None):
    """x -> Conv(C -> C + 3, 3×3) -> `nodes` (reading "c", writing "y"), saved; its path. The
    Conv makes the data something other than the input itself."""
    rng = rng if rng is not None else np.random.default_rng(0)
    c = x_shape[1] + 3
    w = rng.standard_normal((c, x_shape[1], 3, 3)).astype(np.float32) * 0.3
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), *nodes], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(w, "w"), *inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = tmp_path / name
    onnx.save(m, str(path))
    return path


def int_const(name, value, dtype=np.int64):
    """An initializer (int64 unless said): shapes, axes, indices."""
    return numpy_helper.from_array(np.asarray(value, dtype), name)


def matches_onnxruntime(path, x_shape=(1, 3, 8, 10), rng=None) -> list[str]:
    """glcnn.load(path).run(x) against onnxruntime at fp32 on a seeded x; returns the
    optimised graph's op types."""
    import onnxruntime as ort
    from helpers import assert_close

    import glcnn
    rng = rng if rng is not None else np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(np.float32)
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    pipe = glcnn.load(path, cache=False)
    try:
        y = pipe.run(x)
        assert y.shape == ref.shape
        assert_close(y, ref, "fp32", path.name)
        return [n.op for n in pipe.graph.nodes]
    finally:
        pipe.release()
