// conv_defines.glsl - the defines of a conv program (conv.glsl, conv_transpose.glsl), set by
// glcnn/ops/conv.py and glcnn/runtime/plan.py, and an #error for each combination that would
// compile into something else than what it says.
// Defines: KH, KW kernel size; CG input channels per group (padded to 4 for DENSE), or
//          WIDE_INPUT instead (DENSE with several input slices per group: the count is the
//          uniform u_cg_loop, so one program serves every width, and blocked passes share
//          input columns);
//          DENSE (groups made of whole slices: one vec4 fetch feeds a mat4*vec4),
//          DEPTHWISE (Cg = Co/group = 1: output slice s reads input slice s), or neither
//          (generic: each output lane gathers its own input channels one by one);
//          WEIGHTS_BUFFER (the filters in a buffer texture: glcnn/runtime/plan.py chooses it
//          where the GL allows that many texels in one);
//          IN_ACT_RELU or IN_ACT_LEAKYRELU (DENSE or DEPTHWISE: the activation is applied to
//          every input texel as it is fetched; both map 0 to 0, so masked taps stay zero);
//          INPUT_GATE (DENSE or DEPTHWISE: every input slice is scaled by its texel of the
//          (C, 1, 1) gate u_gate as it is fetched);
//          INPUT_MEAN (a 1×1 conv without pads, DENSE or DEPTHWISE, never blocked: the input
//          u_input_shape (C, H, W) is read as its spatial mean (C, 1, 1), each tap (0, 0)
//          summing the slice's whole tile);
//          BLOCKED_OUTPUT (spatial blocking, common.glsl: compute_block() instead of compute(),
//          conv_block.glsl; DENSE or DEPTHWISE) with STRIDE_X, DILATION_X (BLOCKED_OUTPUT only:
//          the x stride and dilation, constants for the blocked loops; the direct form reads
//          u_stride and u_dilation);
//          BLOCKED_INPUT with IN_BLOCK_X, IN_BLOCK_Y, IN_BLOCK_STEP (DENSE or DEPTHWISE; a
//          direct DEPTHWISE conv reads it in conv_direct.glsl): the input is the render-target
//          array of the blocked conv that made it, read in place (its unblock pass is skipped,
//          glcnn/runtime/plan.py), see conv_block_input.glsl; INPUT_BUFFER with
//          BLOCKED_OUTPUT: the input atlas copied into a buffer texture, u_input_width texels
//          a row; INPUT_BUFFER with BLOCKED_INPUT: that array copied into one, u_input_layer
//          texels a layer;
//          INPUT_UPSAMPLE with UPSAMPLE_X, UPSAMPLE_Y (a Conv, DENSE or DEPTHWISE, no
//          INPUT_MEAN; glcnn.graph.fuse_resize): the conv reads its input upscaled nearest by
//          those whole factors, pixel (y, x) being stored pixel (y div UPSAMPLE_Y, x div
//          UPSAMPLE_X) (conv_inputs.glsl SOURCE_X, SOURCE_Y, INPUT_SIZE);
//          TRANSPOSED and UNIT_DILATION: conv_transpose.glsl's.

#if !defined(KH) || !defined(KW)
#error a conv needs KH and KW
#endif
#if defined(CG) == defined(WIDE_INPUT)
#error a conv needs exactly one of CG and WIDE_INPUT
#endif
#if defined(WIDE_INPUT) && !defined(DENSE)
#error WIDE_INPUT needs DENSE
#endif
#if defined(DENSE) && defined(DEPTHWISE)
#error DENSE and DEPTHWISE exclude each other (neither: the generic form)
#endif
#if defined(IN_ACT_RELU) && defined(IN_ACT_LEAKYRELU)
#error IN_ACT_RELU and IN_ACT_LEAKYRELU exclude each other
#endif
#if (defined(IN_ACT_RELU) || defined(IN_ACT_LEAKYRELU)) && !defined(DENSE) && !defined(DEPTHWISE)
#error IN_ACT_RELU and IN_ACT_LEAKYRELU need DENSE or DEPTHWISE
#endif
#if defined(INPUT_GATE) && !defined(DENSE) && !defined(DEPTHWISE)
#error INPUT_GATE needs DENSE or DEPTHWISE
#endif
#if defined(INPUT_MEAN) && ((!defined(DENSE) && !defined(DEPTHWISE)) || defined(BLOCKED_OUTPUT))
#error INPUT_MEAN needs DENSE or DEPTHWISE, and no BLOCKED_OUTPUT
#endif
#if defined(BLOCKED_OUTPUT) && !defined(DENSE) && !defined(DEPTHWISE)
#error BLOCKED_OUTPUT needs DENSE or DEPTHWISE
#endif
#if defined(BLOCKED_OUTPUT) && !(defined(STRIDE_X) && defined(DILATION_X))
#error BLOCKED_OUTPUT needs STRIDE_X and DILATION_X
#endif
#if !defined(BLOCKED_OUTPUT) && (defined(STRIDE_X) || defined(DILATION_X))
#error STRIDE_X and DILATION_X need BLOCKED_OUTPUT (a direct conv reads u_stride, u_dilation)
#endif
#if defined(BLOCKED_INPUT) && !(defined(DENSE) && defined(BLOCKED_OUTPUT)) && !defined(DEPTHWISE)
#error BLOCKED_INPUT needs DENSE with BLOCKED_OUTPUT, or DEPTHWISE
#endif
#ifdef BLOCKED_INPUT
#if !defined(IN_BLOCK_X) || !defined(IN_BLOCK_Y) || !defined(IN_BLOCK_STEP)
#error BLOCKED_INPUT needs IN_BLOCK_X, IN_BLOCK_Y and IN_BLOCK_STEP
#endif
#endif
#if defined(INPUT_BUFFER) && !defined(BLOCKED_OUTPUT) && !defined(BLOCKED_INPUT)
#error INPUT_BUFFER needs BLOCKED_OUTPUT or BLOCKED_INPUT
#endif
#if defined(INPUT_UPSAMPLE) && (!(defined(UPSAMPLE_X) && defined(UPSAMPLE_Y)) || defined(TRANSPOSED) || defined(INPUT_MEAN) || (!defined(DENSE) && !defined(DEPTHWISE)))
#error INPUT_UPSAMPLE needs UPSAMPLE_X and UPSAMPLE_Y, a Conv (DENSE or DEPTHWISE), no INPUT_MEAN
#endif

// A blocked pass shares input columns between its pixels (conv_block_columns.glsl) where a group
// has several input slices (WIDE_INPUT) or is depthwise (one slice, but each fetch feeds only
// its own pixel tap by tap: a 5×5 depthwise conv of 144 channels at 56² 6.1 -> 3.5 ms, of 480
// at 14² 2.0 -> 1.4 ms on llvmpipe).
#if defined(BLOCKED_OUTPUT) && (defined(WIDE_INPUT) || defined(DEPTHWISE))
#define SHARE_COLUMNS 1
#endif
