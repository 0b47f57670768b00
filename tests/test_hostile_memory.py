"""Issue 18, "memory and time": a small hostile file must not cost gigabytes or minutes.

One case per class, each in a fresh process (tests/hostile.py), through the API and the
CLI where both apply: refused with one line (or, for the oversized shard, loaded) within
1 GiB of RSS above the baseline and 60 s. Every file is generated here and small; the
multi-GB ones are sparse files in the tmp folder.
"""

import json
import zipfile
import zlib

import numpy as np
import onnx
import pytest
from hostile import case_folder, check_bounded, check_refused, run_case
from onnx import TensorProto, helper, numpy_helper

import glcnn
from glcnn.limits import max_gflop

NO_CACHE = {"GLCNN_CACHE": "0"}


# --- ONNX constant folding ---------------------------------------------------------------
def _onnx(folder, nodes, inits, x_shape=(1, 1, 4, 4), y_shape=None, name="m.onnx"):
    """A model y = <nodes>(x) with `inits`; hostile constants hang off it."""
    graph = helper.make_graph(
        nodes, "hostile", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape or x_shape)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, folder / name)
    return folder / name


def _hidden(name, value):
    """A constant whose value onnx's shape inference cannot follow (Abs of an initializer)."""
    return [helper.make_node("Abs", [f"{name}_raw"], [name])], {f"{name}_raw": value}


def _fold_pad(folder):
    nodes, inits = _hidden("pads", np.array([0, 0, 12000, 12000, 0, 0, 12000, 12000]))
    nodes += [helper.make_node("Pad", ["c", "pads"], ["big"], name="pad\x1b[2J"),
              helper.make_node("Relu", ["x"], ["y"])]
    return _onnx(folder, nodes, {**inits, "c": np.zeros((1, 1, 2, 2), np.float32)})


def _fold_resize(folder):
    nodes, inits = _hidden("scales", np.array([1, 1, 6000, 6000], np.float32))
    nodes += [helper.make_node("Resize", ["c", "", "scales"], ["big"], name="resize"),
              helper.make_node("Relu", ["x"], ["y"])]
    return _onnx(folder, nodes, {**inits, "c": np.zeros((1, 1, 4, 4), np.float32)})


def _fold_gather(folder):
    """im2col-like: ConstantOfShape indices of a hidden length gather whole rows."""
    nodes, inits = _hidden("count", np.array([20000]))
    nodes += [helper.make_node("ConstantOfShape", ["count"], ["idx"],
                               value=helper.make_tensor("v", TensorProto.INT64, [1], [0])),
              helper.make_node("Gather", ["rows", "idx"], ["big"], name="gather"),
              helper.make_node("Relu", ["x"], ["y"])]
    return _onnx(folder, nodes, {**inits, "rows": np.zeros((1, 30000), np.float32)})


@pytest.mark.parametrize("make, contains", [(_fold_pad, r"'pad\x1b[2J'"),
                                            (_fold_resize, "'resize'"),
                                            (_fold_gather, "'gather'")])
def test_onnx_folding_is_capped_before_allocating(make, contains, tmp_path):
    path = make(case_folder(tmp_path))
    outcome = run_case(path.parent, api=f"glcnn.load_graph(folder / {path.name!r})")
    check_refused(outcome, contains)
    assert "elements (limit" in outcome.message


def test_onnx_folding_cap_through_the_cli(tmp_path):
    path = _fold_pad(case_folder(tmp_path))
    check_refused(run_case(path.parent, cli=["info", str(path)], env=NO_CACHE),
                  "elements (limit", cli=True)


# --- TF.js ---------------------------------------------------------------------------------
def _tfjs(folder, layers, manifest=()):
    doc = {"format": "layers-model", "modelTopology": {"class_name": "Sequential", "config": {
        "name": "s", "layers": layers}}, "weightsManifest": list(manifest)}
    (folder / "model.json").write_text(json.dumps(doc))
    return folder / "model.json"


