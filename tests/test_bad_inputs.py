"""Hostile and bad input: malformed model files, oversized models, bad arrays and images,
misuse of pipelines and contexts, injection attempts. Every case ends in a GlcnnError
subclass with a message naming what was wrong, and no GL object is left behind.

GL-free cases come first; GL cases use the shared `ctx` fixture and check allocations with
tests/gl_census.py (the driver's own count of live objects).
"""

import ast
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
from gl_census import census
from PIL import Image

import glcnn
from glcnn import cli
from glcnn.graph import Graph, Node, models, reference
from glcnn.graph.builder import Builder
from glcnn.graph.passes import optimize
from glcnn.importers.npz import FORMAT
from glcnn.inputs import read_image
from glcnn.ops import build_ops
from glcnn.runtime.shaders import build_source

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "glcnn"


# --- helpers ---------------------------------------------------------------------------------
def small_graph(size=(4, 5)) -> Graph:
    """x (3, H, W) -> Conv 3→4 k3 p1 + Relu "c" -> Relu "y"."""
    b = Builder(seed=1)
    x = b.input("x", (3, *size))
    h = b.conv(x, 4, 3, padding=1, activation="Relu", name="c")
    return b.build([b.activation(h, "Relu", name="y")])


def graph_doc(graph: Graph) -> tuple[dict, dict]:
    """The JSON document and the weight arrays `glcnn.save` writes for `graph`."""
    doc = {"format": FORMAT, "inputs": {k: list(v) for k, v in graph.inputs.items()},
           "outputs": list(graph.outputs), "meta": dict(graph.meta),
           "nodes": [{"op": n.op, "name": n.name, "inputs": list(n.inputs), "attrs": n.attrs}
                     for n in graph.nodes]}
    arrays = {f"{n.name}::{k}": v for n in graph.nodes for k, v in n.weights.items()}
    return doc, arrays


def write_npz(path: Path, doc, arrays: dict, blob: bytes | None = None) -> Path:
    """An .npz with `doc` as its graph JSON (or raw `blob`) plus `arrays`."""
    text = blob if blob is not None else json.dumps(doc).encode()
    np.savez(path, glcnn_graph=np.frombuffer(text, np.uint8), **arrays)
    return path


def mutated_npz(tmp_path: Path, mutate) -> Path:
    """small_graph() saved after `mutate(doc, arrays)` edited its document and arrays."""
    doc, arrays = graph_doc(small_graph())
    mutate(doc, arrays)
    return write_npz(tmp_path / "m.npz", doc, arrays)


def npy_bytes(shape, dtype="<f4", payload=b"") -> bytes:
    """A .npy file whose header declares `shape` and `dtype`, followed by `payload` only."""
    stream = io.BytesIO()
    header = {"descr": dtype, "fortran_order": False, "shape": tuple(shape)}
    np.lib.format.write_array_header_1_0(stream, header)
    return stream.getvalue() + payload


def no_gl_objects_left(before: dict) -> None:
    after = census()
    assert after == before, f"GL objects changed: {before} -> {after}"


# --- 1. one hierarchy, one-line CLI errors ------------------------------------------------------
USER_FACING = ["importers", "graph", "runtime", "viewer", "cli.py", "inputs.py", "limits.py"]
# The prepared-model cache raises OSError/ValueError for a broken entry and catches them all
# itself: the load then imports the model file as if there were no cache.
INTERNAL = {"prepared.py"}
BUILTIN_ERRORS = {"ValueError", "KeyError", "AssertionError", "IndexError", "TypeError",
                  "RuntimeError", "Exception", "OSError", "AttributeError"}


def _raised_builtins(path: Path) -> list[str]:
    """`raise ValueError(...)`-style statements and asserts in `path`, as "file:line"; an
    AttributeError raised by a `__getattr__` is Python's protocol (hasattr, copy), not one."""
    found = []
    tree = ast.parse(path.read_text())
    protocol = {id(raised) for fn in ast.walk(tree)
                if isinstance(fn, ast.FunctionDef) and fn.name == "__getattr__"
                for raised in ast.walk(fn) if isinstance(raised, ast.Raise)}
    for node in ast.walk(tree):
        if id(node) in protocol and "AttributeError" in ast.unparse(node):
            continue
        if isinstance(node, ast.Raise) and node.exc is not None:
            call = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(call, ast.Name) and call.id in BUILTIN_ERRORS:
                found.append(f"{path.name}:{node.lineno} raise {call.id}")
        elif isinstance(node, ast.Assert):
            found.append(f"{path.name}:{node.lineno} assert")
    return found


def test_user_facing_modules_raise_only_glcnn_errors():
    files = [p for name in USER_FACING for p in
             ((PACKAGE / name).rglob("*.py") if (PACKAGE / name).is_dir() else [PACKAGE / name])]
    found = [hit for path in files if path.name not in INTERNAL for hit in _raised_builtins(path)]
    assert not found, f"raise a GlcnnError subclass instead: {found}"


