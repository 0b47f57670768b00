"""The ONNX operator conformance suite shipped in the onnx==1.22.0 wheel, run through glcnn.

Every case whose op types the ONNX importer accepts (`supported_op_types()`: a converter
whose glcnn op is registered) is a test: it passes (glcnn vs the suite's expected outputs
at the fp32 tolerance of tests/helpers.py, or a looser one justified in `LOOSER`), or it is
in `EXCLUDED` with its reason, and then glcnn must raise a GlcnnError whose message
matches the reason's pattern: never a crash, never a silently wrong result. Cases with
other op types count as not supported. Parameter inputs are frozen (see onnx_cases.py).

    # regenerate the doc:
    PYTHONPATH=tests python tests/importers/test_onnx_conformance.py > docs/onnx_conformance.md
"""

import sys
from collections import namedtuple
from pathlib import Path

import onnx
import pytest
from helpers import TOLERANCE, assert_close, scaled_error
from onnx_cases import DATA, case_names, data_sets, frozen_model, op_types

import glcnn
from glcnn.importers.onnx_ops import supported_op_types

DOC = Path(__file__).resolve().parents[2] / "docs" / "onnx_conformance.md"

Why = namedtuple("Why", "reason match")  # match: a regex the GlcnnError message must contain
RANK = Why("a tensor of rank 1 (or above 6): glcnn runs rank 2 to 4 with batch 1, and rank 5 "
           "and 6", r"\(rank \d\)")
BATCH = Why("batch size > 1 (a leading dimension other than 1 on a tensor of rank 2 to 4, as "
            "most of the suite's (3, 4, 5) cases): glcnn runs batch 1", "batch size")
DTYPE = Why("a non-float32 input (integer, bool, float16, ...): glcnn computes in float32",
            "element type")
NOT_TENSOR = Why("an optional or sequence input: glcnn takes tensors", "not a tensor")
MATMUL = Why("MatMul by a constant of rank above 2: glcnn multiplies by a constant (K, N) "
             "matrix, or two activations", r"only a \(K, N\) matrix")
POOL_ND = Why("1-D and 3-D pooling: glcnn pools images", "only 2-D pooling")
CONV_ND = Why("1-D and 3-D convolutions: glcnn convolves images", "only 2-D convolutions")
ARGMAX = Why("MaxPool's second output (argmax indices) is not produced", "argmax indices")
CUBIC = Why("Resize mode=cubic: glcnn resizes with nearest and linear only", "mode='cubic'")
ANTIALIAS = Why("Resize antialias=1 with mode=linear is not implemented", "antialias=1")
ASPECT = Why("Resize keep_aspect_ratio_policy not_larger / not_smaller is not implemented "
             "(stretch only)", "keep_aspect_ratio_policy")
TF_CROP = Why("Resize coordinate_transformation_mode=tf_crop_and_resize (roi) is not "
              "implemented", "tf_crop_and_resize")
ALIGN = Why("Resize align_corners from scales giving a fractional output length: the ONNX "
            "reference divides by in·s − 1, onnxruntime by floor(in·s) − 1; glcnn refuses "
            "rather than pick one", "implementations disagree")

