"""Issue 18, hostile files: one clear line, never a traceback; values accepted silently
until now refused; messages that echo file contents escaped and capped.

Each case writes a small generated model (native .npz, ONNX or TF.js) or input into a fresh
model folder and runs it through tests/hostile.py (a fresh process, bounded memory and time,
nothing opened outside the folder): the API must raise a GlcnnError with one clean line, the
CLI must exit 2 with one stderr line.
"""

import json
import struct
import zlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from hostile import case_folder, check_refused, run_case

from glcnn.graph.builder import Builder
from glcnn.importers.npz import document

ESCAPES = "\x1b[2J\x1b[31mred\nsecond line\rthird"  # clears and recolours a terminal


# --- generated models ------------------------------------------------------------------------
def native(folder: Path, mutate=None, name="model.npz") -> Path:
    """x (1, 8, 8) -> Conv 1→2 k3 p1 "c" -> LeakyRelu "y", as a native .npz after
    `mutate(doc, arrays)` edited its graph document and weights."""
    b = Builder(seed=1)
    x = b.input("x", (1, 8, 8))
    h = b.conv(x, 2, 3, padding=1, name="c")
    graph = b.build([b.activation(h, "LeakyRelu", name="y")])
    doc = document(graph)
    arrays = {f"{n.name}::{k}": v for n in graph.nodes for k, v in n.weights.items()}
    if mutate:
        mutate(doc, arrays)
    path = folder / name
    blob = np.frombuffer(json.dumps(doc).encode(), np.uint8)
    np.savez(path, glcnn_graph=blob, **arrays)
    return path


def node(doc: dict, name: str) -> dict:
    return next(n for n in doc["nodes"] if n["name"] == name)


def onnx_model(folder: Path, op="Relu", attrs=None, inputs=(), opset=17, name="model.onnx",
               node_name="n0") -> Path:
    """x (1, 2, 4, 4) -> `op` -> y, with `attrs` and constant extra `inputs` (initializers)."""
    h = onnx.helper
    inits = [onnx.numpy_helper.from_array(np.asarray(v), f"k{i}") for i, v in enumerate(inputs)]
    graph = h.make_graph(
        [h.make_node(op, ["x", *[t.name for t in inits]], ["y"], name=node_name,
                     **(attrs or {}))], "g",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, 4, 4])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    path = folder / name
    path.write_bytes(model.SerializeToString())
    return path


def tfjs_model(folder: Path, kernel=3, input_shape=(8, 8, 1), name="conv",
               layer_class="Conv2D", weight_shape=None) -> Path:
    """A Sequential TF.js model: Conv2D (1 filter, `kernel`, no bias) on `input_shape`."""
    shape = weight_shape or [kernel, kernel, 1, 1]
    count = int(np.prod([int(float(d)) for d in shape]))  # as a silent int() would read it
    (folder / "group1-shard1of1.bin").write_bytes(np.ones(count, np.float32).tobytes())
    layer = {"class_name": layer_class, "config": {
        "name": name, "filters": 1, "kernel_size": [kernel, kernel], "strides": [1, 1],
        "padding": "valid", "data_format": "channels_last", "dilation_rate": [1, 1],
        "activation": "linear", "use_bias": False,
        "batch_input_shape": [None, *input_shape], "dtype": "float32"}}
    doc = {"format": "layers-model", "modelTopology": {"class_name": "Sequential", "config": {
        "name": "m", "layers": [layer]}}, "weightsManifest": [{
            "paths": ["group1-shard1of1.bin"],
            "weights": [{"name": f"{name}/kernel", "shape": shape, "dtype": "float32"}]}]}
    path = folder / "model.json"
    path.write_text(json.dumps(doc))
    return path


def api_load(path: Path) -> str:
    return f"glcnn.load(folder / {path.name!r}, cache=False)"


def both(tmp_path, path: Path, contains: str, command="info", extra=()):
    """Load `path` through the API and through `glcnn COMMAND`; both must refuse it."""
    check_refused(run_case(path.parent, api=api_load(path)), contains)
    outcome = run_case(path.parent, cli=[command, str(path), *map(str, extra)],
                       env={"GLCNN_CACHE": "0"})
    check_refused(outcome, contains, cli=True)
    return outcome


# --- Security: names are printed raw; Messages: every echoed value capped ----------------------
def test_native_layer_name_with_escapes_is_quoted(tmp_path):
    def mutate(doc, arrays):
        node(doc, "y")["inputs"] = [ESCAPES * 50]
    outcome = both(tmp_path, native(case_folder(tmp_path), mutate), "\\x1b[2J")
    assert len(outcome.message) < 400, outcome


