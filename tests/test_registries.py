"""Every table keyed by op type agrees with the op registry (glcnn.ops.REGISTRY), GL-free.

An op type in one table and missing from another fails, named: "ResizeX: in ops.REGISTRY,
missing from reference EVALUATORS". The deliberate differences are EXCEPTIONS, each with its
reason; an exception that no longer excuses anything fails too, so the list stays true.

| table                      | holds                                          | covers all |
|----------------------------|------------------------------------------------|------------|
| reference EVALUATORS       | glcnn.graph.reference, the float64 reference   | yes        |
| torch runner BUILDERS      | glcnn.commands.torch_runner                    | yes        |
| ONNX importer CONVERTERS   | ONNX op types the importer converts            | yes        |
| ONNX converters' glcnn ops | the glcnn op each ONNX converter needs         | no         |
| TF.js converters' EMITS    | glcnn ops a TF.js layer converter may emit     | no         |
| TF.js graph EMITS          | glcnn ops a TF.js graph-op converter may emit  | no         |
| docs NOTES                 | the README ops table's notes (with the         | yes        |
|                            | activations, which share one)                  |            |

"covers all": the table must hold every registered op; every table holds registered ops only.
"""

from pathlib import Path

import pytest

from glcnn.commands import docs, torch_runner
from glcnn.errors import GlcnnError
from glcnn.graph import reference
from glcnn.importers import (  # noqa: F401
    onnx_ops,
    onnx_spatial,
    tfjs,
    tfjs_graph_ops,
    tfjs_layers,
    tfjs_shapes,
)
from glcnn.ops import REGISTRY
from glcnn.ops.base import ACTIVATION_DEFAULTS
from glcnn.registry import enter

OPS = "ops.REGISTRY"
ONNX = "ONNX importer CONVERTERS"
TFJS_DATA = Path(__file__).resolve().parent / "data" / "tfjs"
_INTERNAL = "glcnn-internal, made by glcnn.graph.passes.expand_reductions; ONNX has no such op"
_ALIAS = "ONNX-only: an alias of its input (onnx_ops.py), no glcnn op of its own"
_MOVE = "ONNX-only: an alias or a glcnn Rearrange (onnx_moves.py)"

# (op type, table) -> why that table deliberately differs from ops.REGISTRY there.
EXCEPTIONS = {
    ("InstanceNormMean", ONNX): _INTERNAL,
    ("InstanceNormVariance", ONNX): _INTERNAL,
    ("InstanceNormApply", ONNX): _INTERNAL,
    ("SoftmaxStats", ONNX): _INTERNAL,
    ("SoftmaxApply", ONNX): _INTERNAL,
    ("Silu", ONNX): "ONNX has no Silu (exporters write Sigmoid and Mul); glcnn's serves TF.js "
                    "swish and the Builder",
    ("Rearrange", ONNX): "glcnn-internal general gather (glcnn/ops/rearrange.py), made by the "
                         "ONNX importer for moves (onnx_layout.py); ONNX has no such op",
    ("Identity", ONNX): _ALIAS,
    ("Dropout", ONNX): _ALIAS + " (inference mode)",
    ("Cast", ONNX): _ALIAS + " (a cast to float32)",
    ("Squeeze", ONNX): _MOVE,
    ("Unsqueeze", ONNX): _MOVE,
    ("Gather", ONNX): _MOVE + " (constant indices)",
    ("Split", ONNX): _MOVE + " per output",
    ("Expand", ONNX): _MOVE + " (stride 0 along the broadcast axes)",
    ("Tile", ONNX): _MOVE + " (each axis read as (repeat, size))",
    ("SpaceToDepth", ONNX): _MOVE + " (the view (b, b, C, H/b, W/b))",
}
# Backward ops (glcnn/train/grad_ops.py): made by glcnn.train.backward for glcnn.Trainer, tested
# against PyTorch autograd in tests/train; no model file holds them and no forward runs them.
_BACKWARD = "glcnn-internal backward op of glcnn.Trainer (glcnn/train/backward.py)"
EXCEPTIONS |= {(op, table): _BACKWARD + why
               for op in ("ConvGradWeight", "ConvGradBias", "ActivationGrad", "LossGrad", "LossSum",
                          "PoolGrad", "ResizeGrad", "GemmGradWeight", "GemmGradInput")
               for table, why in ((ONNX, "; ONNX has no such op"),
                                  ("torch runner BUILDERS",
                                   "; tests/train compares it with torch autograd instead"))}
# The TF.js importer itself (glcnn/importers/tfjs.py), outside any converter, emits a Gemm
# reordering a flattened vector into glcnn's order and a Mul copying an output.
TFJS_IMPORTER_OPS = {"Gemm", "Mul"}


def tables() -> dict[str, tuple[set[str], bool]]:
    """Table name -> (its op types, whether it must hold every registered op)."""
    onnx_needs = {needs for _, needs in onnx_ops.CONVERTERS.values() if needs is not None}
    return {
        "reference EVALUATORS": (set(reference.EVALUATORS), True),
        "torch runner BUILDERS": (set(torch_runner.BUILDERS), True),
        ONNX: (set(onnx_ops.CONVERTERS), True),
        "ONNX converters' glcnn ops": (onnx_needs, False),
        "TF.js converters' EMITS": (set().union(*tfjs_layers.EMITS.values()) | TFJS_IMPORTER_OPS,
                                    False),
        "TF.js graph EMITS": (set().union(*tfjs_graph_ops.EMITS.values()) | {"Mul"}, False),
        "docs NOTES": (set(docs.NOTES) | set(ACTIVATION_DEFAULTS), True),
    }