_CASES_BY_REASON = {
    RANK: """
        test_clip_default_inbounds test_clip_default_inbounds_expanded test_clip_example
        test_clip_inbounds test_clip_min_greater_than_max test_clip_outbounds
        test_clip_splitbounds test_concat_1d_axis_0 test_concat_1d_axis_negative_1
        test_div_example test_dropout_default_old test_elu_example
        test_gather_negative_indices test_hardsigmoid_example test_leakyrelu_example
        test_matmul_1d_1d test_matmul_1d_3d test_max_example test_max_float32
        test_max_one_input test_max_two_inputs test_min_example test_min_float32
        test_min_one_input test_min_two_inputs test_mul_example test_pow_bcast_scalar
        test_pow_example test_pow_types_float32_int32 test_pow_types_float32_int64
        test_pow_types_float32_uint32 test_pow_types_float32_uint64 test_sigmoid_example
        test_split_1d_uneven_split_opset18 test_split_equal_parts_1d_opset13
        test_split_equal_parts_1d_opset18 test_split_equal_parts_default_axis_opset13
        test_split_equal_parts_default_axis_opset18 test_split_variable_parts_1d_opset13
        test_split_variable_parts_1d_opset18 test_split_variable_parts_default_axis_opset13
        test_split_variable_parts_default_axis_opset18 test_split_zero_size_splits_opset13
        test_split_zero_size_splits_opset18 test_sqrt_example test_sub_example
        test_tanh_example
    """,
    BATCH: """
        test_add test_add_bcast test_batchnorm_epsilon test_batchnorm_epsilon_training_mode
        test_batchnorm_example test_batchnorm_example_training_mode
        test_cast_FLOAT_to_BFLOAT16 test_cast_FLOAT_to_DOUBLE test_cast_FLOAT_to_FLOAT16
        test_cast_FLOAT_to_FLOAT4E2M1 test_cast_FLOAT_to_FLOAT8E4M3FN
        test_cast_FLOAT_to_FLOAT8E4M3FNUZ test_cast_FLOAT_to_FLOAT8E5M2
        test_cast_FLOAT_to_FLOAT8E5M2FNUZ test_cast_FLOAT_to_INT2 test_cast_FLOAT_to_INT4
        test_cast_FLOAT_to_UINT2 test_cast_FLOAT_to_UINT4 test_cast_e8m0_FLOAT_to_FLOAT8E8M0
        test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FN
        test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ
        test_cast_no_saturate_FLOAT_to_FLOAT8E5M2
        test_cast_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ
        test_castlike_FLOAT_to_BFLOAT16_expanded test_castlike_FLOAT_to_DOUBLE_expanded
        test_castlike_FLOAT_to_FLOAT16_expanded test_castlike_FLOAT_to_FLOAT4E2M1_expanded
        test_castlike_FLOAT_to_FLOAT8E4M3FNUZ_expanded
        test_castlike_FLOAT_to_FLOAT8E4M3FN_expanded
        test_castlike_FLOAT_to_FLOAT8E5M2FNUZ_expanded
        test_castlike_FLOAT_to_FLOAT8E5M2_expanded test_castlike_FLOAT_to_INT2_expanded
        test_castlike_FLOAT_to_INT4_expanded test_castlike_FLOAT_to_UINT2_expanded
        test_castlike_FLOAT_to_UINT4_expanded
        test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ_expanded
        test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN_expanded
        test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ_expanded
        test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2_expanded test_clip
        test_clip_default_max test_clip_default_min test_concat_2d_axis_0
        test_concat_2d_axis_1 test_concat_2d_axis_negative_1 test_concat_2d_axis_negative_2
        test_concat_3d_axis_0 test_concat_3d_axis_1 test_concat_3d_axis_2
        test_concat_3d_axis_negative_1 test_concat_3d_axis_negative_2
        test_concat_3d_axis_negative_3 test_convtranspose_group_2_image_3 test_div
        test_div_bcast test_dropout_default test_dropout_default_mask
        test_dropout_default_mask_ratio test_dropout_default_ratio test_dropout_random_old
        test_elu test_elu_default test_expand_dim_changed test_expand_dim_unchanged
        test_flatten_axis0 test_flatten_axis1 test_flatten_axis2 test_flatten_axis3
        test_flatten_default_axis test_flatten_negative_axis1 test_flatten_negative_axis2
        test_flatten_negative_axis3 test_flatten_negative_axis4 test_gather_0 test_gather_1
        test_gather_2d_indices test_gemm_all_attributes test_gemm_alpha test_gemm_beta
        test_gemm_default_matrix_bias test_gemm_default_no_bias
        test_gemm_default_scalar_bias test_gemm_default_single_elem_vector_bias
        test_gemm_default_vector_bias test_gemm_default_zero_bias test_gemm_transposeA
        test_gemm_transposeB test_hardsigmoid test_hardsigmoid_default test_hardswish
        test_hardswish_expanded test_instancenorm_epsilon test_layer_normalization_2d_axis0
        test_layer_normalization_2d_axis1 test_layer_normalization_2d_axis_negative_1
        test_layer_normalization_2d_axis_negative_2
        test_layer_normalization_3d_axis0_epsilon test_layer_normalization_3d_axis1_epsilon
        test_layer_normalization_3d_axis2_epsilon
        test_layer_normalization_3d_axis_negative_1_epsilon
        test_layer_normalization_3d_axis_negative_2_epsilon
        test_layer_normalization_3d_axis_negative_3_epsilon
        test_layer_normalization_4d_axis0 test_layer_normalization_4d_axis1
        test_layer_normalization_4d_axis2 test_layer_normalization_4d_axis3
        test_layer_normalization_4d_axis_negative_1
        test_layer_normalization_4d_axis_negative_2
        test_layer_normalization_4d_axis_negative_3
        test_layer_normalization_4d_axis_negative_4 test_layer_normalization_default_axis
        test_leakyrelu test_leakyrelu_default test_matmul_2d test_matmul_3d
        test_matmul_bcast test_mul test_mul_bcast test_pow test_pow_bcast_array
        test_prelu_broadcast test_prelu_example test_reduce_max_default_axes_keepdim_example
        test_reduce_max_default_axes_keepdims_random test_reduce_max_do_not_keepdims_example
        test_reduce_max_do_not_keepdims_random test_reduce_max_empty_set
        test_reduce_max_keepdims_example test_reduce_max_keepdims_random
        test_reduce_max_negative_axes_keepdims_example
        test_reduce_max_negative_axes_keepdims_random
        test_reduce_mean_default_axes_keepdims_example
        test_reduce_mean_default_axes_keepdims_random
        test_reduce_mean_do_not_keepdims_example test_reduce_mean_do_not_keepdims_random
        test_reduce_mean_keepdims_example test_reduce_mean_keepdims_random
        test_reduce_mean_negative_axes_keepdims_example
        test_reduce_mean_negative_axes_keepdims_random
        test_reduce_sum_default_axes_keepdims_example
        test_reduce_sum_default_axes_keepdims_random test_reduce_sum_do_not_keepdims_example
        test_reduce_sum_do_not_keepdims_random test_reduce_sum_empty_axes_input_noop
        test_reduce_sum_empty_axes_input_noop_example test_reduce_sum_empty_set
        test_reduce_sum_empty_set_non_reduced_axis_zero test_reduce_sum_keepdims_example
        test_reduce_sum_keepdims_random test_reduce_sum_negative_axes_keepdims_example
        test_reduce_sum_negative_axes_keepdims_random
        test_reduce_sum_square_default_axes_keepdims_example_expanded
        test_reduce_sum_square_default_axes_keepdims_random_expanded
        test_reduce_sum_square_do_not_keepdims_example_expanded
        test_reduce_sum_square_do_not_keepdims_random_expanded
        test_reduce_sum_square_empty_set_expanded
        test_reduce_sum_square_keepdims_example_expanded
        test_reduce_sum_square_keepdims_random_expanded
        test_reduce_sum_square_negative_axes_keepdims_example_expanded
        test_reduce_sum_square_negative_axes_keepdims_random_expanded test_relu
        test_reshape_allowzero_reordered test_reshape_extended_dims
        test_reshape_negative_dim test_reshape_negative_extended_dims test_reshape_one_dim
        test_reshape_reduced_dims test_reshape_reordered_all_dims
        test_reshape_reordered_last_dims test_reshape_zero_and_negative_dim
        test_reshape_zero_dim test_sigmoid test_slice test_slice_default_axes
        test_slice_default_steps test_slice_end_out_of_bounds test_slice_neg
        test_slice_neg_steps test_slice_negative_axes test_slice_start_out_of_bounds
        test_softmax_axis_0 test_softmax_axis_1 test_softmax_axis_2
        test_softmax_default_axis test_softmax_large_number test_softmax_negative_axis
        test_spacetodepth test_split_2d_uneven_split_opset18 test_split_equal_parts_2d
        test_split_equal_parts_2d_opset13 test_split_variable_parts_2d_opset13
        test_split_variable_parts_2d_opset18 test_sqrt test_squeeze test_sub test_sub_bcast
        test_tanh test_tile test_tile_precomputed test_training_dropout
        test_training_dropout_default test_training_dropout_default_mask
        test_training_dropout_mask test_training_dropout_zero_ratio
        test_training_dropout_zero_ratio_mask test_transpose_all_permutations_0
        test_transpose_all_permutations_1 test_transpose_all_permutations_2
        test_transpose_all_permutations_3 test_transpose_all_permutations_4
        test_transpose_all_permutations_5 test_transpose_default test_unsqueeze_axis_0
        test_unsqueeze_axis_1 test_unsqueeze_axis_2 test_unsqueeze_three_axes
        test_unsqueeze_two_axes test_unsqueeze_unsorted_axes
    """,
    DTYPE: """
        test_add_int16 test_add_int8 test_add_uint16 test_add_uint32 test_add_uint64
        test_add_uint8 test_cast_BFLOAT16_to_FLOAT test_cast_DOUBLE_to_FLOAT
        test_cast_DOUBLE_to_FLOAT16 test_cast_FLOAT16_to_DOUBLE test_cast_FLOAT16_to_FLOAT
        test_cast_FLOAT16_to_FLOAT4E2M1 test_cast_FLOAT16_to_FLOAT8E4M3FN
        test_cast_FLOAT16_to_FLOAT8E4M3FNUZ test_cast_FLOAT16_to_FLOAT8E5M2
        test_cast_FLOAT16_to_FLOAT8E5M2FNUZ test_cast_FLOAT16_to_INT2
        test_cast_FLOAT16_to_INT4 test_cast_FLOAT16_to_UINT2 test_cast_FLOAT16_to_UINT4
        test_cast_FLOAT4E2M1_to_FLOAT test_cast_FLOAT4E2M1_to_FLOAT16
        test_cast_FLOAT8E4M3FNUZ_to_FLOAT test_cast_FLOAT8E4M3FNUZ_to_FLOAT16
        test_cast_FLOAT8E4M3FN_to_FLOAT test_cast_FLOAT8E4M3FN_to_FLOAT16
        test_cast_FLOAT8E5M2FNUZ_to_FLOAT test_cast_FLOAT8E5M2FNUZ_to_FLOAT16
        test_cast_FLOAT8E5M2_to_FLOAT test_cast_FLOAT8E5M2_to_FLOAT16
        test_cast_INT2_to_FLOAT test_cast_INT2_to_FLOAT16 test_cast_INT2_to_INT8
        test_cast_INT4_to_FLOAT test_cast_INT4_to_FLOAT16 test_cast_INT4_to_INT8
        test_cast_UINT2_to_FLOAT test_cast_UINT2_to_FLOAT16 test_cast_UINT2_to_UINT8
        test_cast_UINT4_to_FLOAT test_cast_UINT4_to_FLOAT16 test_cast_UINT4_to_UINT8
        test_cast_e8m0_FLOAT16_to_FLOAT8E8M0 test_cast_e8m0_FLOAT8E8M0_to_FLOAT
        test_cast_e8m0_FLOAT8E8M0_to_FLOAT16 test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FN
        test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ
        test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2
        test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ
        test_castlike_BFLOAT16_to_FLOAT_expanded test_castlike_DOUBLE_to_FLOAT16_expanded
        test_castlike_DOUBLE_to_FLOAT_expanded test_castlike_FLOAT16_to_DOUBLE_expanded
        test_castlike_FLOAT16_to_FLOAT4E2M1_expanded
        test_castlike_FLOAT16_to_FLOAT8E4M3FNUZ_expanded
        test_castlike_FLOAT16_to_FLOAT8E4M3FN_expanded
        test_castlike_FLOAT16_to_FLOAT8E5M2FNUZ_expanded
        test_castlike_FLOAT16_to_FLOAT8E5M2_expanded test_castlike_FLOAT16_to_FLOAT_expanded
        test_castlike_FLOAT16_to_INT2_expanded test_castlike_FLOAT16_to_INT4_expanded
        test_castlike_FLOAT16_to_UINT2_expanded test_castlike_FLOAT16_to_UINT4_expanded
        test_castlike_FLOAT4E2M1_to_FLOAT16_expanded
        test_castlike_FLOAT4E2M1_to_FLOAT_expanded
        test_castlike_FLOAT8E4M3FNUZ_to_FLOAT16_expanded
        test_castlike_FLOAT8E4M3FNUZ_to_FLOAT_expanded
        test_castlike_FLOAT8E4M3FN_to_FLOAT16_expanded
        test_castlike_FLOAT8E4M3FN_to_FLOAT_expanded
        test_castlike_FLOAT8E5M2FNUZ_to_FLOAT16_expanded
        test_castlike_FLOAT8E5M2FNUZ_to_FLOAT_expanded
        test_castlike_FLOAT8E5M2_to_FLOAT16_expanded
        test_castlike_FLOAT8E5M2_to_FLOAT_expanded test_castlike_INT2_to_FLOAT16_expanded
        test_castlike_INT2_to_FLOAT_expanded test_castlike_INT2_to_INT8_expanded
        test_castlike_INT4_to_FLOAT16_expanded test_castlike_INT4_to_FLOAT_expanded
        test_castlike_INT4_to_INT8_expanded test_castlike_UINT2_to_FLOAT16_expanded
        test_castlike_UINT2_to_FLOAT_expanded test_castlike_UINT2_to_UINT8_expanded
        test_castlike_UINT4_to_FLOAT16_expanded test_castlike_UINT4_to_FLOAT_expanded
        test_castlike_UINT4_to_UINT8_expanded
        test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ_expanded
        test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FN_expanded
        test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ_expanded
        test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2_expanded
        test_clip_default_int8_inbounds test_clip_default_int8_inbounds_expanded
        test_clip_default_int8_max test_clip_default_int8_min test_div_int16
        test_div_int32_trunc test_div_int8 test_div_uint16 test_div_uint32 test_div_uint64
        test_div_uint8 test_edge_pad test_max_float16 test_max_float64 test_max_int16
        test_max_int32 test_max_int64 test_max_int8 test_max_uint16 test_max_uint32
        test_max_uint64 test_max_uint8 test_maxpool_2d_uint8 test_min_float16
        test_min_float64 test_min_int16 test_min_int32 test_min_int64 test_min_int8
        test_min_uint16 test_min_uint32 test_min_uint64 test_min_uint8 test_mul_int16
        test_mul_int8 test_mul_uint16 test_mul_uint32 test_mul_uint64 test_mul_uint8
        test_pow_types_int32_float32 test_pow_types_int32_int32 test_pow_types_int64_float32
        test_pow_types_int64_int64 test_reduce_max_bool_inputs test_reflect_pad
        test_sub_int16 test_sub_int8 test_sub_uint16 test_sub_uint32 test_sub_uint64
        test_sub_uint8 test_wrap_pad
    """,
    NOT_TENSOR: """
        test_identity_opt test_identity_sequence
    """,
    MATMUL: """
        test_matmul_4d test_matmul_4d_1d
    """,
    POOL_ND: """
        test_averagepool_1d_default test_averagepool_3d_default
        test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_False
        test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_True
        test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_False
        test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True
        test_averagepool_3d_dilations_small test_maxpool_1d_default test_maxpool_3d_default
        test_maxpool_3d_dilations test_maxpool_3d_dilations_use_ref_impl
        test_maxpool_3d_dilations_use_ref_impl_large
    """,
    CONV_ND: """
        test_convtranspose_1d test_convtranspose_3d
    """,
    ARGMAX: """
        test_maxpool_with_argmax_2d_precomputed_pads
        test_maxpool_with_argmax_2d_precomputed_strides
    """,
    CUBIC: """
        test_resize_downsample_scales_cubic
        test_resize_downsample_scales_cubic_A_n0p5_exclude_outside
        test_resize_downsample_scales_cubic_antialias test_resize_downsample_sizes_cubic
        test_resize_downsample_sizes_cubic_antialias test_resize_upsample_scales_cubic
        test_resize_upsample_scales_cubic_A_n0p5_exclude_outside
        test_resize_upsample_scales_cubic_align_corners
        test_resize_upsample_scales_cubic_asymmetric test_resize_upsample_sizes_cubic
    """,
    ANTIALIAS: """
        test_resize_downsample_scales_linear_antialias
        test_resize_downsample_sizes_linear_antialias
    """,
    ASPECT: """
        test_resize_downsample_sizes_nearest_not_larger
        test_resize_downsample_sizes_nearest_not_smaller
        test_resize_upsample_sizes_nearest_not_larger
        test_resize_upsample_sizes_nearest_not_smaller
    """,
    TF_CROP: """
        test_resize_tf_crop_and_resize test_resize_tf_crop_and_resize_axes_2_3
        test_resize_tf_crop_and_resize_axes_3_2
        test_resize_tf_crop_and_resize_extrapolation_value
    """,
    ALIGN: """
        test_resize_downsample_scales_cubic_align_corners
        test_resize_downsample_scales_linear_align_corners
    """,
}
EXCLUDED = {case: why for why, cases in _CASES_BY_REASON.items() for case in cases.split()}