def test_onnx_node_name_and_op_type_with_escapes_are_quoted(tmp_path):
    path = onnx_model(case_folder(tmp_path), op=f"Evil{ESCAPES}", node_name=ESCAPES)
    both(tmp_path, path, "\\x1b[31m")


def test_tfjs_layer_name_and_class_with_escapes_are_quoted(tmp_path):
    path = tfjs_model(case_folder(tmp_path), layer_class=f"Evil{ESCAPES}", name=ESCAPES)
    both(tmp_path, path, "\\x1b[2J")


def test_huge_attribute_list_is_not_echoed_in_full(tmp_path):
    def mutate(doc, arrays):
        node(doc, "c")["attrs"]["kernel_shape"] = [3] * 200_000
    outcome = both(tmp_path, native(case_folder(tmp_path), mutate), "kernel_shape")
    assert len(outcome.message) < 1000, outcome


def test_input_overflowing_float32_warns_nothing_and_is_refused(tmp_path):
    folder = case_folder(tmp_path)
    path = native(folder)
    outcome = run_case(folder, api=f"{api_load(path)}.run(np.full((1, 8, 8), 1e300))")
    check_refused(outcome, "float32")
    assert "stderr" not in outcome.message and "RuntimeWarning" not in outcome.message


def test_float64_weight_overflowing_float32_warns_nothing(tmp_path):
    path = onnx_model(case_folder(tmp_path), "Mul", inputs=[np.full((1, 2, 1, 1), 1e300)])
    both(tmp_path, path, "beyond float32")


# --- One clear line, never a traceback ------------------------------------------------------
@pytest.mark.parametrize("bad", ["x", 5, [[0.0], [1.0, 2.0]], [[0.0, 1.0]], [["a", "b"], [1, 2]],
                                 [[0.0], [1.0]], [[0.0, 9 ** 400], [1.0, 2.0]]])
def test_malformed_u8_ranges_are_one_line(tmp_path, bad):
    def mutate(doc, arrays):  # y (2 channels) gets `bad`: of the wrong type or length
        doc["meta"]["u8_ranges"] = {"x": [[0.0], [1.0]], "c": [[0.0, 0.0], [1.0, 1.0]],
                                    "y": bad}
    path = native(case_folder(tmp_path), mutate)
    check_refused(run_case(path.parent, api=f"glcnn.load(folder / {path.name!r}, "
                                            "precision='u8', cache=False)"), "u8_ranges")
    outcome = run_case(path.parent, cli=["run", str(path), str(npy(path.parent)),
                                         "--precision", "u8"], env={"GLCNN_CACHE": "0"})
    check_refused(outcome, "u8_ranges", cli=True)


def npy(folder: Path, value=0.5, dtype=np.float32, name="x.npy") -> Path:
    np.save(folder / name, np.full((1, 8, 8), value, dtype))
    return folder / name


def test_memory_budget_of_400_digits_is_one_line(tmp_path):
    folder = case_folder(tmp_path)
    path = native(folder)
    env = {"GLCNN_MEMORY_BUDGET": "9" * 400, "GLCNN_CACHE": "0"}
    check_refused(run_case(folder, api=api_load(path), env=env), "GLCNN_MEMORY_BUDGET")
    check_refused(run_case(folder, cli=["run", str(path), str(npy(folder))], env=env),
                  "GLCNN_MEMORY_BUDGET", cli=True)


def test_infinite_memory_budget_is_one_line(tmp_path):
    folder = case_folder(tmp_path)
    path = native(folder)
    code = (f"glcnn.Pipeline(glcnn.load_graph(folder / {path.name!r}), "
            "memory_budget=float('inf'))")
    check_refused(run_case(folder, api=code), "memory budget")


@pytest.mark.parametrize("argument, contains", [
    ("precision=['fp32']", "precision"), ("keep=5", "keep"), ("ctx='x'", "ctx"),
    ("strategy=3", "strategy")])
def test_pipeline_arguments_of_the_wrong_type(tmp_path, argument, contains):
    folder = case_folder(tmp_path)
    path = native(folder)
    code = f"glcnn.Pipeline(glcnn.load_graph(folder / {path.name!r}), {argument})"
    check_refused(run_case(folder, api=code), contains)


def test_readback_array_is_refused_in_one_line(tmp_path):
    folder = case_folder(tmp_path)
    path = native(folder)
    code = f"{api_load(path)}.run(np.zeros((1, 8, 8)), readback=np.array([1, 2]))"
    check_refused(run_case(folder, api=code), "readback")


