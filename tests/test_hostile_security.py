"""Issue 18, hostile files, security: ONNX external data is read only from regular files
inside the model's folder, whatever the onnx version, and the prepared-model cache notices a
replaced external-data file.

Each case writes a small generated ONNX model (y = x + W, W's bytes in an external file, or a
sparse constant whose values and indices are external) into a fresh model folder and runs it
through tests/hostile.py: a fresh process with an audit hook on `open`, run from the folder's
parent (which holds the canary and, for the sparse cases, same-named decoys), bounded memory
and time. The API (`glcnn.load`) must raise a GlcnnError with one clean line and the CLI
(`glcnn info`, `glcnn run`) must exit 2 with one stderr line; nothing outside the folder may
be opened. Multi-GB external files are sparse files in the temporary folder.

CI also runs this file with the oldest declared onnx (onnx==1.16.*), whose own checks follow
symbolic links out of the folder.
"""

import json
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hostile import CANARY, case_folder, check_bounded, check_refused, run_case

h, numpy_helper, TensorProto = onnx.helper, onnx.numpy_helper, onnx.TensorProto

W = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
API = "glcnn.load(folder / 'model.onnx')"
RUN_API = """
import json
with glcnn.load(folder / 'model.onnx') as pipe:
    print(json.dumps(pipe.run(np.ones((4, 1, 1), np.float32)).reshape(-1).tolist()))
"""
RULE = "inside the model's folder"
SURFACES = ["api", "cli"]


# --- generated models ------------------------------------------------------------------------
def external(tensor, location: str, offset=None, length=None):
    """Move `tensor`'s bytes (if any) out of the protobuf: it names `location` instead;
    returns them."""
    raw = tensor.raw_data
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": offset, "length": length}
    for key, value in entries.items():
        if value is not None:
            entry = tensor.external_data.add()
            entry.key, entry.value = key, str(value)
    return raw


def dense_model(folder: Path, location: str, offset=None, length=None, dims=(1, 4, 1, 1)):
    """x (1, 4, 1, 1) + W -> y, W (`dims`, float32) stored at `location`; returns W's bytes
    (W's values for the default dims; none for others, which the test writes itself)."""
    if dims == (1, 4, 1, 1):
        weight = numpy_helper.from_array(W.reshape(dims), "W")
    else:
        weight = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=dims)
    raw = external(weight, location, offset, length)
    graph = h.make_graph([h.make_node("Add", ["x", "W"], ["y"], name="add")], "g",
                         [h.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 1, 1])],
                         [h.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1])],
                         [weight])
    save(folder, graph)
    return raw


def sparse_model(folder: Path, as_initializer: bool):
    """x (1, 4, 1, 1) + S -> y, S sparse (values [5, 7] at [0, 3]) with its values in
    "values.bin" and its indices in "indices.bin"; S is a graph sparse initializer or the
    `sparse_value` of a Constant node. Returns {file name: bytes}."""
    values = numpy_helper.from_array(np.array([5.0, 7.0], np.float32), "S")
    indices = numpy_helper.from_array(np.array([0, 3], np.int64), "S_indices")
    files = {"values.bin": external(values, "values.bin"),
             "indices.bin": external(indices, "indices.bin")}
    sparse = h.make_sparse_tensor(values, indices, [1, 4, 1, 1])
    nodes = [h.make_node("Add", ["x", "S"], ["y"], name="add")]
    if not as_initializer:
        nodes.insert(0, h.make_node("Constant", [], ["S"], name="s", sparse_value=sparse))
    graph = h.make_graph(nodes, "g",
                         [h.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 1, 1])],
                         [h.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1])],
                         sparse_initializer=[sparse] if as_initializer else None)
    save(folder, graph)
    return files


def save(folder: Path, graph) -> None:
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    (folder / "model.onnx").write_bytes(model.SerializeToString())
    np.save(folder / "x.npy", np.zeros((1, 4, 1, 1), np.float32))


def refused(folder: Path, surface: str, contains: str, command="info"):
    """Run the model of `folder` through `surface` and check the hostile-case contract."""
    if surface == "api":
        outcome = run_case(folder, api=API, env={"GLCNN_CACHE": "0"})
    else:
        args = [str(folder / "x.npy"), "-o", str(folder / "y.npy")] if command == "run" else []
        outcome = run_case(folder, cli=[command, str(folder / "model.onnx"), *args],
                           env={"GLCNN_CACHE": "0"})
    check_refused(outcome, contains, cli=surface == "cli")
    return outcome