# case -> (scaled error allowed, why more than TOLERANCE["fp32"])
LOOSER = {
    "test_averagepool_2d_ceil_last_window_starts_on_pad": (
        1e-4, ("the suite's expected values are rounded to 4 decimals; glcnn equals "
               "onnxruntime, which differs from them by 4.4e-5")),
}


def classify() -> tuple[list[str], list[str]]:
    """(runnable cases, not-supported cases) of the wheel's suite."""
    supported = supported_op_types()
    runnable, other = [], []
    for name in case_names():
        types = op_types(name)
        (runnable if types and types <= supported else other).append(name)
    return runnable, other


RUNNABLE, NOT_SUPPORTED = classify()
OUTCOMES: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def _summary(request):
    """Print the passed / excluded / not-supported counts after this module's tests."""
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and OUTCOMES:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\n{summary_line(OUTCOMES)}")


def summary_line(outcomes: dict) -> str:
    passed, excluded = (list(outcomes.values()).count(k) for k in ("passed", "excluded"))
    return (f"ONNX conformance (onnx {onnx.__version__}, {len(RUNNABLE) + len(NOT_SUPPORTED)} "
            f"cases): {passed} passed, {excluded} excluded (raise GlcnnError as documented), "
            f"{len(RUNNABLE) - passed - excluded} failed or not run, "
            f"{len(NOT_SUPPORTED)} not supported (op types glcnn lacks)")