def png_header(width: int, height: int) -> bytes:
    """A PNG that declares `width`×`height` (a decompression bomb by its header alone)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + \
        chunk(b"IEND", b"")


@pytest.mark.parametrize("case, contains", [
    ("screenshot-missing-folder", "screenshot"), ("screenshot-extension", "screenshot"),
    ("broken-image", "broken.png"), ("bomb", "bomb.png")])
def test_viewer_refuses_in_one_line(tmp_path, display, case, contains):
    folder = case_folder(tmp_path)
    path = native(folder)
    frames = folder / "frames"
    frames.mkdir()
    shot = folder / "shot.png"
    if case == "screenshot-missing-folder":
        shot = folder / "no-such-folder" / "shot.png"
    elif case == "screenshot-extension":
        shot = folder / "shot.unknown"
    elif case == "broken-image":
        (frames / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    else:
        (frames / "bomb.png").write_bytes(png_header(100_000, 100_000))
    argv = ["view", str(path), "--source", str(frames) if case in ("broken-image", "bomb")
            else "synthetic", "--frames", "2", "--screenshot", str(shot)]
    check_refused(run_case(folder, cli=argv, env={"DISPLAY": display, "GLCNN_CACHE": "0"}),
                  contains, cli=True)


# --- Accepted silently today; must be refused ------------------------------------------------
def test_float64_input_beyond_float32_is_refused(tmp_path):
    folder = case_folder(tmp_path)
    path = native(folder)
    big = npy(folder, 1e300, np.float64, "big.npy")
    check_refused(run_case(folder, api=f"{api_load(path)}.run(np.load(folder / 'big.npy'))"),
                  "float32")
    check_refused(run_case(folder, cli=["run", str(path), str(big)], env={"GLCNN_CACHE": "0"}),
                  "float32", cli=True)


def test_bool_npy_is_refused_by_the_cli(tmp_path):
    folder = case_folder(tmp_path)
    path = native(folder)
    flags = npy(folder, True, np.bool_, "flags.npy")
    check_refused(run_case(folder, cli=["run", str(path), str(flags)],
                           env={"GLCNN_CACHE": "0"}), "bool", cli=True)


def test_tfjs_kernel_of_size_zero_is_refused(tmp_path):
    both(tmp_path, tfjs_model(case_folder(tmp_path), kernel=0), "kernel_size")


@pytest.mark.parametrize("where, value", [("input", 3.5), ("input", "8"), ("weight", 3.5),
                                          ("weight", "3")])
def test_tfjs_shapes_must_be_integers(tmp_path, where, value):
    folder = case_folder(tmp_path)
    if where == "input":
        path = tfjs_model(folder, input_shape=(8, value, 1))
    else:
        path = tfjs_model(folder, weight_shape=[3, value, 1, 1])
    both(tmp_path, path, "integer")


def test_native_weight_must_match_kernel_shape(tmp_path):
    def mutate(doc, arrays):
        arrays["c::W"] = np.ones((2, 1, 5, 5), np.float32)
        node(doc, "c")["attrs"]["kernel_shape"] = [3, 3]
    both(tmp_path, native(case_folder(tmp_path), mutate), "kernel_shape")


def test_nan_activation_parameter_is_refused(tmp_path):
    def mutate(doc, arrays):
        node(doc, "y")["attrs"]["alpha"] = float("nan")
    both(tmp_path, native(case_folder(tmp_path), mutate), "alpha")


def test_onnx_nan_leaky_relu_alpha_is_refused(tmp_path):
    path = onnx_model(case_folder(tmp_path), "LeakyRelu", {"alpha": float("nan")})
    both(tmp_path, path, "alpha")


def test_onnx_negative_pads_are_refused(tmp_path):
    path = onnx_model(case_folder(tmp_path), "MaxPool",
                      {"kernel_shape": [2, 2], "pads": [-1, -1, 0, 0]})
    both(tmp_path, path, "pads")


@pytest.mark.parametrize("opset", [99999, -3])
def test_onnx_unknown_opset_is_refused(tmp_path, opset):
    both(tmp_path, onnx_model(case_folder(tmp_path), opset=opset), "opset")


def test_onnx_reduce_axis_out_of_range_is_refused(tmp_path):
    path = onnx_model(case_folder(tmp_path), "ReduceMean", {"axes": [99], "keepdims": 1},
                      opset=13)
    both(tmp_path, path, "axis")
