"""The prepared-model cache (glcnn.importers.prepared): a cached load gives the graph an
uncached load
gives (structure and every weight bit), runs to the same outputs, and is never used for a
file that changed; broken or unwritable caches fall back to importing the file."""

import json
import os
import shutil
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import assert_close
from onnx_models import conv_bn_relu, rand

import glcnn
from glcnn.graph import reference
from glcnn.graph.models import autoencoder
from glcnn.graph.passes import optimize
from glcnn.importers import prepared


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("GLCNN_CACHE_DIR", str(folder))
    monkeypatch.delenv("GLCNN_CACHE", raising=False)
    return folder


def mapped(w) -> bool:
    """True if array `w` is a view of a file map (np.memmap somewhere down its bases)."""
    while w is not None:
        if isinstance(w, np.memmap):
            return True
        w = w.base if isinstance(w, np.ndarray) else None
    return False


def settled(path):
    """Date `path` back past the racy window, as a file saved a while ago is."""
    past = time.time() - 10 * prepared.RACY_SECONDS
    os.utime(path, (past, past))
    return path


def onnx_model(tmp_path, model=None, name="model.onnx"):
    path = tmp_path / name
    onnx.save(model or conv_bn_relu(), str(path))
    return settled(path)


def entries(folder):
    return sorted(folder.glob("*.glcnn")) if folder.is_dir() else []


def assert_same_graph(a, b):
    assert a.inputs == b.inputs and a.outputs == b.outputs and a.meta == b.meta
    assert [(n.op, n.name, n.inputs) for n in a.nodes] == \
        [(n.op, n.name, n.inputs) for n in b.nodes]
    for x, y in zip(a.nodes, b.nodes):
        assert x.attrs == y.attrs or _json_equal(x.attrs, y.attrs), x.name
        assert sorted(x.weights) == sorted(y.weights), x.name
        for k in x.weights:
            assert np.array_equal(np.asarray(x.weights[k], np.float32), y.weights[k]), (x.name, k)
            assert y.weights[k].dtype == np.float32


def _json_equal(a, b):
    return json.loads(json.dumps(a)) == json.loads(json.dumps(b))


def test_cached_onnx_load_is_the_imported_graph_and_runs_like_onnxruntime(ctx, cache, tmp_path,
                                                                         monkeypatch):
    path = onnx_model(tmp_path)
    fresh = optimize(glcnn.load_graph(path))
    first = prepared.load_optimized(path)
    assert len(entries(cache)) == 1
    assert_same_graph(fresh, first)

    def no_import(p):
        raise AssertionError(f"{p} imported again: the cache entry was not used")
    monkeypatch.setattr(prepared, "load_graph", no_import)
    cached = prepared.load_optimized(path)
    assert_same_graph(fresh, cached)
    assert mapped(cached.nodes[0].weights["W"])

    x = rand(1, 3, 9, 8, seed=5, scale=1.0)
    (theirs,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})
    with glcnn.Pipeline(cached, ctx) as pipe:
        ours = pipe.run(x)
    with glcnn.Pipeline(fresh, ctx) as pipe:
        uncached = pipe.run(x)
    assert np.array_equal(ours, uncached)
    assert_close(ours, theirs, "fp32", "conv+bn+relu from the cache vs onnxruntime")


def test_glcnn_load_uses_the_cache_for_native_npz(ctx, cache, tmp_path, monkeypatch):
    graph = autoencoder((16, 16))
    path = tmp_path / "ae.npz"
    glcnn.save(graph, path)
    settled(path)
    x = np.random.default_rng(1).random((3, 16, 16), np.float32)
    with glcnn.load(path, ctx=ctx) as pipe:
        first = pipe.run(x)
    assert len(entries(cache)) == 1
    monkeypatch.setattr(prepared, "load_graph", lambda p: pytest.fail("imported again"))
    with glcnn.load(path, ctx=ctx) as pipe:
        again = pipe.run(x)
    assert np.array_equal(again, first)
    ref = reference.run(graph, {"image": x})["dec2"]
    assert_close(again, ref, "fp32", "autoencoder 16² from the cache")


def test_a_changed_model_file_is_imported_again(cache, tmp_path):
    path = onnx_model(tmp_path)
    first, first_key = prepared.load_optimized(path), prepared.entry_key(path)
    stamp, inode = path.stat().st_mtime_ns, path.stat().st_ino
    model = conv_bn_relu()
    new_w = onnx.numpy_helper.from_array(rand(7, 3, 3, 3, seed=9), "W")
    model.graph.initializer[0].CopyFrom(new_w)
    onnx.save(model, str(path))  # same size, new weights
    settled(path)
    second = prepared.load_optimized(path)
    assert len(entries(cache)) == 2
    assert not np.array_equal(first.nodes[0].weights["W"], second.nodes[0].weights["W"])
    assert_same_graph(optimize(glcnn.load_graph(path)), second)
    # Rewritten in place with the first file's time stamp: the sampled bytes still tell.
    os.utime(path, ns=(stamp, stamp))
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (inode, stamp)
    assert prepared.entry_key(path) != first_key