def _huge_flatten(folder):
    return _tfjs(folder, [
        {"class_name": "Flatten", "config": {"name": "flat",
                                             "batch_input_shape": [None, 7000, 7000, 3]}},
        {"class_name": "Dense", "config": {"name": "dense", "units": 2}}])


def test_tfjs_huge_flatten_is_refused_before_its_index_arrays(tmp_path):
    path = _huge_flatten(case_folder(tmp_path))
    check_refused(run_case(path.parent, api="glcnn.load_graph(folder / 'model.json')"),
                  "flattening 147,000,000 values")
    check_refused(run_case(path.parent, cli=["info", str(path)], env=NO_CACHE),
                  "flattening", cli=True)


def _sparse_shard(folder):
    """A Dense needing 40 bytes of a 3.5 GiB (sparse) shard."""
    with open(folder / "group1-shard1of1.bin", "wb") as shard:
        shard.truncate(7 << 29)
    weights = [{"name": "dense/kernel", "shape": [4, 2], "dtype": "float32"},
               {"name": "dense/bias", "shape": [2], "dtype": "float32"}]
    return _tfjs(folder, [{"class_name": "Dense", "config": {
        "name": "dense", "units": 2, "batch_input_shape": [None, 4]}}],
        [{"paths": ["group1-shard1of1.bin"], "weights": weights}])


def test_tfjs_shards_are_read_only_as_far_as_the_manifest_needs(tmp_path):
    path = _sparse_shard(case_folder(tmp_path))
    outcome = run_case(path.parent, api="print(glcnn.load_graph(folder / 'model.json'))")
    assert outcome.outcome == "ok", outcome
    check_bounded(outcome)
    outcome = run_case(path.parent, cli=["info", str(path)], env=NO_CACHE)
    assert outcome.outcome == "exit 0", outcome
    check_bounded(outcome)


# --- .npz zip bombs --------------------------------------------------------------------------
BOMB_ELEMENTS = 1 << 28  # float32 zeros: 1 GiB inflated, ~4.5 MB deflated