def disagreements(registry, tables: dict[str, tuple[set[str], bool]], exceptions: dict) -> list:
    """Every op type in one of `tables` and not in `registry`, and for the tables that must
    cover it, every registered op type they lack, unless `exceptions` excuses it; then every
    exception that excuses nothing. One sentence each, sorted by op type."""
    found = {}
    for name, (ops, complete) in tables.items():
        for op in set(ops) - set(registry):
            found[op, name] = f"{op}: in {name}, missing from {OPS}"
        for op in set(registry) - set(ops) if complete else ():
            found[op, name] = f"{op}: in {OPS}, missing from {name}"
    unexcused = [message for key, message in sorted(found.items()) if key not in exceptions]
    stale = [f"{op}: {name} and {OPS} agree on it, but EXCEPTIONS still excuses it "
             f"({why!r}); remove the entry" for (op, name), why in sorted(exceptions.items())
             if (op, name) not in found]
    return unexcused + stale


def test_every_registry_agrees_with_the_op_registry():
    problems = disagreements(REGISTRY, tables(), EXCEPTIONS)
    assert not problems, "\n".join(problems)


def test_every_exception_names_a_known_table():
    assert {name for _, name in EXCEPTIONS} <= set(tables())


# --- the comparison itself, on hand-made tables ------------------------------------------------
FAKE_REGISTRY = {"Conv", "Relu", "ResizeX"}


def test_a_table_missing_a_registered_op_names_it_and_the_table():
    fake = {"reference EVALUATORS": ({"Conv", "Relu"}, True)}
    assert disagreements(FAKE_REGISTRY, fake, {}) == [
        "ResizeX: in ops.REGISTRY, missing from reference EVALUATORS"]


def test_an_op_the_registry_lacks_is_named_in_any_table():
    fake = {"TF.js converters' EMITS": ({"Conv", "Swish"}, False),
            "torch runner BUILDERS": ({"Conv", "Relu", "ResizeX", "Swish"}, True)}
    assert disagreements(FAKE_REGISTRY, fake, {}) == [
        "Swish: in TF.js converters' EMITS, missing from ops.REGISTRY",
        "Swish: in torch runner BUILDERS, missing from ops.REGISTRY"]


def test_a_table_that_need_not_cover_the_registry_may_lack_ops():
    assert disagreements(FAKE_REGISTRY, {"TF.js": ({"Conv"}, False)}, {}) == []


def test_an_exception_excuses_only_its_own_op_and_table():
    fake = {"A": ({"Conv"}, True), "B": ({"Conv"}, True)}
    excused = {("Relu", "A"): "why", ("ResizeX", "A"): "why", ("Relu", "B"): "why"}
    assert disagreements(FAKE_REGISTRY, fake, excused) == [
        "ResizeX: in ops.REGISTRY, missing from B"]


def test_an_exception_no_longer_needed_fails():
    fake = {"A": ({"Conv", "Relu", "ResizeX"}, True)}
    problems = disagreements(FAKE_REGISTRY, fake, {("ResizeX", "A"): "A lacks it"})
    assert problems == ["ResizeX: A and ops.REGISTRY agree on it, but EXCEPTIONS still excuses "
                        "it ('A lacks it'); remove the entry"]


# --- the TF.js declarations against what the converters really emit ---------------------------
@pytest.mark.parametrize("case", sorted(p.name for p in TFJS_DATA.iterdir() if p.is_dir()))
def test_tfjs_converters_emit_only_the_ops_they_declare(case, monkeypatch):
    """Import a fixture with every converter watched: each glcnn node a layer adds has an op
    its converter's `emits=` names (the importer's own reordering Gemm aside)."""
    emitted = {}

    def watched(cls, convert):
        def wrapper(imp, call):
            before = len(imp.nodes)
            result = convert(imp, call)
            emitted.setdefault(cls, set()).update(
                node.op for node in imp.nodes[before:] if not node.name.endswith("/tf_order"))
            return result
        return wrapper

    for cls, convert in list(tfjs_layers.CONVERTERS.items()):
        monkeypatch.setitem(tfjs_layers.CONVERTERS, cls, watched(cls, convert))
    tfjs.load(TFJS_DATA / case / "model.json")
    assert emitted, f"{case}: no converter ran"
    undeclared = {cls: sorted(ops - set(tfjs_layers.EMITS[cls]))
                  for cls, ops in emitted.items() if ops - set(tfjs_layers.EMITS[cls])}
    assert not undeclared, f"{case}: ops emitted but not in the converter's emits=: {undeclared}"


def test_a_second_entry_under_a_name_is_refused_and_nothing_is_added():
    table = {"Conv": "first"}
    with pytest.raises(GlcnnError, match="'Conv' already in the test table"):
        enter(table, {"Relu": "new", "Conv": "second"}, "the test table")
    assert table == {"Conv": "first"}
    enter(table, {"Relu": "new"}, "the test table")
    assert table == {"Conv": "first", "Relu": "new"}