def test_entries_are_keyed_by_every_module_that_shapes_the_graph():
    # The graph passes and the ops' shape rules change an entry as much as the importers do:
    # a glcnn upgrade must not serve graphs optimised by the old passes.
    modules = {name for name, _, _ in prepared._code_stamp()}
    assert {"graph/passes.py", "graph/fuse_affine.py", "ops/conv.py", "importers/onnx.py",
            "importers/tfjs.py"} <= modules


def test_a_file_saved_just_now_is_not_cached(cache, tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save(conv_bn_relu(), str(path))
    prepared.load_optimized(path)
    assert entries(cache) == []


@pytest.mark.parametrize("damage", ["truncate", "magic", "json"])
def test_a_broken_entry_warns_and_the_model_is_imported_again(cache, tmp_path, damage):
    path = onnx_model(tmp_path)
    prepared.load_optimized(path)
    (entry,) = entries(cache)
    data = entry.read_bytes()
    if damage == "truncate":
        data = data[:-100]
    elif damage == "magic":
        data = b"NOTGLCNN" + data[8:]
    else:
        data = data[:16] + b"x" + data[17:]
    entry.write_bytes(data)
    with pytest.warns(UserWarning, match="unreadable"):
        graph = prepared.load_optimized(path)
    assert_same_graph(optimize(glcnn.load_graph(path)), graph)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same_graph(graph, prepared.load_optimized(path))  # rewritten whole


def test_an_unwritable_cache_warns_and_loads(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("GLCNN_CACHE_DIR", str(blocker / "cache"))
    path = onnx_model(tmp_path)
    with pytest.warns(UserWarning, match="cannot write"):
        graph = prepared.load_optimized(path)
    assert_same_graph(optimize(glcnn.load_graph(path)), graph)


@pytest.mark.parametrize("off", [{"env": "0"}, {"env": "off"}, {"arg": False}])
def test_the_cache_can_be_turned_off(cache, tmp_path, monkeypatch, off):
    if "env" in off:
        monkeypatch.setenv("GLCNN_CACHE", off["env"])
    prepared.load_optimized(onnx_model(tmp_path), cache=off.get("arg"))
    assert entries(cache) == []


def test_least_recently_used_entries_go_past_the_size_limit(cache, tmp_path, monkeypatch):
    a, b = onnx_model(tmp_path, name="a.onnx"), onnx_model(tmp_path, name="b.onnx")
    prepared.load_optimized(a)
    (entry_a,) = entries(cache)
    monkeypatch.setenv("GLCNN_CACHE_MAX_MB", str(1.5 * entry_a.stat().st_size / (1 << 20)))
    prepared.load_optimized(b)
    assert len(entries(cache)) == 1 and not entry_a.exists()


def test_errors_in_the_model_file_are_raised_as_without_a_cache(cache, tmp_path):
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"not a protobuf")
    settled(path)
    with pytest.raises(glcnn.ModelFileError, match="bad.onnx"):
        prepared.load_optimized(path)
    assert entries(cache) == []


def test_the_memory_budget_applies_to_cached_models_too(cache, tmp_path, monkeypatch):
    path = onnx_model(tmp_path)
    prepared.load_optimized(path)
    monkeypatch.setenv("GLCNN_MEMORY_BUDGET", "100")  # bytes: less than the conv's weights
    with pytest.warns(UserWarning, match="memory budget"), \
            pytest.raises(glcnn.ModelFileError, match="memory budget"):
        prepared.load_optimized(path)


def test_concurrent_first_loads_leave_one_whole_entry(cache, tmp_path):
    from concurrent.futures import ThreadPoolExecutor
    path = onnx_model(tmp_path)
    with ThreadPoolExecutor(4) as pool:
        graphs = list(pool.map(lambda _: prepared.load_optimized(path), range(8)))
    fresh = optimize(glcnn.load_graph(path))
    for graph in graphs:
        assert_same_graph(fresh, graph)
    assert len(entries(cache)) == 1 and not list(cache.glob("*.partial"))
    assert_same_graph(fresh, prepared.read_entry(entries(cache)[0]))


def test_a_read_only_cache_is_still_used(cache, tmp_path, monkeypatch):
    path = onnx_model(tmp_path)
    prepared.load_optimized(path)

    def refuse(*args, **kwargs):
        raise PermissionError("read-only file system")
    monkeypatch.setattr(prepared.os, "utime", refuse)
    monkeypatch.setattr(prepared, "load_graph", lambda p: pytest.fail("imported again"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mapped(prepared.load_optimized(path).nodes[0].weights["W"])


def test_an_unreadable_model_file_is_reported_by_the_importer(cache, tmp_path, monkeypatch):
    path = onnx_model(tmp_path)
    real_open = open

    def no_read(file, *args, **kwargs):
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)
    monkeypatch.setattr("builtins.open", no_read)
    monkeypatch.setattr(prepared, "load_graph",
                        lambda p: (_ for _ in ()).throw(glcnn.ModelFileError(f"{p}: unreadable")))
    with pytest.raises(glcnn.ModelFileError, match="model.onnx: unreadable"):
        prepared.load_optimized(path)


@pytest.mark.parametrize(("table", "why"), [([["nowhere", "W", [1], 0]], "of no layer"),
                                           ([["y", "W"]], "malformed weight table"),
                                           ("not a table", "malformed weight table")])
def test_an_entry_with_a_malformed_weight_table_is_refused(cache, tmp_path, table, why):
    path = onnx_model(tmp_path)
    prepared.load_optimized(path)
    (entry,) = entries(cache)
    doc = glcnn.importers.npz.document(optimize(glcnn.load_graph(path))) | {"weights": table}
    header = json.dumps(doc).encode()
    head = prepared.MAGIC + len(header).to_bytes(8, "little") + header
    data = bytes(prepared._aligned(len(head)) - len(head) + 4)  # the size the table declares
    entry.write_bytes(head + data)
    with pytest.raises(ValueError, match=why):
        prepared.read_entry(entry)
    with pytest.warns(UserWarning, match="unreadable"):
        assert_same_graph(optimize(glcnn.load_graph(path)), prepared.load_optimized(path))


def test_cached_weights_are_not_scanned_again_but_nan_weights_still_fail(cache, tmp_path,
                                                                         monkeypatch):
    """An entry records that its weights were found finite when written; a warm load then skips
    the scan (0.16 s for 167 MB), while an entry holding a NaN weight is still refused."""
    from glcnn.ops import base, build_ops
    path = onnx_model(tmp_path)
    prepared.load_optimized(path)
    monkeypatch.setattr(prepared, "load_graph", lambda p: pytest.fail("imported again"))
    cached = prepared.load_optimized(path)
    weights = [w for node in cached.nodes for w in node.weights.values()]
    assert weights and not any(w.flags.writeable for w in weights)
    with monkeypatch.context() as scans:
        scans.setattr(base.np, "isfinite", lambda w: pytest.fail("a cached weight was scanned"))
        build_ops(cached)
    bad = optimize(glcnn.load_graph(path))
    w = np.array(bad.nodes[0].weights["W"])
    w.flat[3] = np.nan
    bad.nodes[0].weights["W"] = w
    entry = tmp_path / "bad.glcnn"
    prepared.write_entry(bad, entry)
    with pytest.raises(glcnn.WeightError, match="NaN|Inf|finite"):
        build_ops(prepared.read_entry(entry))


TFJS = Path(__file__).resolve().parents[1] / "data" / "tfjs"


def tfjs_model(tmp_path, name="autoencoder"):
    """A copy of the TF.js test model `name` (model.json and its shards), settled."""
    folder = tmp_path / name
    shutil.copytree(TFJS / name, folder)
    for file in folder.iterdir():
        settled(file)
    return folder / "model.json"


def test_a_tfjs_model_is_cached_and_runs_as_tfjs_did(ctx, cache, tmp_path, monkeypatch):
    path = tfjs_model(tmp_path)
    fresh = optimize(glcnn.load_graph(path))
    assert_same_graph(fresh, prepared.load_optimized(path))
    assert len(entries(cache)) == 1
    monkeypatch.setattr(prepared, "load_graph", lambda p: pytest.fail("imported again"))
    cached = prepared.load_optimized(path)
    assert_same_graph(fresh, cached)
    assert all(mapped(w) for node in cached.nodes for w in node.weights.values())
    case = json.loads((path.parent / "case.json").read_text())
    x = np.load(path.parent / case["inputs"]["enc1_input"])
    with glcnn.load(path, ctx=ctx) as pipe:  # the cached graph
        ours = pipe.run(x)
    assert_close(ours, np.load(path.parent / case["outputs"]["dec2"]), "fp32",
                 "TF.js autoencoder from the cache vs TF.js")


def test_a_changed_tfjs_weight_shard_is_read_again(cache, tmp_path):
    path = tfjs_model(tmp_path)
    first = prepared.load_optimized(path)
    (shard,) = path.parent.glob("*.bin")
    data = bytearray(shard.read_bytes())
    data[:4] = np.float32(0.5).tobytes()  # the first weight, same size
    stamp = shard.stat().st_mtime_ns
    shard.write_bytes(bytes(data))
    os.utime(shard, ns=(stamp + 10**9, stamp + 10**9))
    second = prepared.load_optimized(path)
    assert_same_graph(optimize(glcnn.load_graph(path)), second)
    assert not all(np.array_equal(a, b) for x, y in zip(first.nodes, second.nodes)
                   for a, b in zip(x.weights.values(), y.weights.values()))


def test_tfjs_models_are_not_cached_while_custom_layers_are_registered(cache, tmp_path):
    from glcnn.importers.tfjs import custom_layer
    path = tfjs_model(tmp_path)
    with custom_layer("NoSuchLayer", lambda imp, call: imp.act(call), emits=()):
        prepared.load_optimized(path)
    assert entries(cache) == []
    prepared.load_optimized(path)
    assert len(entries(cache)) == 1
