"""Fuzz every registered importer with mutated valid model files.

Each case writes a mutated model, then loads, optimises, compiles it on the shared GL
context and runs it on zeros. It must end in success or a GlcnnError: any other exception,
a GL error left behind, a leaked GL object (tests/gl_census.py; programs excepted, they are
cached by design) or a case longer than CASE_SECONDS fails the test. Mutations:

- bytes: flips, truncation, insertion, deletion and overwrites of one file of the model
  (most often the model file itself);
- ONNX structure: input dims and types, initializers (shape, dtype, NaN/Inf), op types,
  edges (dangling, cycles, duplicated outputs), attributes (huge, negative, strings with
  GLSL, invalid UTF-8), node order, domains, opset, outputs;
- .npz structure: any value of the graph JSON (types, names, dims, attributes), weight
  arrays (shape, dtype, NaN/Inf, pickled objects), members removed or added, and bytes
  edited inside one .npy member of an otherwise valid zip;
- TF.js structure: any value of model.json (topology, layer configs, weightsManifest:
  shapes, dtypes, shard paths), and weight shards truncated, extended, emptied or removed.

CI runs CI_EXAMPLES cases per test (derandomised: the same cases every run, a few hundred
in all); GLCNN_FUZZ_EXAMPLES=N runs N per test (README "Limits and errors" records the
long run). With `-s` the outcome counts are printed.
"""

import collections
import copy
import io
import json
import os
import shutil
import signal
import tempfile
import zipfile
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from gl_census import census
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import glcnn
from glcnn.graph.passes import optimize
from glcnn.importers import IMPORTERS

CASE_SECONDS = 10
CI_EXAMPLES = 60
EXAMPLES = int(os.environ.get("GLCNN_FUZZ_EXAMPLES", "0") or 0) or CI_EXAMPLES
FUZZ = settings(max_examples=EXAMPLES, deadline=CASE_SECONDS * 1000, derandomize=True,
                database=None, print_blob=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])
OUTCOMES: collections.Counter = collections.Counter()
INJECT = "x\n#define KH 0\nvoid main() {}\n"
MAIN = {".onnx": "model.onnx", ".npz": "model.npz", ".json": "model.json"}
TFJS_SEEDS = ("skips", "quantized", "activations")  # small fixtures of test_tfjs_import.py


# --- the check every case goes through ---------------------------------------------------------
class Hang(BaseException):
    """A case ran longer than CASE_SECONDS (BaseException: no `except Exception` eats it)."""


def _alarm(signum, frame):
    raise Hang(f"a case took more than {CASE_SECONDS} s")


def check_case(path: Path, ctx, label: str) -> None:
    """Load, optimise, compile and run `path`; only a GlcnnError may stop it."""
    before = census()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    try:
        outcome = load_and_run(path, ctx)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    OUTCOMES[f"{label}: {outcome}"] += 1
    assert ctx.gl.error == "GL_NO_ERROR", f"{label}: a GL error was left behind"
    after = census()
    leaked = {k: (before[k], after[k]) for k in before if k != "Program" and before[k] != after[k]}
    assert not leaked, f"{label}: GL objects leaked {leaked}"


def load_and_run(path: Path, ctx) -> str:
    """"ran", or the name of the GlcnnError that refused the model."""
    try:
        graph = optimize(glcnn.load_graph(path))
        with glcnn.Pipeline(graph, ctx) as pipe:
            pipe.run({name: np.zeros(shape, np.float32) for name, shape in graph.inputs.items()})
    except glcnn.GlcnnError as exc:
        return type(exc).__name__
    return "ran"


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    for outcome, count in sorted(OUTCOMES.items()):
        print(f"fuzz {outcome}: {count}")