# --- dense external data leading out -----------------------------------------------------------
@pytest.mark.parametrize("surface", SURFACES)
def test_an_absolute_location_is_refused(tmp_path, surface):
    folder = case_folder(tmp_path)
    dense_model(folder, str(tmp_path / CANARY))
    outcome = refused(folder, surface, "is an absolute path")
    assert "'W'" in outcome.message and RULE in outcome.message


@pytest.mark.parametrize("surface", SURFACES)
def test_a_location_climbing_out_is_refused(tmp_path, surface):
    folder = case_folder(tmp_path)
    dense_model(folder, f"../{CANARY}")
    refused(folder, surface, "climbs out with '..'", command="run")


@pytest.mark.parametrize("surface", SURFACES)
def test_a_symlinked_file_leading_out_is_refused(tmp_path, surface):
    folder = case_folder(tmp_path)
    dense_model(folder, "weights.bin")
    (folder / "weights.bin").symlink_to(tmp_path / CANARY)
    refused(folder, surface, "leads outside the model's folder")


@pytest.mark.parametrize("surface", SURFACES)
def test_a_symlinked_folder_leading_out_is_refused(tmp_path, surface):
    folder = case_folder(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "weights.bin").write_bytes(dense_model(folder, "data/weights.bin"))
    (folder / "data").symlink_to(outside, target_is_directory=True)
    refused(folder, surface, "leads outside the model's folder", command="run")


@pytest.mark.parametrize("surface", SURFACES)
def test_a_fifo_is_refused_without_blocking(tmp_path, surface):
    folder = case_folder(tmp_path)
    dense_model(folder, "weights.bin")
    os.mkfifo(folder / "weights.bin")
    refused(folder, surface, "is not a regular file")


@pytest.mark.parametrize("surface", SURFACES)
def test_a_device_is_refused(tmp_path, surface):
    folder = case_folder(tmp_path)
    dense_model(folder, "weights.bin")
    (folder / "weights.bin").symlink_to("/dev/zero")
    refused(folder, surface, "leads outside the model's folder")


@pytest.mark.parametrize("location", [f"../{CANARY}", "link.bin", "data/secret.bin"])
def test_the_message_does_not_tell_whether_an_outside_file_exists(tmp_path, location):
    folder = case_folder(tmp_path)
    dense_model(folder, location)
    (folder / "link.bin").symlink_to(tmp_path / CANARY)
    (folder / "data").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "secret.bin").write_bytes(W.tobytes())
    present = run_case(folder, api=API, env={"GLCNN_CACHE": "0"})
    (tmp_path / CANARY).unlink()
    (tmp_path / "secret.bin").unlink()
    absent = run_case(folder, api=API, env={"GLCNN_CACHE": "0"})
    check_refused(present, RULE)
    assert present.message == absent.message


# --- sparse tensors: never read relative to the working folder --------------------------------
@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("as_initializer", [False, True], ids=["constant", "initializer"])
def test_sparse_external_data_is_not_read_from_the_working_folder(tmp_path, surface,
                                                                  as_initializer):
    """The case runs in the folder's parent, which holds same-named decoys: refused, with
    the message it gives without them (onnx >= 1.18 opens external data from C++, unseen by
    the audit hook: the unchanged message shows the decoys were not read)."""
    folder = case_folder(tmp_path)
    for name, data in sparse_model(folder, as_initializer).items():
        (tmp_path / name).write_bytes(data)  # decoys in the case's working folder
    with_decoys = refused(folder, surface, "does not exist in the model's folder")
    for name in ("values.bin", "indices.bin"):
        (tmp_path / name).unlink()
    assert refused(folder, surface, "does not exist").message == with_decoys.message


@pytest.mark.parametrize("surface", SURFACES)
def test_sparse_external_data_comes_from_the_model_folder(tmp_path, surface):
    """With the files in both folders, only the model folder's are read (then the sparse
    constant is refused or used: either way, the decoys stay closed)."""
    folder = case_folder(tmp_path)
    for name, data in sparse_model(folder, as_initializer=False).items():
        (folder / name).write_bytes(data)
        (tmp_path / name).write_bytes(data)
    if surface == "api":
        outcome = run_case(folder, api=API, env={"GLCNN_CACHE": "0"})
    else:
        outcome = run_case(folder, cli=["info", str(folder / "model.onnx")],
                           env={"GLCNN_CACHE": "0"})
    check_bounded(outcome)


