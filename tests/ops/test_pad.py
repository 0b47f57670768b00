"""Pad: the GPU against glcnn.graph.reference, the reference against PyTorch's F.pad and
onnxruntime (negative pads included), and the attribute values glcnn refuses."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import PRECISIONS, check_op, single_op_graph
from ort_node import run_node

import glcnn
from glcnn.graph import Node, reference
from glcnn.ops import make_op


def _pads(top, left, bottom, right):
    """ONNX 4D pads: [n0, c0, top, left, n1, c1, bottom, right]."""
    return [0, 0, top, left, 0, 0, bottom, right]


# (mode, value, (top, left, bottom, right), input shape)
CASES = [
    ("constant", 0.0, (1, 2, 0, 3), (5, 5, 6)),
    ("constant", 1.5, (2, 0, 1, 1), (13, 3, 4)),
    ("constant", -2.0, (-1, 2, 2, -2), (3, 5, 6)),
    ("constant", 0.5, (2, 3, 1, 2), (1, 1, 1)),
    ("reflect", 0.0, (1, 2, 0, 3), (5, 5, 6)),
    ("reflect", 0.0, (4, 5, 4, 5), (3, 5, 6)),
    ("reflect", 0.0, (2, -1, -2, 4), (13, 5, 6)),
    ("edge", 0.0, (1, 2, 3, 4), (5, 5, 6)),
    ("edge", 0.0, (2, 3, 1, 2), (3, 1, 1)),
    ("edge", 0.0, (-2, 1, 3, -3), (1, 5, 7)),
    ("symmetric", 0.0, (1, 2, 0, 3), (5, 5, 6)),
    ("symmetric", 0.0, (5, 6, 5, 6), (3, 5, 6)),
    ("symmetric", 0.0, (2, -1, -2, 4), (13, 5, 6)),
    ("wrap", 0.0, (1, 2, 0, 3), (5, 5, 6)),
    ("wrap", 0.0, (6, 0, 7, 13), (3, 5, 6)),
    ("wrap", 0.0, (1, 5, -1, 0), (13, 5, 6)),
    ("constant", 0.0, (0, 0, 0, 0), (5, 3, 3)),
]


def _case_id(mode, value, pads, shape):
    value_part = f"-v{value:g}" if mode == "constant" and value else ""
    return (f"pad-{mode}{value_part}-c{shape[0]}-hw{shape[1]}x{shape[2]}-"
            f"p{'_'.join(map(str, pads))}")


CASE_IDS = [_case_id(*case) for case in CASES]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("mode", "value", "pads", "shape"), CASES, ids=CASE_IDS)
def test_pad_matches_reference(ctx, mode, value, pads, shape, precision):
    attrs = {"mode": mode, "pads": _pads(*pads), "value": value}
    check_op(ctx, "Pad", attrs, [shape], precision=precision)


def _reference(x, mode, value, pads):
    node = Node("Pad", "y", ["x"], {"mode": mode, "pads": _pads(*pads), "value": value})
    return reference.evaluate(node, {"x": np.asarray(x, np.float64)})


ONNX_CASES = [(case, i) for case, i in zip(CASES, CASE_IDS) if case[0] != "symmetric"]


@pytest.mark.parametrize(("mode", "value", "pads", "shape"), [c for c, _ in ONNX_CASES],
                         ids=[i for _, i in ONNX_CASES])
def test_reference_matches_onnxruntime(mode, value, pads, shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    constants = [np.array(_pads(*pads), np.int64)]
    constants += [np.array(value, np.float32)] if mode == "constant" else []
    expected = run_node("Pad", [x], {"mode": mode}, constants)
    np.testing.assert_array_equal(_reference(x, mode, value, pads), expected)


TORCH_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate",
               "wrap": "circular"}



def _torch_takes(mode, value, pads, shape):
    """PyTorch crops (negative pads) in constant mode only, and pads less than the size; it has
    no symmetric mode (TF's MirrorPad: checked against TF.js in tests/importers)."""
    (top, left, bottom, right), (_, h, w) = pads, shape
    return mode == "constant" or mode != "symmetric" and (min(pads) >= 0 and max(top, bottom) < h
                                  and max(left, right) < w)


TORCH_CASES = [(case, i) for case, i in zip(CASES, CASE_IDS) if _torch_takes(*case)]


@pytest.mark.parametrize(("mode", "value", "pads", "shape"), [c for c, _ in TORCH_CASES],
                         ids=[i for _, i in TORCH_CASES])
def test_reference_matches_torch(mode, value, pads, shape):
    x = np.random.default_rng(1).standard_normal(shape)
    top, left, bottom, right = pads
    extra = {"value": value} if mode == "constant" else {}
    expected = F.pad(torch.from_numpy(x)[None], (left, right, top, bottom), TORCH_MODES[mode],
                     **extra)[0].numpy()
    np.testing.assert_array_equal(_reference(x, mode, value, pads), expected)


ERRORS = [
    ({"pads": [1, 0, 0, 0, 0, 0, 0, 0]}, "pad N", "pad-batch"),
    ({"pads": [0, 0, 1, 1, 0, 0, 1, 1], "mode": "mirror"}, "mode='mirror'", "mode-mirror"),
    ({"pads": [0, 0, 5, 0, 0, 0, 0, 0], "mode": "symmetric"}, "may exceed",
     "symmetric-too-far"),
    ({"pads": [0, 0, 4, 0, 0, 0, 0, 0], "mode": "reflect"}, "smaller than", "reflect-too-far"),
    ({"pads": [0, 0, 2, 0, 0, 0, -2, 0], "mode": "reflect"}, "smaller than",
     "reflect-past-the-crop"),
    ({"pads": [1, 1, 1, 1]}, "must have 8 values", "pads-2d-form"),
]


@pytest.mark.parametrize(("attrs", "message"), [e[:2] for e in ERRORS], ids=[e[2] for e in ERRORS])
def test_refused_attributes(attrs, message):
    with pytest.raises(glcnn.UnsupportedOpError, match=message) as info:
        make_op(Node("Pad", "layer_under_test", ["x"], attrs), [(3, 4, 4)])
    assert "'layer_under_test'" in str(info.value)


def test_cropping_everything_is_a_shape_error():
    with pytest.raises(glcnn.ShapeError, match="leave nothing"):
        make_op(Node("Pad", "p", ["x"], {"pads": _pads(-2, 0, -2, 0)}), [(3, 4, 4)])


RUNNER_CASES = [(case, i) for case, i in zip(CASES, CASE_IDS)
                if case[0] == "symmetric" or _torch_takes(*case)]


@pytest.mark.parametrize(("mode", "value", "pads", "shape"), [c for c, _ in RUNNER_CASES],
                         ids=[i for _, i in RUNNER_CASES])
def test_torch_runner_matches_reference(mode, value, pads, shape):
    from glcnn.commands.torch_runner import TorchRunner
    attrs = {"pads": _pads(*pads), "mode": mode, "value": value}
    graph = single_op_graph("Pad", attrs, [shape])
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    got = TorchRunner(graph, threads=1)({"x0": x})["y"]
    np.testing.assert_array_equal(got, reference.run(graph, {"x0": x})["y"].astype(np.float32))


# (front, back) channels, (top, left, bottom, right), input shape: channels of the constant
CHANNEL_CASES = [((0, 5), (0, 0, 0, 0), (3, 4, 5)), ((2, 3), (1, 0, 2, 1), (6, 5, 4)),
                 ((4, 0), (0, 0, 0, 0), (8, 3, 3)), ((1, 6), (-1, 1, 0, -2), (5, 4, 6))]


def _channel_attrs(channels, pads, value=0.5):
    front, back = channels
    top, left, bottom, right = pads
    return {"mode": "constant", "value": value,
            "pads": [0, front, top, left, 0, back, bottom, right]}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("channels", "pads", "shape"), CHANNEL_CASES,
                         ids=[f"c{c}-p{'_'.join(map(str, p))}-{s}" for c, p, s in CHANNEL_CASES])