def write_case(folder: Path, files: dict[str, bytes], suffix: str) -> Path:
    """Write one case's files into a fresh `folder`; returns the model file."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder / MAIN[suffix]


# --- seeds: small valid models touching many ops -------------------------------------------
def _onnx_nodes(helper):
    n = helper.make_node
    return [
        n("Conv", ["x", "W1", "B1"], ["c1"], name="conv", pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c1", "s", "b", "m", "v"], ["bn"], name="bn"),
        n("Relu", ["bn"], ["r"], name="relu"),
        n("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        n("Resize", ["p", "", "scales"], ["up"], name="resize", mode="nearest"),
        n("Concat", ["up", "x"], ["cat"], name="concat", axis=1),
        n("Pad", ["cat", "pads"], ["pd"], name="pad", mode="reflect"),
        n("Slice", ["pd", "starts", "ends", "axes"], ["sl"], name="slice"),
        n("Mul", ["sl", "half"], ["mu"], name="mul"),
        n("GlobalAveragePool", ["mu"], ["g"], name="gap"),
        n("Flatten", ["g"], ["fl"], name="flatten"),
        n("Gemm", ["fl", "G", "C"], ["gm"], name="gemm", transB=1),
        n("Softmax", ["gm"], ["y"], name="softmax", axis=1),
    ]


def _onnx_initializers(numpy_helper):
    rng = np.random.default_rng(0)
    arrays = {
        "W1": rng.standard_normal((4, 3, 3, 3)), "B1": rng.standard_normal(4),
        "s": rng.random(4) + 0.5, "b": rng.standard_normal(4), "m": rng.standard_normal(4),
        "v": rng.random(4) + 0.5, "scales": [1, 1, 2, 2], "half": [0.5],
        "G": rng.standard_normal((5, 7)), "C": rng.standard_normal(5),
    }
    ints = {"pads": [0, 0, 1, 1, 0, 0, 1, 1], "starts": [1, 1], "ends": [9, 9], "axes": [2, 3]}
    return [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in arrays.items()] + \
        [numpy_helper.from_array(np.asarray(v, np.int64), k) for k, v in ints.items()]


def onnx_seed() -> bytes:
    """x (1, 3, 8, 8) → Conv, BN, Relu, MaxPool, Resize, Concat, Pad, Slice, Mul, GAP,
    Flatten, Gemm, Softmax → y (1, 5)."""
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(
        _onnx_nodes(helper), "seed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        _onnx_initializers(numpy_helper))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def onnx_big_weights_seed() -> bytes:
    """x (1, 8, 4, 4) → Conv 8→64 3×3, Relu, ConvTranspose 64→8 3×3 → y: both weights have
    more than onnx_fold.INFER_DATA_LIMIT elements, so the importer reads them as views of the
    file (glcnn/importers/onnx_wire.py) and byte edits land in that walker's input."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(1)
    n = helper.make_node
    nodes = [n("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             n("Relu", ["c"], ["r"], name="relu"),
             n("ConvTranspose", ["r", "T", "B"], ["y"], name="up", pads=[1, 1, 1, 1])]
    weights = {"W": rng.standard_normal((64, 8, 3, 3)), "T": rng.standard_normal((64, 8, 3, 3)),
               "B": rng.standard_normal(8)}
    graph = helper.make_graph(
        nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4, 4])],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def npz_seeds() -> list[bytes]:
    """The ONNX seed as a native graph (unoptimised), and an 8×8 autoencoder."""
    from glcnn.graph import models
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        (folder / "seed.onnx").write_bytes(onnx_seed())
        graphs = [glcnn.load_graph(folder / "seed.onnx"), models.autoencoder(size=(8, 8))]
        for i, graph in enumerate(graphs):
            glcnn.save(graph, folder / f"seed{i}.npz")
        return [(folder / f"seed{i}.npz").read_bytes() for i in range(len(graphs))]


def tfjs_seeds() -> list[dict[str, bytes]]:
    """TF.js fixtures (tests/data/tfjs): model.json and its shards, by file name."""
    root = Path(__file__).resolve().parents[1] / "data" / "tfjs"
    return [{f.name: f.read_bytes() for f in sorted((root / name).iterdir())
             if f.name == "model.json" or f.suffix == ".bin"} for name in TFJS_SEEDS]


@cache
def seeds(suffix: str) -> tuple[dict[str, bytes], ...]:
    """Seed models of the importer for `suffix`, each as {file name: bytes}; () if none."""
    if suffix == ".onnx":
        return ({MAIN[suffix]: onnx_seed()}, {MAIN[suffix]: onnx_big_weights_seed()})
    if suffix == ".npz":
        return tuple({MAIN[suffix]: data} for data in npz_seeds())
    if suffix == ".json":
        return tuple(tfjs_seeds())
    return ()


def test_every_registered_importer_is_fuzzed():
    missing = sorted(s for s in IMPORTERS if not seeds(s) or s not in STRUCTURE)
    assert not missing, f"no fuzz seeds or mutations for importers {missing}: add them here"