def _npz_bomb(path, members: dict) -> None:
    """An .npz whose members are arrays (small) or ints: that many float32 zeros."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, value in members.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                if not isinstance(value, int):
                    np.lib.format.write_array(member, np.asarray(value))
                    continue
                np.lib.format.write_array_header_1_0(
                    member, {"descr": "<f4", "fortran_order": False, "shape": (value,)})
                chunk = bytes(1 << 24)
                for _ in range(value * 4 // len(chunk)):
                    member.write(chunk)


def _small_graph():
    b = glcnn.Builder()
    x = b.input("x", (3, 8, 8))
    return b.build([b.conv(x, 4, 3, padding=1, name="c")])


def test_npz_zip_bomb_is_judged_by_its_headers(tmp_path):
    folder = case_folder(tmp_path)
    doc = json.dumps(glcnn.importers.npz.document(_small_graph())).encode()
    _npz_bomb(folder / "m.npz", {"glcnn_graph": np.frombuffer(doc, np.uint8),
                                 "c::W": BOMB_ELEMENTS, "c::B": np.zeros(4, np.float32)})
    outcome = run_case(folder, api="glcnn.load_graph(folder / 'm.npz')")
    check_refused(outcome, "m.npz")
    assert "'W'" in outcome.message and str(BOMB_ELEMENTS) in outcome.message
    check_refused(run_case(folder, cli=["info", str(folder / "m.npz")], env=NO_CACHE),
                  "m.npz", cli=True)


def test_state_dict_zip_bomb_is_judged_by_its_headers(tmp_path):
    folder = case_folder(tmp_path)
    _npz_bomb(folder / "w.npz", {"c.weight": BOMB_ELEMENTS, "c.bias": np.zeros(4, np.float32)})
    api = ("b = glcnn.Builder(); x = b.input('x', (3, 8, 8))\n"
           "b.build([b.conv(x, 4, 3, padding=1, name='c')], weights=folder / 'w.npz')")
    outcome = run_case(folder, api=api)
    check_refused(outcome, "w.npz: member 'c.weight'")
    assert "(4, 3, 3, 3)" in outcome.message


# --- inputs ----------------------------------------------------------------------------------
def _native_model(folder):
    glcnn.save(_small_graph(), folder / "m.npz")
    return folder / "m.npz"


def test_npy_input_of_the_wrong_shape_is_judged_by_its_header(tmp_path):
    folder = case_folder(tmp_path)
    model = _native_model(folder)
    with open(folder / "x.npy", "wb") as f:  # 1.7 GB, sparse
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False,
                                                 "shape": (1, 3, 12000, 12000)})
        f.truncate(f.tell() + 3 * 12000 * 12000 * 4)
    check_refused(run_case(folder, cli=["run", str(model), str(folder / "x.npy")],
                           env=NO_CACHE), "(1, 3, 12000, 12000)", cli=True)


def _png_of_zeros(path, side: int) -> None:
    """A greyscale PNG of side × side black pixels, written without decoding anything."""
    def chunk(kind, data):
        return (len(data).to_bytes(4, "big") + kind + data
                + zlib.crc32(kind + data).to_bytes(4, "big"))
    squeeze, row = zlib.compressobj(1), bytes(side + 1)
    pixels = b"".join(squeeze.compress(row) for _ in range(side)) + squeeze.flush()
    header = side.to_bytes(4, "big") * 2 + bytes([8, 0, 0, 0, 0])
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels)
                     + chunk(b"IEND", b""))


def test_huge_image_input_is_refused_before_decoding(tmp_path):
    folder = case_folder(tmp_path)
    model = _native_model(folder)
    _png_of_zeros(folder / "big.png", 12000)  # 144 MP, under Pillow's bomb limit
    check_refused(run_case(folder, cli=["run", str(model), str(folder / "big.png")],
                           env=NO_CACHE), "64 MP", cli=True)


# --- compute ---------------------------------------------------------------------------------
def _heavy(folder):
    """20 convs 512 -> 512 at 64², weights folded from a scalar (a 2 KB file): 387 GFLOP."""
    nodes = [helper.make_node("Expand", ["w0", "wshape"], ["W"])]
    for i in range(20):
        nodes.append(helper.make_node("Conv", ["x" if i == 0 else f"h{i}", "W"],
                                      ["y" if i == 19 else f"h{i + 1}"], pads=[1, 1, 1, 1]))
    inits = {"w0": np.array(1e-3, np.float32), "wshape": np.array([512, 512, 3, 3])}
    return _onnx(folder, nodes, inits, x_shape=(1, 512, 64, 64))


def test_compute_limit_refuses_before_allocating(tmp_path):
    folder = case_folder(tmp_path)
    path = _heavy(folder)
    outcome = run_case(folder, api="glcnn.load(folder / 'm.onnx', cache=False)")
    check_refused(outcome, "GLCNN_MAX_GFLOP")
    assert "386.5 GFLOP" in outcome.message and "200.0 GFLOP" in outcome.message
    np.save(folder / "x.npy", np.zeros((1, 512, 64, 64), np.float32))
    check_refused(run_case(folder, cli=["run", str(path), str(folder / "x.npy")],
                           env={**NO_CACHE, "GLCNN_MAX_GFLOP": "50"}), "50.0 GFLOP", cli=True)


def test_compute_limit_setting(monkeypatch):
    assert max_gflop() == 200.0
    assert max_gflop(1000) == 1000.0
    monkeypatch.setenv("GLCNN_MAX_GFLOP", "12.5")
    assert max_gflop() == 12.5
    for bad in ("lots", "0", "-1", "inf", "nan", 10**400, True):
        with pytest.raises(glcnn.GlcnnError, match="GLCNN_MAX_GFLOP"):
            max_gflop(bad)