# --- offsets, lengths and sizes -----------------------------------------------------------------
@pytest.mark.parametrize("surface", SURFACES)
def test_an_offset_beyond_the_file_is_refused(tmp_path, surface):
    folder = case_folder(tmp_path)
    (folder / "weights.bin").write_bytes(dense_model(folder, "weights.bin", 8, 16))
    refused(folder, surface, "asks for bytes 8..24 of a 16-byte file")


@pytest.mark.parametrize("surface", SURFACES)
def test_a_length_beyond_the_tensor_is_not_read(tmp_path, surface):
    """A 3 GiB length in a 3 GiB sparse file, for a 16-byte tensor: refused before reading."""
    folder = case_folder(tmp_path)
    dense_model(folder, "weights.bin", 0, 3 << 30)
    with open(folder / "weights.bin", "wb") as f:
        f.truncate(3 << 30)
    refused(folder, surface, "holds 3221225472 bytes where the tensor's dims")


@pytest.mark.parametrize("surface", SURFACES)
def test_external_data_over_the_memory_budget_is_not_read(tmp_path, surface):
    """A 4 GiB tensor in a 4 GiB sparse file: over the 2 GiB budget, refused before reading."""
    folder = case_folder(tmp_path)
    dense_model(folder, "weights.bin", dims=(1, 4, 1 << 14, 1 << 14))
    with open(folder / "weights.bin", "wb") as f:
        f.truncate(4 << 30)
    refused(folder, surface, "memory budget")


# --- an ordinary external-data model still loads -------------------------------------------
def test_external_data_inside_the_folder_loads(tmp_path):
    folder = case_folder(tmp_path)
    (folder / "data").mkdir()
    (folder / "data" / "weights.bin").write_bytes(b"pad!" + dense_model(
        folder, "data/weights.bin", 4, 16))
    outcome = run_case(folder, api=RUN_API, env={"GLCNN_CACHE": "0"})
    check_bounded(outcome)
    assert outcome.outcome == "ok", outcome
    np.testing.assert_allclose(json.loads(outcome.stdout.strip().splitlines()[-1]), 1 + W)


# --- the prepared-model cache and replaced external data ---------------------------------------
def settle(*paths: Path) -> None:
    """Date files a minute back, out of the cache's racy window."""
    stamp = os.stat(paths[0]).st_mtime_ns - 60 * 10**9
    for path in paths:
        os.utime(path, ns=(stamp, stamp))


@pytest.mark.parametrize("surface", SURFACES)
def test_the_cache_notices_a_replaced_external_data_file(tmp_path, monkeypatch, surface):
    """Load (cached), rewrite the external file in place with new weights and its old time
    stamp, load again: the new weights, as onnxruntime computes them."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("GLCNN_CACHE_DIR", str(cache))
    monkeypatch.delenv("GLCNN_CACHE", raising=False)
    folder = case_folder(tmp_path)
    weights = folder / "weights.bin"
    weights.write_bytes(dense_model(folder, "weights.bin"))
    np.save(folder / "x.npy", np.ones((1, 4, 1, 1), np.float32))
    settle(folder / "model.onnx", weights)
    stamp = weights.stat().st_mtime_ns
    first = outputs(folder, surface)
    np.testing.assert_allclose(first, 1 + W)
    assert len(list(cache.glob("*.glcnn"))) == 1  # the first load was cached
    with open(weights, "r+b") as f:
        f.write((W * 10).tobytes())
    os.utime(weights, ns=(stamp, stamp))
    second = outputs(folder, surface)
    np.testing.assert_allclose(second, onnxruntime_output(folder), rtol=1e-6)
    np.testing.assert_allclose(second, 1 + W * 10)


def outputs(folder: Path, surface: str) -> np.ndarray:
    if surface == "api":
        outcome = run_case(folder, api=RUN_API)
        check_bounded(outcome)
        assert outcome.outcome == "ok", outcome
        return np.array(json.loads(outcome.stdout.strip().splitlines()[-1]))
    out = folder / "y.npy"
    out.unlink(missing_ok=True)
    outcome = run_case(folder, cli=["run", str(folder / "model.onnx"), str(folder / "x.npy"),
                                    "-o", str(out)])
    check_bounded(outcome)
    assert outcome.outcome == "exit 0", outcome
    return np.load(out).reshape(-1)


def onnxruntime_output(folder: Path) -> np.ndarray:
    session = ort.InferenceSession(str(folder / "model.onnx"),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {"x": np.ones((1, 4, 1, 1), np.float32)})[0].reshape(-1)