@pytest.mark.parametrize("suffix", sorted(IMPORTERS))
def test_seeds_are_valid_models(suffix, tmp_path, ctx):
    for files in seeds(suffix):
        path = write_case(tmp_path / "case", files, suffix)
        assert load_and_run(path, ctx) == "ran", (suffix, sorted(files))


# --- byte mutations (every importer) -------------------------------------------------------
def _byte_edit():
    pos = st.integers(0, 2**31)
    return st.one_of(
        st.tuples(st.just("flip"), pos, st.integers(1, 255)),
        st.tuples(st.just("truncate"), pos, st.just(0)),
        st.tuples(st.just("insert"), pos, st.binary(min_size=1, max_size=16)),
        st.tuples(st.just("delete"), pos, st.integers(1, 64)),
        st.tuples(st.just("overwrite"), pos, st.binary(min_size=1, max_size=8)))


def apply_bytes(data: bytes, edits) -> bytes:
    """`data` after each (kind, position, argument) edit; positions wrap around."""
    out = bytearray(data)
    for kind, pos, arg in edits:
        pos %= max(len(out), 1)
        if kind == "flip" and out:
            out[pos] ^= arg
        elif kind == "truncate":
            del out[pos:]
        elif kind == "insert":
            out[pos:pos] = arg
        elif kind == "delete":
            del out[pos:pos + arg]
        elif kind == "overwrite":
            out[pos:pos + len(arg)] = arg
    return bytes(out)


@pytest.mark.parametrize("suffix", sorted(IMPORTERS))
@FUZZ
@given(data=st.data())
def test_fuzz_bytes(suffix, data, tmp_path, ctx):
    index = data.draw(st.integers(0, len(seeds(suffix)) - 1), label="seed")
    files = dict(seeds(suffix)[index])
    names = sorted(files, key=lambda name: name != MAIN[suffix])  # the model file first
    target = data.draw(st.sampled_from(names[:1] * 3 + names), label="file")
    files[target] = apply_bytes(files[target], data.draw(
        st.lists(_byte_edit(), min_size=1, max_size=4), label="edits"))
    check_case(write_case(tmp_path / "case", files, suffix), ctx, f"bytes{suffix}")


# --- shared: hostile values ----------------------------------------------------------------
DIMS = [-1, 0, 1, 2, 3, 7, 100000, 2**31 - 1, 2**62]
HOSTILE_JSON = [None, True, 0, -1, 1, 3, 2**31, 2**63, -2**63, 1e308, 0.5, float("nan"),
                float("inf"), "", "x", "Relu", "Conv", "Concat", INJECT, [], [0], [1, 1],
                [1, 1, 1, 1], [-1, -1, -1, -1], [2**40, 2**40], {}, {"op": "Relu"},
                {"op": "Nope"}, [[]], [3, 8, 8], [1, 100000, 100000], "same", "valid",
                "channels_first", "float16", "uint8", [None, 8, 8, 3],
                "../../../../etc/passwd", "model.json"]


def _hostile_array(data) -> np.ndarray:
    shape = data.draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, 5, 7]), max_size=4), label="shape")
    dtype = data.draw(st.sampled_from(["float32", "float64", "float16", "int64", "int32",
                                       "uint8", "bool"]), label="dtype")
    fill = data.draw(st.sampled_from([0.0, 1.0, -3.0, 1e30, float("nan"), float("inf")]))
    with np.errstate(all="ignore"):
        return np.full(shape, fill).astype(dtype)