def _prepared(name):
    """[(model with frozen parameters, feeds, expected outputs)]; unreadable test data
    (sequence / optional values) gives the bare model, which glcnn must refuse anyway."""
    try:
        sets = data_sets(name)
    except ValueError:
        return [(onnx.load(str(DATA / name / "model.onnx")), {}, [])]
    return [(*frozen_model(name, inputs), outputs) for inputs, outputs in sets]


def _run(ctx, model, feeds, path):
    onnx.save(model, path)
    with glcnn.load(path, ctx=ctx) as pipe:
        shapes = pipe.graph.meta["onnx_output_shapes"]
        # glcnn takes (1, C, H, W) or (C, H, W); a (1, F) vector is (1, F, 1, 1).
        result = pipe.run({k: v.reshape(*v.shape, 1, 1) if v.ndim == 2 else v
                           for k, v in feeds.items()})
        names = pipe.graph.outputs
    result = result if isinstance(result, dict) else {names[0]: result}
    return [result[n].reshape(shapes[n]) for n in names]


@pytest.mark.gl
@pytest.mark.parametrize("case", RUNNABLE)
def test_conformance(ctx, case, tmp_path):
    path = tmp_path / f"{case}.onnx"
    if case in EXCLUDED:
        why = EXCLUDED[case]
        for model, feeds, _ in _prepared(case):
            with pytest.raises(glcnn.GlcnnError, match=why.match):
                _run(ctx, model, feeds, path)
        OUTCOMES[case] = "excluded"
        return
    limit, _ = LOOSER.get(case, (TOLERANCE["fp32"], ""))
    for model, feeds, expected in _prepared(case):
        outputs = _run(ctx, model, feeds, path)
        assert len(outputs) == len(expected)
        for y, ref in zip(outputs, expected):
            if case in LOOSER:
                assert scaled_error(y, ref) <= limit, f"{case}: {scaled_error(y, ref):.3g}"
            else:
                assert_close(y, ref, "fp32", case)
    OUTCOMES[case] = "passed"


