"""Resize and Upsample: the GPU against glcnn.graph.reference, the reference against PyTorch's
F.interpolate and onnxruntime for every coordinate mode, exact ties, refused attributes."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import PRECISIONS, check_op, single_op_graph
from ort_node import run_node

import glcnn
from glcnn.graph import Node, reference
from glcnn.ops import make_op

# (attrs, input shape, id)
CASES = [
    ({"scales": [2.0, 2.0]}, (5, 3, 4), "nearest-c5-x2-halfpixel-preferfloor"),
    ({"scales": [0.5, 0.5], "nearest_mode": "round_prefer_ceil"}, (3, 7, 6),
     "nearest-c3-x0.5-halfpixel-preferceil"),
    ({"scales": [0.5, 0.75], "coordinate_transformation_mode": "asymmetric",
      "nearest_mode": "floor"}, (1, 7, 9), "nearest-c1-asymmetric-floor"),
    ({"sizes": [5, 9], "coordinate_transformation_mode": "align_corners",
      "nearest_mode": "round_prefer_ceil"}, (13, 3, 4), "nearest-c13-sizes5x9-aligncorners"),
    ({"scales": [1.5, 2.5], "coordinate_transformation_mode": "tf_half_pixel_for_nn",
      "nearest_mode": "ceil"}, (3, 4, 3), "nearest-c3-tfhalfpixel-ceil"),
    ({"sizes": [1, 3], "coordinate_transformation_mode": "pytorch_half_pixel"}, (5, 4, 5),
     "nearest-c5-sizes1x3-pytorchhalfpixel"),
    ({"scales": [1, 1, 3.0, 2.0]}, (3, 1, 1), "nearest-c3-1x1-nchw-scales"),
    ({"scales": [2.0, 2.0], "mode": "linear"}, (5, 3, 4), "linear-c5-x2-halfpixel"),
    ({"sizes": [7, 1], "mode": "linear", "coordinate_transformation_mode": "align_corners"},
     (3, 3, 4), "linear-c3-sizes7x1-aligncorners"),
    ({"sizes": [1, 6], "mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
     (13, 5, 3), "linear-c13-sizes1x6-pytorchhalfpixel"),
    ({"scales": [0.6, 1.7], "mode": "linear", "coordinate_transformation_mode": "asymmetric"},
     (1, 5, 7), "linear-c1-x0.6x1.7-asymmetric"),
    ({"scales": [1.5, 0.75], "mode": "linear",
      "coordinate_transformation_mode": "half_pixel_symmetric"}, (5, 5, 8),
     "linear-c5-halfpixelsymmetric"),
    ({"sizes": [1, 5, 4, 6], "mode": "linear"}, (5, 1, 1), "linear-c5-1x1-nchw-sizes"),
    ({"scales": [4.0, 3.0], "coordinate_transformation_mode": "asymmetric",
      "nearest_mode": "floor"}, (9, 5, 7), "nearest-c9-x4x3-asymmetric-floor"),
    ({"sizes": [12, 14], "coordinate_transformation_mode": "align_corners"}, (6, 4, 7),
     "nearest-c6-x3x2-aligncorners"),
]

# Nearest upscales by whole factors compute their source (UPSCALE_Y, UPSCALE_X in
# shaders/resize.glsl) where every output pixel (y, x) reads input (y div ky, x div kx); the GPU
# runs of those cases above compare them with the reference.
UPSCALES = [
    ({"scales": [2.0, 2.0]}, (5, 3, 4), (2, 2)),
    ({"scales": [4.0, 3.0], "coordinate_transformation_mode": "asymmetric",
      "nearest_mode": "floor"}, (9, 5, 7), (4, 3)),
    ({"scales": [1, 1, 3.0, 2.0]}, (3, 1, 1), (3, 2)),
    ({"sizes": [12, 14], "coordinate_transformation_mode": "align_corners"}, (6, 4, 7), None),
    ({"scales": [2.0, 2.0], "coordinate_transformation_mode": "tf_half_pixel_for_nn"},
     (2, 4, 4), None),  # reads input (y + 1) div 2
    ({"scales": [2.0, 2.0], "mode": "linear"}, (5, 3, 4), None),
    ({"scales": [0.5, 0.5]}, (3, 8, 6), None),
]


@pytest.mark.parametrize(("attrs", "shape", "factors"), UPSCALES)
def test_whole_factor_upscales_compute_their_source(attrs, shape, factors):
    op = make_op(Node("Resize", "y", ["x"], attrs), [shape])
    assert op.integer_upscale() == factors
    assert ("UPSCALE_X" in op.defines()) == (factors is not None)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("attrs", "shape"), [c[:2] for c in CASES], ids=[c[2] for c in CASES])
def test_resize_matches_reference(ctx, attrs, shape, precision):
    check_op(ctx, "Resize", attrs, [shape], precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("mode", "scales"), [("nearest", [1, 1, 2.0, 3.0]),
                                              ("linear", [1, 1, 1.5, 2.0])],
                         ids=["upsample-nearest-c5-x2x3", "upsample-linear-c5-x1.5x2"])
def test_upsample_matches_reference(ctx, mode, scales, precision):
    check_op(ctx, "Upsample", {"mode": mode, "scales": scales}, [(5, 3, 4)], precision=precision)


def _reference(attrs, x, op="Resize"):
    return reference.evaluate(Node(op, "y", ["x"], attrs), {"x": np.asarray(x, np.float64)})


# --- the reference against PyTorch: (torch mode and options, ONNX attributes) -------------------
TORCH_MODES = [
    ({"mode": "nearest"}, {"coordinate_transformation_mode": "asymmetric",
                           "nearest_mode": "floor"}),
    ({"mode": "nearest-exact"}, {"coordinate_transformation_mode": "half_pixel",
                                 "nearest_mode": "round_prefer_ceil"}),
    # align_corners=False is half_pixel with the coordinate clamped at 0, also for an output
    # of length 1 (pytorch_half_pixel, despite its name, reads pixel 0 there).
    ({"mode": "bilinear", "align_corners": False},
     {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}),
    ({"mode": "bilinear", "align_corners": True},
     {"mode": "linear", "coordinate_transformation_mode": "align_corners"}),
]
TORCH_MODE_IDS = ["nearest", "nearest-exact", "bilinear", "bilinear-align-corners"]
TORCH_SIZES = [((5, 7), {"scale_factor": (2.0, 2.0)}), ((5, 7), {"scale_factor": (1.5, 0.5)}),
               ((6, 6), {"scale_factor": (3.0, 0.75)}), ((1, 4), {"scale_factor": (3.0, 0.25)}),
               ((5, 7), {"size": (3, 11)}), ((8, 5), {"size": (1, 17)}),
               ((3, 1), {"size": (7, 2)})]


@pytest.mark.parametrize(("hw", "target"), TORCH_SIZES,
                         ids=[f"{h}x{w}-{next(iter(t.values()))}" for (h, w), t in TORCH_SIZES])
@pytest.mark.parametrize(("torch_args", "attrs"), TORCH_MODES, ids=TORCH_MODE_IDS)
def test_reference_matches_torch(hw, target, torch_args, attrs):
    x = np.random.default_rng(0).standard_normal((2, *hw))
    expected = F.interpolate(torch.from_numpy(x)[None], **target, **torch_args)[0].numpy()
    key, value = next(iter(target.items()))
    attrs = attrs | {"scales" if key == "scale_factor" else "sizes": list(value)}
    np.testing.assert_allclose(_reference(attrs, x), expected, rtol=0, atol=1e-12)


# --- the reference against onnxruntime, every coordinate and rounding mode ------------------------
# Scales and size ratios are exact in binary: onnxruntime computes coordinates in float32 and
# so rounds a coordinate that should be exactly k or k + 1/2 by float noise otherwise.
COORDINATES = ["asymmetric", "half_pixel", "pytorch_half_pixel", "align_corners",
               "tf_half_pixel_for_nn", "half_pixel_symmetric"]
ROUNDINGS = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
ORT_TARGETS = [((5, 6), {"scales": [2.0, 0.5]}), ((4, 7), {"scales": [1.5, 0.75]}),
               ((3, 2), {"sizes": [6, 1]}), ((8, 6), {"sizes": [2, 9]})]


def _ort_resize(x, attrs):
    attrs = dict(attrs)
    scales, sizes = attrs.pop("scales", None), attrs.pop("sizes", None)
    constants = [None, np.array([1, 1, *scales], np.float32) if scales else None]
    constants += [np.array([1, x.shape[0], *sizes], np.int64)] if sizes else []
    return run_node("Resize", [x.astype(np.float32)], attrs, constants)


@pytest.mark.parametrize(("hw", "target"), ORT_TARGETS,
                         ids=[f"{h}x{w}-{next(iter(t.values()))}" for (h, w), t in ORT_TARGETS])
@pytest.mark.parametrize("coordinates", COORDINATES)
def test_reference_matches_onnxruntime(hw, target, coordinates):
    x = np.random.default_rng(1).standard_normal((2, *hw)).astype(np.float32)
    for mode, rounding in [("linear", "floor")] + [("nearest", r) for r in ROUNDINGS]:
        if coordinates == "tf_half_pixel_for_nn" and mode == "linear":
            continue  # meant for nearest only
        attrs = {"mode": mode, "coordinate_transformation_mode": coordinates,
                 "nearest_mode": rounding} | target
        np.testing.assert_allclose(_reference(attrs, x), _ort_resize(x, attrs), rtol=0,
                                   atol=1e-6, err_msg=str(attrs))


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample_reference_matches_onnxruntime(mode):
    x = np.random.default_rng(2).standard_normal((3, 4, 5)).astype(np.float32)
    scales = np.array([1, 1, 1.5, 3.0], np.float32)
    expected = run_node("Upsample", [x], {"mode": mode}, [scales], opset=9)
    np.testing.assert_allclose(_reference({"mode": mode, "scales": list(scales)}, x, "Upsample"),
                               expected, rtol=0, atol=1e-6)


# --- exact coordinates: ties the spec resolves one way, float arithmetic another ----------------
def _columns_read(attrs, w, ctx=None, precision="fp32"):
    """Input column each output column reads (on the GPU if `ctx`): input value = column."""
    x = np.arange(w, dtype=np.float32).reshape(1, 1, w)
    if ctx is None:
        return _reference(attrs, x)[0, 0]
    with glcnn.Pipeline(single_op_graph("Resize", attrs, [x.shape]), ctx, precision) as pipe:
        return pipe.run(x)[0, 0]


TIES = [
    # x(o) = 2o + 1/2 exactly: the rounding preference decides.
    ({"scales": [1.0, 0.5]}, 8, [0, 2, 4, 6]),
    ({"scales": [1.0, 0.5], "nearest_mode": "round_prefer_ceil"}, 8, [1, 3, 5, 7]),
    # 7 -> 17: x(8) = 8.5 * 7/17 - 1/2 = 3 exactly; float64 gives 3.0000000000000004 -> ceil 4.
    ({"sizes": [1, 17], "nearest_mode": "ceil"}, 7,
     [0, 1, 1, 1, 2, 2, 3, 3, 3, 4, 4, 5, 5, 6, 6, 6, 6]),
]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize(("attrs", "w", "expected"), TIES,
                         ids=["half-pixel-x0.5-prefer-floor", "half-pixel-x0.5-prefer-ceil",
                              "sizes-7to17-ceil"])
def test_exact_ties(ctx, attrs, w, expected, precision):
    np.testing.assert_array_equal(_columns_read(attrs, w), expected)
    np.testing.assert_array_equal(_columns_read(attrs, w, ctx, precision), expected)


ERRORS = [
    ({"scales": [2.0, 2.0], "mode": "cubic"}, "mode='cubic'", "cubic"),
    ({"scales": [2.0, 2.0], "coordinate_transformation_mode": "tf_crop_and_resize"},
     "tf_crop_and_resize", "tf-crop-and-resize"),
    ({"scales": [2.0, 2.0], "nearest_mode": "round"}, "nearest_mode='round'", "nearest-round"),
    ({"scales": [1, 2, 2.0, 2.0]}, "only H and W", "scales-on-channels"),
    ({"sizes": [1, 4, 6, 6]}, "only H and W", "sizes-change-channels"),
    ({"scales": [2.0, 2.0, 2.0]}, "only H and W", "scales-3d"),
    ({"scales": [2.0, 2.0], "sizes": [6, 6]}, "exactly one", "scales-and-sizes"),
    ({}, "exactly one", "no-scales"),
    ({"scales": [2.0, -1.0]}, "must be positive", "negative-scale"),
    ({"scales": [2.0, 2.0], "mode": "linear", "antialias": 1}, "antialias=1", "antialias"),
    ({"sizes": [6, 6], "keep_aspect_ratio_policy": "not_larger"}, "not_larger",
     "keep-aspect-ratio"),
]


@pytest.mark.parametrize(("attrs", "message"), [e[:2] for e in ERRORS], ids=[e[2] for e in ERRORS])
def test_refused_attributes(attrs, message):
    with pytest.raises(glcnn.UnsupportedOpError, match=message) as info:
        make_op(Node("Resize", "layer_under_test", ["x"], attrs), [(3, 4, 4)])
    assert "'layer_under_test'" in str(info.value)


def test_upsample_refuses_downscaling():
    with pytest.raises(glcnn.UnsupportedOpError, match="must be ≥ 1; use Resize"):
        make_op(Node("Upsample", "up", ["x"], {"scales": [1, 1, 0.5, 2.0]}), [(3, 4, 4)])


def test_empty_output_is_a_shape_error():
    with pytest.raises(glcnn.ShapeError, match="empty output"):
        make_op(Node("Resize", "r", ["x"], {"scales": [0.2, 1.0]}), [(3, 4, 4)])