def test_cli_error_is_one_line_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GLCNN_DEBUG", raising=False)
    (tmp_path / "junk.onnx").write_bytes(b"\x00garbage" * 10)
    assert cli.main(["info", str(tmp_path / "junk.onnx")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("glcnn info: error: ") and "junk.onnx" in err[0]


@pytest.mark.parametrize("level", ["", "0", "off"])
def test_cli_debug_zero_or_unset_still_one_line(level, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GLCNN_DEBUG", level)
    (tmp_path / "junk.npz").write_bytes(b"junk")
    assert cli.main(["info", str(tmp_path / "junk.npz")]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_cli_debug_shows_traceback(tmp_path):
    (tmp_path / "junk.npz").write_bytes(b"junk")
    env = {**os.environ, "GLCNN_DEBUG": "1"}
    done = subprocess.run([sys.executable, "-m", "glcnn.cli", "info", str(tmp_path / "junk.npz")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode != 0
    assert "Traceback" in done.stderr and "ModelFileError" in done.stderr


def test_cli_unwritable_output_is_a_clean_error(tmp_path):
    from glcnn.cli import write_output
    with pytest.raises(glcnn.GlcnnError, match="cannot write the output"):
        write_output(tmp_path / "no" / "such" / "dir" / "y.npy", np.zeros((1, 2, 2)), (0, 1))


# --- 2. importers validate before allocating (GL-free) ------------------------------------------
def _set_input(shape):
    return lambda doc, arrays: doc["inputs"].update(x=shape)


def _node(i, **fields):
    return lambda doc, arrays: doc["nodes"][i].update(fields)


NPZ_CASES = {  # id: (mutation of small_graph's document and arrays, error, message fragment)
    "json-not-a-model": (lambda d, a: d.clear(), glcnn.ModelFileError, "format"),
    "wrong-format-tag": (lambda d, a: d.update(format="keras"), glcnn.ModelFileError, "format"),
    "nodes-not-a-list": (lambda d, a: d.update(nodes={}), glcnn.ModelFileError, "nodes"),
    "inputs-missing": (lambda d, a: d.pop("inputs"), glcnn.ModelFileError, "inputs"),
    "orphan-weight": (lambda d, a: a.update({"ghost::W": np.ones(3, np.float32)}),
                      glcnn.ModelFileError, "belongs to no layer"),
    "string-weight": (lambda d, a: a.update({"c::W": np.array(["a", "b"])}),
                      glcnn.ModelFileError, "dtype"),
    "negative-dim": (_set_input([3, -4, 5]), glcnn.GraphError, "positive integers"),
    "zero-dim": (_set_input([0, 4, 5]), glcnn.GraphError, "positive integers"),
    "float-dim": (_set_input([3, 4.5, 5]), glcnn.GraphError, "positive integers"),
    "string-dim": (_set_input(["3", 4, 5]), glcnn.GraphError, "positive integers"),
    "rank-2-input": (_set_input([3, 4]), glcnn.GraphError, "(C, H, W)"),
    "huge-input": (_set_input([1, 100000, 100000]), glcnn.TextureSizeError, "100000"),
    "cycle": (_node(0, inputs=["y"]), glcnn.GraphError, "cycle"),
    "dangling-edge": (_node(1, inputs=["ghost"]), glcnn.GraphError, "dangling"),
    "duplicated-layer": (_node(1, name="c"), glcnn.GraphError, "defined twice"),
    "layer-named-as-input": (_node(1, name="x"), glcnn.GraphError, "defined twice"),
    "name-not-a-string": (_node(1, name=["y"]), glcnn.GraphError, "non-empty string"),
    "no-inputs": (_node(1, inputs=[]), glcnn.GraphError, "non-empty list"),
    "missing-output": (lambda d, a: d.update(outputs=["z"]), glcnn.GraphError, "'z'"),
    "huge-pads": (_node(0, attrs={"pads": [10**9] * 4}), glcnn.GraphError, "pads"),
    "nan-weight": (lambda d, a: a["c::W"].__setitem__((0, 0, 0, 0), np.nan),
                   glcnn.WeightError, "NaN or Inf"),
    "inf-bias": (lambda d, a: a["c::B"].__setitem__(1, np.inf), glcnn.WeightError, "'B'"),
    "beyond-float32": (lambda d, a: a.update({"c::B": np.full(4, 1e300)}),
                       glcnn.WeightError, "float32"),
    "bad-input-range": (lambda d, a: d.update(meta={"input_range": [1, 0]}),
                        glcnn.GraphError, "input_range"),
}


@pytest.mark.parametrize("case", NPZ_CASES)
def test_npz_structure_is_validated(case, tmp_path):
    mutate, error, fragment = NPZ_CASES[case]
    path = mutated_npz(tmp_path, mutate)
    with pytest.raises(error, match=_escaped(fragment)):
        glcnn.load_graph(path)


def _escaped(fragment: str) -> str:
    import re
    return re.escape(fragment)


def _archive(members: dict[str, bytes]) -> bytes:
    stream = io.BytesIO()
    with zipfile.ZipFile(stream, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return stream.getvalue()


def _valid_npz_bytes(tmp_path) -> bytes:
    glcnn.save(small_graph(), tmp_path / "ok.npz")
    return (tmp_path / "ok.npz").read_bytes()


RAW_NPZ_CASES = {  # id: file bytes from the valid file's bytes and tmp_path
    "empty": lambda ok: b"",
    "truncated": lambda ok: ok[:len(ok) // 2],
    "garbage": lambda ok: np.random.default_rng(0).bytes(4096),
    "wrong-magic": lambda ok: b"GIF8" + ok[4:],
    "a-plain-npy": lambda ok: npy_bytes((2,), payload=b"\0" * 8),
    "not-npy-member": lambda ok: _archive({"glcnn_graph.npy": b"not an array"}),
    "text-member": lambda ok: _archive({"readme.txt": b"hello"}),
    "huge-declared-member": lambda ok: _archive({"c::W.npy": npy_bytes((1 << 31,))}),
    "deeply-nested-json": lambda ok: _archive({"glcnn_graph.npy": npy_bytes(
        (200000,), "|u1", b"[" * 200000)}),
}


@pytest.mark.parametrize("case", RAW_NPZ_CASES)
def test_npz_bytes_are_validated(case, tmp_path):
    path = tmp_path / "model.npz"
    path.write_bytes(RAW_NPZ_CASES[case](_valid_npz_bytes(tmp_path)))
    with pytest.raises(glcnn.ModelFileError, match="model.npz"):
        glcnn.load_graph(path)


def test_huge_member_refused_before_reading(tmp_path):
    path = tmp_path / "model.npz"
    path.write_bytes(_archive({"c::W.npy": npy_bytes((1 << 31,))}))
    with pytest.raises(glcnn.ModelFileError, match="memory budget"):
        glcnn.load_graph(path)


class _Payload:
    """Unpickling this creates a marker file: proof that something was unpickled."""

    marker: pathlib.Path

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


def test_pickled_members_are_never_unpickled(tmp_path):
    _Payload.marker = tmp_path / "unpickled"
    evil = np.empty(1, object)
    evil[0] = _Payload()
    doc, arrays = graph_doc(small_graph())
    path = write_npz(tmp_path / "evil.npz", doc, {**arrays, "c::W": evil})
    with pytest.raises(glcnn.ModelFileError, match="nothing is unpickled"):
        glcnn.load_graph(path)
    with pytest.raises(glcnn.ModelFileError):
        glcnn.load_state_dict(small_graph(), path)
    assert not _Payload.marker.exists()


def test_weight_shape_mismatch_names_layer_and_shapes(tmp_path):
    """Refused at load, from the members' .npy headers (before their data is read)."""
    def bad_w(doc, arrays):
        arrays["c::W"] = np.ones((4, 2, 3, 3), np.float32)  # 2 input channels, input has 3
    with pytest.raises(glcnn.GlcnnError, match=r"m\.npz.*'c'.*\(4, 2, 3, 3\)"):
        glcnn.load_graph(mutated_npz(tmp_path, bad_w))

    def bad_b(doc, arrays):
        arrays["c::B"] = np.ones(7, np.float32)
    with pytest.raises(glcnn.WeightError, match=r"m\.npz.*'c'.*'B'.*\(7,\)"):
        glcnn.load_graph(mutated_npz(tmp_path, bad_b))


@pytest.mark.parametrize("attrs", [{"strides": "two"}, {"group": [1]}, {"activation": "Relu"},
                                   {"pads": [1, 1]}, {"dilations": None}])
def test_malformed_attributes_name_the_layer(attrs, tmp_path):
    """Sizing attributes are checked at import (GraphError), the rest by the op."""
    with pytest.raises((glcnn.GraphError, glcnn.UnsupportedOpError), match="layer 'c'"):
        optimize(glcnn.load_graph(mutated_npz(tmp_path, _node(0, attrs=attrs))))


def test_builder_graphs_refuse_nan_weights():
    graph = small_graph()
    graph.node("c").weights["W"][0, 0, 0, 0] = np.inf
    with pytest.raises(glcnn.WeightError, match=r"layer 'c' \(Conv\): weight 'W'.*NaN or Inf"):
        build_ops(graph)


# --- ONNX ----------------------------------------------------------------------------------------
def onnx_model(input_dims=(1, 3, 4, 5), w=None, nodes=None, extra_inits=()):
    """A Conv (+Relu) model; `nodes` replaces the node list."""
    from onnx import TensorProto, helper, numpy_helper
    w = np.ones((2, input_dims[1], 3, 3), np.float32) if w is None else w
    nodes = nodes or [helper.make_node("Conv", ["x", "W"], ["h"], name="conv", pads=[1] * 4),
                      helper.make_node("Relu", ["h"], ["y"], name="relu")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(input_dims))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "W"), *extra_inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def save_onnx(model, path: Path) -> Path:
    path.write_bytes(model.SerializeToString())
    return path


def _onnx_node(op, inputs, outputs, **attrs):
    from onnx import helper
    return helper.make_node(op, inputs, outputs, name=outputs[0], **attrs)


ONNX_CASES = {  # id: (model, error, message fragment)
    "huge-input": (lambda: onnx_model((1, 1, 100000, 100000)), glcnn.TextureSizeError,
                   "100000"),
    "zero-dim": (lambda: onnx_model((1, 3, 0, 5)), glcnn.GlcnnError, ""),
    "cycle": (lambda: onnx_model(nodes=[_onnx_node("Relu", ["y"], ["h"]),
                                        _onnx_node("Relu", ["h"], ["y"])]),
              glcnn.ModelFileError, "cycle"),
    "dangling-edge": (lambda: onnx_model(nodes=[_onnx_node("Relu", ["ghost"], ["y"])]),
                      glcnn.ModelFileError, "'ghost'"),
    "duplicated-name": (lambda: onnx_model(nodes=[_onnx_node("Relu", ["x"], ["y"]),
                                                  _onnx_node("Relu", ["x"], ["y"])]),
                        glcnn.ModelFileError, "duplicated"),
    "weight-shape": (lambda: onnx_model(w=np.ones((2, 5, 3, 3), np.float32)),
                     glcnn.GlcnnError, ""),
    "nan-weight": (lambda: onnx_model(w=np.full((2, 3, 3, 3), np.nan, np.float32)),
                   glcnn.WeightError, "NaN or Inf"),
    "huge-constant": (lambda: onnx_model(
        nodes=[_onnx_node("ConstantOfShape", ["shape"], ["big"]),
               _onnx_node("Add", ["x", "big"], ["y"])],
        extra_inits=[_int64_init("shape", [1, 3, 100000, 100000])]),
        glcnn.GlcnnError, "constant of"),
    "bad-utf8-attribute": (lambda: onnx_model(
        nodes=[_onnx_node("Pad", ["x", "pads"], ["y"], mode=b"\xff\xfe")],
        extra_inits=[_int64_init("pads", [0] * 8)]), glcnn.GlcnnError, "'mode'"),
}


def _int64_init(name, values):
    from onnx import numpy_helper
    return numpy_helper.from_array(np.array(values, np.int64), name)


@pytest.mark.parametrize("case", ONNX_CASES)
def test_onnx_structure_is_validated(case, tmp_path):
    build, error, fragment = ONNX_CASES[case]
    path = save_onnx(build(), tmp_path / "m.onnx")
    with pytest.raises(error, match=_escaped(fragment) if fragment else None):
        optimize(glcnn.load_graph(path))


@pytest.mark.parametrize("case", ["empty", "truncated", "garbage", "npz-bytes", "invalid-utf8"])
def test_onnx_bytes_are_validated(case, tmp_path):
    ok = onnx_model().SerializeToString()
    data = {"empty": b"", "truncated": ok[:len(ok) // 2], "garbage": b"\xff" * 300,
            "npz-bytes": _valid_npz_bytes(tmp_path),
            "invalid-utf8": ok.replace(b"Relu", b"\x80elu")}[case]
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    with pytest.raises(glcnn.ModelFileError, match="m.onnx"):
        glcnn.load_graph(path)


# --- 2. sizes: GL_MAX_TEXTURE_SIZE and the memory budget, before any allocation -----------------
def relu_graph(shape) -> Graph:
    b = Builder()
    return b.build([b.activation(b.input("x", shape), "Relu", name="y")])


def test_default_budget_refuses_before_allocating(ctx):
    before = census()
    with pytest.raises(glcnn.TextureSizeError, match="over the memory budget of 2,048.0 MiB"):
        glcnn.Pipeline(relu_graph((3, 16000, 16000)), ctx)
    no_gl_objects_left(before)


def test_budget_argument_and_environment(ctx, monkeypatch):
    graph = models.autoencoder(size=(8, 8))
    ctx.buffer_fits(1)  # the buffer probe's program stays in the context's program cache
    before = census()
    with pytest.raises(glcnn.TextureSizeError, match="memory budget of 0.1 MiB"):
        glcnn.Pipeline(graph, ctx, memory_budget=100_000)
    monkeypatch.setenv("GLCNN_MEMORY_BUDGET", "100K")
    with pytest.raises(glcnn.TextureSizeError, match="GLCNN_MEMORY_BUDGET"):
        glcnn.Pipeline(graph, ctx)
    no_gl_objects_left(before)
    glcnn.Pipeline(graph, ctx, memory_budget="1GiB").release()  # the argument wins
    monkeypatch.setenv("GLCNN_MEMORY_BUDGET", "lots")
    with pytest.raises(glcnn.GlcnnError, match="not a size"):
        glcnn.Pipeline(graph, ctx)


@pytest.mark.parametrize("strategy", ["direct", "blocked"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_budget_counts_texture_reuse_and_weights(ctx, precision, strategy):
    # The budget is checked from shapes before anything is allocated; texture_bytes() adds up
    # the textures and buffers made (the blocked passes' scratch arrays and input buffers,
    # float32 for fp16 atlases, included).
    graph = models.autoencoder(size=(8, 8))
    kw = {"precision": precision, "strategy": strategy}
    with glcnn.Pipeline(graph, ctx, **kw) as pipe:
        exact = pipe.texture_bytes()
        assert (strategy == "blocked") == any(p.input_buffer for p in pipe.passes)
    glcnn.Pipeline(graph, ctx, memory_budget=exact, **kw).release()  # exactly enough
    with pytest.raises(glcnn.TextureSizeError):
        glcnn.Pipeline(graph, ctx, memory_budget=exact - 1, **kw)


def test_over_max_texture_size_allocates_nothing(ctx):
    before = census()
    with pytest.raises(glcnn.TextureSizeError, match=r"'x'.*this GL allows"):
        glcnn.Pipeline(relu_graph((4, 8, ctx.max_texture_size + 8)), ctx)
    no_gl_objects_left(before)


def test_failed_compile_releases_what_it_allocated(ctx, monkeypatch):
    graph = models.autoencoder(size=(8, 8))
    glcnn.Pipeline(graph, ctx).release()  # programs cached: the census then sees only our objects
    before = census()
    real = type(ctx).program

    def failing(self, shader, defines, layer="?"):
        if layer == "dec1":
            raise glcnn.ShaderCompileError(shader, layer, defines, "injected", "")
        return real(self, shader, defines, layer)
    monkeypatch.setattr(type(ctx), "program", failing)
    with pytest.raises(glcnn.ShaderCompileError, match="dec1"):
        glcnn.Pipeline(graph, ctx)
    no_gl_objects_left(before)


def test_driver_out_of_memory_is_a_context_error(ctx):
    """llvmpipe refuses a 4 GiB texture with GL_OUT_OF_MEMORY (moderngl does not raise)."""
    side = ctx.max_texture_size
    before = census()
    with pytest.raises(glcnn.ContextError, match="GL_OUT_OF_MEMORY"):
        glcnn.Pipeline(relu_graph((4, side, side)), ctx, memory_budget="64G")
    no_gl_objects_left(before)


# --- 4. inputs ---------------------------------------------------------------------------------
@pytest.fixture
def pipe(ctx):
    with glcnn.Pipeline(small_graph(), ctx) as p:
        yield p


def _x():
    return np.random.default_rng(2).standard_normal((3, 4, 5)).astype(np.float32)


BAD_INPUTS = {  # id: (array, message fragment)
    "wrong-shape": (np.zeros((3, 4, 6), np.float32), "expected (3, 4, 5)"),
    "channels-last": (np.zeros((4, 5, 3), np.float32), "channels-last"),
    "channels-last-batched": (np.zeros((1, 4, 5, 3), np.float32), "channels-last"),
    "batch-2": (np.zeros((2, 3, 4, 5), np.float32), "batch 1"),
    "strings": (np.full((3, 4, 5), "a"), "dtype <U1"),
    "objects": (np.full((3, 4, 5), None, object), "dtype object"),
    "bool": (np.zeros((3, 4, 5), bool), "dtype bool"),
    "complex": (np.zeros((3, 4, 5), np.complex64), "dtype complex64"),
    "ragged": ([[1.0, 2.0], [3.0]], "not an array"),
    "nan": (np.where(np.arange(60).reshape(3, 4, 5) == 7, np.nan, 0.0), "1 NaN and 0 Inf"),
    "inf": (np.full((3, 4, 5), -np.inf, np.float32), "0 NaN and 60 Inf"),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_inputs_are_refused(case, pipe):
    value, fragment = BAD_INPUTS[case]
    with pytest.raises(glcnn.ShapeError, match=_escaped(fragment)):
        pipe.run(value)


def test_unknown_input_name_is_refused(pipe):
    with pytest.raises(glcnn.ShapeError, match="no model input named 'z'"):
        pipe.upload("z", _x())


def _layouts(x):
    f = np.asfortranarray(x)
    wide = np.zeros((3, 4, 10), np.float32)
    wide[:, :, ::2] = x
    return {"fortran": f, "strided": wide[:, :, ::2],
            "negative-strides": np.ascontiguousarray(x[:, ::-1, ::-1])[:, ::-1, ::-1],
            "transposed": np.ascontiguousarray(x.transpose(2, 1, 0)).transpose(2, 1, 0),
            "float64": x.astype(np.float64), "int16": np.round(x * 10).astype(np.int16),
            "list": x.tolist(), "batched-view": np.broadcast_to(x, (1, 3, 4, 5))}


@pytest.mark.parametrize("layout", list(_layouts(_x())))
def test_any_strides_and_real_dtypes_give_the_right_answer(layout, pipe):
    x = _layouts(_x())[layout]
    values = np.asarray(x, np.float64).reshape(3, 4, 5)
    if layout in ("fortran", "strided", "negative-strides", "transposed"):
        assert not x.flags.c_contiguous and np.array_equal(values, _x())
    expected = reference.run(pipe.graph, {"x": values})["y"]
    y = pipe.run(x)
    np.testing.assert_allclose(y.reshape(4, 4, 5), expected, atol=1e-5)


# --- 4. images of any mode (GL-free conversion; one end-to-end run) ------------------------------
def _rgb(h=4, w=5):
    return np.random.default_rng(3).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _image(mode: str) -> tuple[Image.Image, np.ndarray]:
    """An image of `mode` and the (H, W, 3) RGB in [0, 1] a 3-channel model must get."""
    rgb = _rgb()
    if mode == "RGBA":
        alpha = np.full((4, 5, 1), 7, np.uint8)
        return Image.fromarray(np.concatenate([rgb, alpha], 2)), rgb / 255
    if mode == "L":
        return Image.fromarray(rgb[..., 0]), np.repeat(rgb[..., :1], 3, 2) / 255
    if mode == "I;16":
        grey = (rgb[..., 0].astype(np.int64) * 257 + 40000) % 65536
        return Image.fromarray(grey.astype(np.uint16)), np.repeat(grey[..., None], 3, 2) / 65535
    if mode == "P":
        image = Image.fromarray(rgb).convert("P")  # adaptive palette: colours change
        return image, np.asarray(image.convert("RGB")) / 255
    if mode == "1":
        bits = rgb[..., 0] > 127
        return Image.fromarray(bits), np.repeat(bits[..., None], 3, 2).astype(float)
    raise AssertionError(mode)


@pytest.mark.parametrize("mode", ["RGBA", "L", "I;16", "P", "1"])
def test_image_modes_are_converted(mode, tmp_path):
    image, expected = _image(mode)
    assert image.mode == mode
    image.save(tmp_path / "in.png")
    x = read_image(tmp_path / "in.png", (3, 4, 5))
    np.testing.assert_allclose(x, expected.transpose(2, 0, 1), atol=1e-6)
    grey = read_image(tmp_path / "in.png", (1, 4, 5))[0]
    np.testing.assert_allclose(grey, expected @ [0.299, 0.587, 0.114], atol=1e-5)


def test_sixteen_bit_images_are_not_clipped_to_eight_bits(tmp_path):
    Image.fromarray(np.full((4, 5), 60000, np.uint16)).save(tmp_path / "g16.png")
    x = read_image(tmp_path / "g16.png", (1, 4, 5))
    np.testing.assert_allclose(x, 60000 / 65535, rtol=1e-6)


def test_images_of_unknown_range_are_refused(tmp_path):
    Image.fromarray(np.full((4, 5), 0.5, np.float32)).save(tmp_path / "f.tif")
    with pytest.raises(glcnn.ShapeError, match="32-bit float image"):
        read_image(tmp_path / "f.tif", (3, 4, 5))
    with pytest.raises(glcnn.ShapeError, match="2 channels"):
        read_image(tmp_path / "f.tif", (2, 4, 5))
    (tmp_path / "bad.png").write_bytes(b"\x89PNG\r\n\x1a\nnope")
    with pytest.raises(glcnn.ShapeError, match="cannot read image"):
        read_image(tmp_path / "bad.png", (3, 4, 5))


def test_bad_npy_inputs_are_refused(tmp_path):
    from glcnn.inputs import read_npy
    (tmp_path / "short.npy").write_bytes(npy_bytes((1 << 40,), payload=b"\0" * 64))
    with pytest.raises(glcnn.ShapeError, match="truncated"):
        read_npy(tmp_path / "short.npy")
    np.save(tmp_path / "obj.npy", np.array([None, 1], object), allow_pickle=True)
    with pytest.raises(glcnn.ShapeError, match="dtype object"):
        read_npy(tmp_path / "obj.npy")


def test_cli_runs_rgba_and_16_bit_images(tmp_path):
    """End to end: an identity-like model writes back exactly the converted pixels."""
    glcnn.save(relu_graph((3, 4, 5)), tmp_path / "m.npz")
    for mode in ("RGBA", "I;16"):
        image, expected = _image(mode)
        image.save(tmp_path / "in.png")
        done = subprocess.run([sys.executable, "-m", "glcnn.cli", "run", tmp_path / "m.npz",
                               tmp_path / "in.png", "-o", tmp_path / "y.npy"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        y = np.load(tmp_path / "y.npy")
        np.testing.assert_allclose(y, expected.transpose(2, 0, 1), atol=1e-6)
        assert ("alpha" in done.stderr) == (mode == "RGBA")


# --- 5. released pipelines, lost contexts, threads -----------------------------------------------
def test_released_pipeline_raises_glcnn_errors(ctx):
    p = glcnn.Pipeline(small_graph(), ctx)
    p.release()
    p.release()  # twice is harmless
    for call in (lambda: p.run(_x()), p.execute, lambda: p.read("y"),
                 lambda: p.upload("x", _x()), lambda: p.texture("y")):
        with pytest.raises(glcnn.GlcnnError, match="released Pipeline"):
            call()


LOST_CONTEXT = """
import moderngl, numpy as np, glcnn
from glcnn.graph import models
gl = moderngl.create_context(standalone=True, require=330, backend="egl")
pipe = glcnn.Pipeline(models.autoencoder(size=(8, 8)), glcnn.Context(gl))
gl.release()
try:
    pipe.run(np.zeros((3, 8, 8), np.float32))
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def test_lost_context_is_a_context_error_not_a_crash():
    done = subprocess.run([sys.executable, "-c", LOST_CONTEXT], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ContextError "), done.stdout


def _in_thread(fn):
    errors = []

    def target():
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            errors.append(exc)
    thread = threading.Thread(target=target)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "a call from another thread hung"
    return errors[0] if errors else None


def test_every_gl_entry_point_refuses_other_threads(ctx, pipe):
    before = census()
    calls = {"compile": lambda: glcnn.Pipeline(small_graph(), ctx),
             "execute": pipe.execute, "upload": lambda: pipe.upload("x", _x()),
             "read": lambda: pipe.read("y"), "release": pipe.release,
             "program": lambda: ctx.program("activation.glsl", {"ACT_RELU": 1}),
             "texture": lambda: pipe.texture("y"),
             "weight_texture": lambda: pipe.weight_texture(pipe.passes[0].op.node.name),
             "readback": pipe.run(_x(), readback="async").result,
             "wrap": lambda: glcnn.Context.wrap(ctx.gl)}
    for name, call in calls.items():
        error = _in_thread(call)
        assert isinstance(error, glcnn.ContextError), (name, error)
        assert "thread other than the one that created it" in str(error)
    no_gl_objects_left(before)
    assert pipe.run(_x()).shape == (4, 4, 5)  # still usable on its own thread


# --- 6. safe by default --------------------------------------------------------------------------
def _calls(tree, name):
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        getattr(n.func, "attr", None) == name or getattr(n.func, "id", None) == name)]


# The modules allowed to import torch: `glcnn bench --against torch` runs a graph with
# torch.nn.functional (torch_runner.py and the builders it imports from torch_seq.py); they
# are imported only for that, and must not load anything with torch.
TORCH_RUNNER = ("torch_runner.py", "torch_seq.py")


def test_nothing_is_unpickled_anywhere_in_the_package():
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        tree = ast.parse(text)
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)
                    for a in n.names} | {n.module for n in ast.walk(tree)
                                         if isinstance(n, ast.ImportFrom) and n.module}
        banned = {"pickle", "cPickle", "dill", "joblib"}
        banned |= set() if path.name in TORCH_RUNNER else {"torch"}
        assert not imported & banned, path
        if path.name in TORCH_RUNNER:
            assert not _calls(tree, "load") and "jit" not in text, path
        for call in _calls(tree, "load"):
            if ast.unparse(call.func) in ("np.load", "numpy.load"):
                kw = {k.arg: ast.unparse(k.value) for k in call.keywords}
                assert kw.get("allow_pickle") == "False", f"{path}:{call.lineno}"
        assert "allow_pickle=True" not in text, path


INJECTED = "#define KH 0\nvoid main() {}\n#version"


def _hostile_graph() -> Graph:
    """Layer names, tensor names and attributes carrying GLSL."""
    w = np.ones((4, 3, 1, 1), np.float32)
    name = f"x\n{INJECTED}"
    nodes = [Node("Conv", f"conv\n{INJECTED}", [name], {"note": INJECTED, "auto_pad": INJECTED,
                                                        "strides": [1, 1]}, {"W": w}),
             Node("Relu", f"relu */ {INJECTED}", [f"conv\n{INJECTED}"], {"comment": INJECTED})]
    return Graph({name: (3, 4, 5)}, nodes, [f"relu */ {INJECTED}"], {"note": INJECTED})


def _fresh_context():
    """A context of its own: a context builds a program's source once (Context.program), so
    the spies below see every source only where no earlier test built it."""
    return glcnn.Context()


@pytest.mark.gl
def test_model_strings_never_reach_shader_sources(monkeypatch, tmp_path):
    sources = []

    def spy(shader, defines):
        sources.append(build_source(shader, defines))
        return sources[-1]
    monkeypatch.setattr("glcnn.runtime.shaders.build_source", spy)
    glcnn.save(_hostile_graph(), tmp_path / "hostile.npz")
    graph = optimize(glcnn.load_graph(tmp_path / "hostile.npz"))
    own = _fresh_context()
    try:
        with glcnn.Pipeline(graph, own) as p:
            y = p.run(np.ones((3, 4, 5), np.float32))
            programs = len(own.programs)
    finally:
        own.gl.release()
    assert y.shape == (4, 4, 5) and np.allclose(y, 3.0)
    assert len(sources) == programs > 0
    assert not any("void main() {}" in s or "#define KH 0" in s for s in sources)


@pytest.mark.parametrize("attrs", [
    {"mode": "constant\n#define X 1"},
    {"activation": {"op": "Relu\n#define X 1"}},
    {"input_activation": {"op": "Relu\n#define X 1"}},
    {"input_activation": "Relu"},
    {"input_activation": {"op": "Relu"}, "mode": "constant", "pads": [0, 0, 1, 1, 0, 0, 1, 1]},
])
def test_attribute_strings_that_would_be_defines_are_refused(attrs, ctx):
    op = "Pad" if "mode" in attrs else "Conv"  # a Pad takes no input_activation either
    weights = {} if op == "Pad" else {"W": np.ones((4, 3, 1, 1), np.float32)}
    attrs = {"pads": [0, 0, 1, 1, 0, 0, 1, 1]} | attrs if op == "Pad" else attrs
    graph = Graph({"x": (3, 4, 5)}, [Node(op, "y", ["x"], attrs, weights)], ["y"])
    with pytest.raises(glcnn.UnsupportedOpError, match="'y'"):
        glcnn.Pipeline(graph, ctx)


def test_build_source_accepts_only_identifiers_and_integers():
    assert "#define KH 3" in build_source("conv.glsl", {"KH": 3})
    for defines in ({"KH\n#define X": 1}, {"KH": "3\n#define X 1"}, {"KH": 1.5}):
        with pytest.raises(glcnn.GlcnnError, match="refusing #define"):
            build_source("conv.glsl", defines)


@pytest.mark.gl
def test_onnx_names_and_attribute_strings_cannot_inject(tmp_path, monkeypatch):
    from onnx import helper
    nodes = [helper.make_node("Conv", ["x", "W"], ["h\n" + INJECTED], name="conv\n" + INJECTED,
                              pads=[1] * 4, auto_pad="NOTSET", doc_string=INJECTED),
             helper.make_node("Relu", ["h\n" + INJECTED], ["y"], name="relu */" + INJECTED)]
    path = save_onnx(onnx_model(nodes=nodes), tmp_path / "hostile.onnx")
    sources = []
    monkeypatch.setattr("glcnn.runtime.shaders.build_source",
                        lambda s, d: sources.append(build_source(s, d)) or sources[-1])
    own = _fresh_context()
    try:
        with glcnn.load(path, own) as p:
            assert p.run(np.ones((1, 3, 4, 5), np.float32)).shape == (1, 2, 4, 5)
            programs = len(own.programs)
    finally:
        own.gl.release()
    assert len(sources) == programs > 0 and not any("void main() {}" in s for s in sources)


@pytest.mark.parametrize("where", ["parent", "absolute"])
def test_tfjs_shards_must_stay_next_to_model_json(where, tmp_path):
    source = ROOT / "tests" / "data" / "tfjs" / "quantized"
    folder = tmp_path / "model"
    shutil.copytree(source, folder)
    doc = json.loads((folder / "model.json").read_text())
    outside = tmp_path / "outside.bin"
    shutil.move(folder / doc["weightsManifest"][0]["paths"][0], outside)
    doc["weightsManifest"][0]["paths"] = ["../outside.bin" if where == "parent" else str(outside)]
    (folder / "model.json").write_text(json.dumps(doc))
    with pytest.raises(glcnn.ModelFileError):
        glcnn.load_graph(folder / "model.json")