def _json_names(doc) -> list[str]:
    """Every string of a JSON document that names something ("name" values, input names)."""
    names, stack = set(), [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            names.update(v for k, v in item.items() if k == "name" and isinstance(v, str))
            if isinstance(item.get("inputs"), dict):
                names.update(item["inputs"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return sorted(names)


def _pick_slot(data, doc):
    """A (container, key) somewhere in a JSON tree, by a random walk from the root that
    goes deeper three times in four (layer attributes and configs lie deep)."""
    node = doc
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            return None, None
        key = data.draw(st.sampled_from(keys))
        child = node[key]
        if isinstance(child, dict | list) and child and data.draw(st.integers(0, 3)) > 0:
            node = child
            continue
        return node, key


def mutate_json(data, doc) -> None:
    """Replace (by a hostile value or another name of the document) or delete one value."""
    container, key = _pick_slot(data, doc)
    if container is None:
        return
    if data.draw(st.integers(0, 4)) == 0:
        del container[key]
    else:
        # a copy: later mutations may edit the inserted value, never the shared constant
        container[key] = copy.deepcopy(data.draw(st.sampled_from(HOSTILE_JSON + _json_names(doc))))


# --- ONNX structure ------------------------------------------------------------------------
OPS = ["Conv", "Relu", "Add", "Concat", "MaxPool", "Resize", "Gemm", "Reshape", "Flatten",
       "Softmax", "Pad", "Slice", "ConvTranspose", "DepthToSpace", "ConstantOfShape", "Expand",
       "Tile", "Range", "Loop", "If", "Identity", "Cast", "Shape", "Foo"]
ATTR_NAMES = ["pads", "strides", "kernel_shape", "dilations", "group", "axis", "mode",
              "auto_pad", "alpha", "blocksize", "to", "scales", "value", "epsilon", "transB",
              "ceil_mode", "coordinate_transformation_mode", "output_padding", "output_shape"]
ATTR_VALUES = st.one_of(
    st.sampled_from(DIMS), st.lists(st.sampled_from(DIMS), min_size=0, max_size=8),
    st.sampled_from([float("nan"), float("inf"), -1e30, 0.0, 0.5]),
    st.lists(st.sampled_from([float("nan"), 2.0, -1.0, 1e30]), min_size=1, max_size=4),
    st.sampled_from(["", "SAME_UPPER", "nearest", "linear", "reflect", "DCR", INJECT,
                     b"\xff\xfe", "align_corners"]))


def _tensor_names(model) -> list[str]:
    names = {i.name for i in model.graph.input} | {t.name for t in model.graph.initializer}
    names |= {o for n in model.graph.node for o in n.output}
    return sorted(names) + ["", "ghost"]


def _mutate_input(data, model):
    info = data.draw(st.sampled_from(list(model.graph.input)))
    if data.draw(st.booleans()):
        info.type.tensor_type.elem_type = data.draw(st.integers(0, 30))
    elif info.type.tensor_type.shape.dim:
        dims = info.type.tensor_type.shape.dim
        dims[data.draw(st.integers(0, len(dims) - 1))].dim_value = data.draw(st.sampled_from(DIMS))


def _mutate_initializer(data, model):
    from onnx import numpy_helper
    tensor = data.draw(st.sampled_from(list(model.graph.initializer)))
    if data.draw(st.booleans()):
        tensor.CopyFrom(numpy_helper.from_array(_hostile_array(data), tensor.name))
    else:  # declared dims disagreeing with the data
        del tensor.dims[:]
        tensor.dims.extend(data.draw(st.lists(st.sampled_from(DIMS), max_size=4)))


def _mutate_node(data, model):
    node = data.draw(st.sampled_from(list(model.graph.node)))
    action = data.draw(st.sampled_from(["op", "input", "output", "delete", "duplicate", "move",
                                        "domain"]))
    if action == "op":
        node.op_type = data.draw(st.sampled_from(OPS))
    elif action == "input":
        name = data.draw(st.sampled_from(_tensor_names(model)))
        if node.input and data.draw(st.booleans()):
            node.input[data.draw(st.integers(0, len(node.input) - 1))] = name
        else:
            node.input.append(name)
    elif action == "output":
        node.output[0] = data.draw(st.sampled_from(_tensor_names(model)))
    elif action == "domain":
        node.domain = data.draw(st.sampled_from(["com.microsoft", "ai.onnx.ml", "evil"]))
    else:
        _reorder(data, model.graph.node, node, action)


def _reorder(data, nodes, node, action):
    copy = type(node)()
    copy.CopyFrom(node)
    index = list(nodes).index(node)
    if action != "duplicate":
        del nodes[index]
    if action != "delete":
        nodes.insert(data.draw(st.integers(0, len(nodes))), copy)


def _mutate_attribute(data, model):
    from onnx import AttributeProto, helper
    node = data.draw(st.sampled_from(list(model.graph.node)))
    name = data.draw(st.sampled_from(ATTR_NAMES))
    value = data.draw(ATTR_VALUES)
    kind = AttributeProto.INTS if isinstance(value, list) and not value else None
    for i, attr in enumerate(node.attribute):
        if attr.name == name:
            del node.attribute[i]
            break
    node.attribute.append(helper.make_attribute(name, value, attr_type=kind))


def _mutate_graph(data, model):
    action = data.draw(st.sampled_from(["opset", "outputs", "ir"]))
    if action == "opset":
        model.opset_import[0].version = data.draw(st.sampled_from([1, 7, 9, 11, 13, 22, 99]))
    elif action == "ir":
        model.ir_version = data.draw(st.sampled_from([0, 1, 3, 99]))
    else:
        model.graph.output[0].name = data.draw(st.sampled_from(_tensor_names(model)))


ONNX_MUTATIONS = [_mutate_input, _mutate_initializer, _mutate_node, _mutate_node,
                  _mutate_attribute, _mutate_attribute, _mutate_graph]


def mutate_onnx(data, files: dict) -> dict:
    import onnx
    model = onnx.ModelProto()
    model.ParseFromString(files[MAIN[".onnx"]])
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        data.draw(st.sampled_from(ONNX_MUTATIONS), label="mutation")(data, model)
    return {MAIN[".onnx"]: model.SerializeToString()}


# --- .npz structure ------------------------------------------------------------------------
def _mutate_array(data, arrays: dict):
    keys = sorted(arrays)
    action = data.draw(st.sampled_from(["replace", "remove", "add", "pickle"]))
    if action in ("replace", "remove", "pickle") and keys:
        key = data.draw(st.sampled_from(keys))
        if action == "remove":
            del arrays[key]
        elif action == "pickle":
            arrays[key] = np.array([None, 1], object)
        else:
            arrays[key] = _hostile_array(data)
    else:
        name = data.draw(st.sampled_from(["::W", "ghost::W", "a::b::c", "glcnn_graph2"]
                                         + [k + "x" for k in keys]))
        arrays[name] = _hostile_array(data)


def _members(blob: bytes) -> tuple[dict, dict]:
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        arrays = {i.filename[:-4]: np.lib.format.read_array(archive.open(i))
                  for i in archive.infolist()}
    return json.loads(arrays.pop("glcnn_graph").tobytes().decode()), arrays


def _npy(array) -> bytes:
    stream = io.BytesIO()
    np.lib.format.write_array(stream, np.asanyarray(array), allow_pickle=True)
    return stream.getvalue()


def mutate_npz(data, files: dict) -> dict:
    doc, arrays = _members(files[MAIN[".npz"]])
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        if data.draw(st.integers(0, 3), label="array?") == 0:
            _mutate_array(data, arrays)
        else:
            mutate_json(data, doc)
    members = {"glcnn_graph": _npy(np.frombuffer(json.dumps(doc).encode(), np.uint8))}
    members |= {k: _npy(v) for k, v in arrays.items()}
    if data.draw(st.integers(0, 3), label="edit inside a member") == 0:
        key = data.draw(st.sampled_from(sorted(members)))
        members[key] = apply_bytes(members[key], data.draw(
            st.lists(_byte_edit(), min_size=1, max_size=3)))
    stream = io.BytesIO()
    with zipfile.ZipFile(stream, "w") as archive:
        for key, blob in members.items():
            archive.writestr(key + ".npy", blob)
    return {MAIN[".npz"]: stream.getvalue()}


# --- TF.js structure -----------------------------------------------------------------------
def _mutate_shards(data, files: dict) -> None:
    shards = sorted(name for name in files if name.endswith(".bin"))
    if not shards:
        return
    shard = data.draw(st.sampled_from(shards), label="shard")
    action = data.draw(st.sampled_from(["truncate", "remove", "extend", "empty"]))
    if action == "remove":
        del files[shard]
    elif action == "truncate":
        files[shard] = files[shard][:data.draw(st.integers(0, max(len(files[shard]) - 1, 0)))]
    else:
        files[shard] = b"" if action == "empty" else files[shard] + b"\0" * 13


def mutate_tfjs(data, files: dict) -> dict:
    files = dict(files)
    doc = json.loads(files[MAIN[".json"]])
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        if data.draw(st.integers(0, 4), label="shards?") == 0:
            _mutate_shards(data, files)
        else:
            mutate_json(data, doc)
    files[MAIN[".json"]] = json.dumps(doc).encode()
    return files


STRUCTURE = {".onnx": mutate_onnx, ".npz": mutate_npz, ".json": mutate_tfjs}


@pytest.mark.parametrize("suffix", sorted(IMPORTERS))
@FUZZ
@given(data=st.data())
def test_fuzz_structure(suffix, data, tmp_path, ctx):
    index = data.draw(st.integers(0, len(seeds(suffix)) - 1), label="seed")
    files = STRUCTURE[suffix](data, seeds(suffix)[index])
    check_case(write_case(tmp_path / "case", files, suffix), ctx, f"structure{suffix}")