def test_exclusions_name_runnable_cases():
    stale = sorted((set(EXCLUDED) | set(LOOSER)) - set(RUNNABLE))
    assert not stale, f"EXCLUDED/LOOSER name cases that are not runnable: {stale}"


def test_doc_mirrors_the_tables():
    stale = ("docs/onnx_conformance.md is stale: run "
             "PYTHONPATH=tests python tests/importers/test_onnx_conformance.py")
    assert DOC.read_text() == report(), stale


def report() -> str:
    """docs/onnx_conformance.md: counts, the exclusion table, the unsupported op types."""
    excluded = [c for c in RUNNABLE if c in EXCLUDED]
    intro = (f"The suite shipped in the onnx {onnx.__version__} wheel "
             f"(`onnx/backend/test/data/node/*`) has {len(RUNNABLE) + len(NOT_SUPPORTED)} "
             "cases. A case is *runnable* when the ONNX importer accepts all its op types. "
             "Graph inputs that only feed parameter slots (weights, Resize scales, Pad pads, "
             "Clip bounds, ...) are frozen into initializers, as glcnn takes them at load time.")
    tolerance = f"fp32 tolerance {TOLERANCE['fp32']:g} scaled error, or as listed below"
    lines = [
        "# ONNX operator conformance", "",
        "Generated by `PYTHONPATH=tests python tests/importers/test_onnx_conformance.py > "
        "docs/onnx_conformance.md`;",
        "`tests/importers/test_onnx_conformance.py` runs these cases and checks this page is "
        "current.",
        "", intro, "",
        "| outcome | cases |", "|---|---|",
        f"| passed ({tolerance}) | {len(RUNNABLE) - len(excluded)} |",
        f"| excluded: glcnn raises a `GlcnnError` matching the reason | {len(excluded)} |",
        f"| not supported: an op type glcnn does not implement | {len(NOT_SUPPORTED)} |",
        "", "## Looser tolerances", "",
        "| case | scaled error allowed | why |", "|---|---|---|",
        *[f"| `{c}` | {limit:g} | {why} |" for c, (limit, why) in sorted(LOOSER.items())],
        "", "## Exclusions", "",
        "| reason | error must match | cases |", "|---|---|---|",
    ]
    for why, cases in _CASES_BY_REASON.items():
        names = ", ".join(f"`{c}`" for c in cases.split())
        lines.append(f"| {why.reason} | `{why.match}` | {names} |")
    lines += ["", "## Op types of the not-supported cases", "",
              "Ops the importer has no converter for, with the number of cases using them. "
              "Constant, Shape, Gather, ... are folded when their inputs are constants; they "
              "appear here because these cases apply them to graph inputs.", "",
              unsupported_types(), ""]
    return "\n".join(lines)


def unsupported_types() -> str:
    supported = supported_op_types()
    counts: dict[str, int] = {}
    for name in NOT_SUPPORTED:
        for op in op_types(name) - supported:
            counts[op] = counts.get(op, 0) + 1
    return ", ".join(f"{op} ({n})" for op, n in sorted(counts.items()))


if __name__ == "__main__":
    sys.stdout.write(report())
