"""The ONNX operator conformance cases shipped in the onnx==1.22.0 wheel, ready for glcnn.

Each case is `onnx/backend/test/data/node/<name>/model.onnx` plus `test_data_set_*/`
holding `input_<i>.pb` and `output_<i>.pb`. GL-free: used by
tests/importers/test_onnx_conformance.py.

glcnn takes weights and op parameters when a model is loaded, not per run, so a graph input
that only feeds a parameter slot (a Conv's W, Resize's scales, Clip's min/max, Pad's pads,
PRelu's slope, ...) is frozen into an initializer holding the test data's value. Inputs
feeding data slots (`DATA_SLOTS`) stay graph inputs.
"""

from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"

# Input slots that carry activations; every other slot of every op is a parameter.
DATA_SLOTS = {"Add": None, "Mul": None, "Sub": None, "Div": None, "Concat": None, "Sum": None,
              "Max": None, "Min": None}


def case_names() -> list[str]:
    """Every conformance case in the wheel, sorted (empty if the wheel has none)."""
    return sorted(p.parent.name for p in DATA.glob("*/model.onnx"))


def op_types(name: str) -> set[str]:
    """The op types in a case's graph (domain-qualified outside the default domain)."""
    model = onnx.load(str(DATA / name / "model.onnx"), load_external_data=False)
    return {n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
            for n in model.graph.node}


def _read(path: Path) -> np.ndarray:
    tensor = onnx.TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(tensor)


def data_sets(name: str) -> list[tuple[list, list]]:
    """[(inputs, outputs)] per test_data_set, arrays in the graph's input/output order."""
    return [(_read_all(folder, "input"), _read_all(folder, "output"))
            for folder in sorted((DATA / name).glob("test_data_set_*"))]


def _read_all(folder: Path, kind: str) -> list:
    count = len(list(folder.glob(f"{kind}_*.pb")))
    return [_read(folder / f"{kind}_{i}.pb") for i in range(count)]


def _parameter_inputs(graph) -> set[str]:
    """Graph inputs read only by parameter slots."""
    data, param = set(), set()
    for node in graph.node:
        slots = DATA_SLOTS.get(node.op_type, (0,))
        for i, name in enumerate(node.input):
            (data if slots is None or i in slots else param).add(name)
    return param - data


def frozen_model(name: str, inputs: list) -> tuple[onnx.ModelProto, dict]:
    """The case's model with parameter inputs turned into initializers.

    Returns:
        (model, feeds): feeds maps each remaining graph input to its array.
    """
    model = onnx.load(str(DATA / name / "model.onnx"))
    graph = model.graph
    params = _parameter_inputs(graph)
    values = dict(zip([i.name for i in graph.input], inputs))
    for info in list(graph.input):
        if info.name in params and info.name in values:
            graph.initializer.append(numpy_helper.from_array(values[info.name], info.name))
            graph.input.remove(info)
    return model, {i.name: values[i.name] for i in graph.input if i.name in values}