def test_channel_pad_matches_reference(ctx, channels, pads, shape, precision):
    check_op(ctx, "Pad", _channel_attrs(channels, pads), [shape], precision=precision)


@pytest.mark.parametrize(("channels", "pads", "shape"), CHANNEL_CASES)
def test_channel_pad_reference_matches_onnxruntime_and_torch(channels, pads, shape):
    from glcnn.commands.torch_runner import TorchRunner
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    attrs = _channel_attrs(channels, pads)
    ref = reference.evaluate(Node("Pad", "y", ["x"], attrs), {"x": x.astype(np.float64)})
    expected = run_node("Pad", [x], {"mode": "constant"},
                        [np.array(attrs["pads"], np.int64), np.array(0.5, np.float32)])
    np.testing.assert_array_equal(ref, expected)
    got = TorchRunner(single_op_graph("Pad", attrs, [shape]), threads=1)({"x0": x})["y"]
    np.testing.assert_array_equal(got, ref.astype(np.float32))


@pytest.mark.parametrize("attrs", [
    {"pads": [0, 1, 0, 0, 0, 0, 0, 0], "mode": "edge"},
    {"pads": [0, -1, 0, 0, 0, 0, 0, 0]},
    {"pads": [1, 0, 0, 0, 0, 0, 0, 0]},
], ids=["edge-on-channels", "channel-crop", "batch"])
def test_refused_channel_and_batch_pads(attrs):
    with pytest.raises(glcnn.UnsupportedOpError, match="layer 'y'.*pads="):
        make_op(Node("Pad", "y", ["x"], attrs), [(3, 4, 4)])
