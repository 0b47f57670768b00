// conv_block.glsl - compute_block() of a spatially blocked conv (BLOCKED_OUTPUT, common.glsl
// "Spatial blocking"; DENSE and DEPTHWISE, never MASK_TAPS), which glcnn/runtime/plan.py
// chooses on software rasterisers: the BLOCK pixels of a fragment share every weight fetch,
// and neighbouring pixels share input fetches. At one tap, pixel j = (jy, jx) reads its source
// SRC_PER_PIXEL * (jx, jy) from pixel 0's: pixels one apart in a conv read inputs a stride
// apart, pixels a stride apart (same stride phase, hence same taps) in a transposed conv read
// neighbouring inputs. The loops visit the union of the block's taps; a pixel whose source lies
// outside the input reads zero.
// Included by conv.glsl and conv_transpose.glsl after their source(), taps(), SRC_PER_TAP,
// SRC_PER_PIXEL and (SHARE_COLUMNS) column pairing. The input is read through
// conv_block_input.glsl; compute_block() is conv_block_columns.glsl's with SHARE_COLUMNS (several
// input slices per group, or depthwise: conv_defines.glsl), else conv_block_taps.glsl's.

#include "conv_block_input.glsl"

#ifdef DENSE
#define WEIGHTS mat4  // the 4x4 block of weights from 4 input to 4 output channels
#else
#define WEIGHTS vec4  // depthwise: one weight per channel
#endif

ivec3 tap_union(ivec3 a, ivec3 b) { return ivec3(min(a.x, b.x), max(a.y, b.y), a.z); }

// Taps (first, last, step) along one axis visited by a block of n pixels starting at output o.
ivec3 block_taps(int o, int n, int k, int pad, int stride, int dilation, int size) {
    int last = o + (n - 1) * BLOCK_STEP;
    return tap_union(taps(o, k, pad, stride, dilation, size),
                     taps(last, k, pad, stride, dilation, size));
}

// Common start of both forms of compute_block: texel sizes, block_acc = bias; returns the
// first input slice the output slice reads.
int begin_block(int slice) {
    begin_weights();
#ifndef INPUT_BUFFER
    input_texel_size = 1.0 / vec2(textureSize(u_input, 0).xy);
#endif
    vec4 bias = channel_params(u_params, slice, 0);
#for j < BLOCK unroll 8
    block_acc[j] = bias;
#endfor
#ifdef DENSE
    return div_floor(4 * slice, u_cog) * u_cg / 4;  // first input slice of the group
#else
    return slice;
#endif
}

// Weights at kernel column kx of tap row `row` (tap_row(slice, ky)), for input channels
// c..c+3.
WEIGHTS tap_weights(WEIGHTS_ROW row, int slice, int c, int kx) {
#ifdef DENSE
    return weights_block(row, slice, c, kx);
#else
    return weights_texel(row, c * KW + kx);
#endif
}

// Weights `w` of 4 input channels scaled by their input gate `g` (INPUT_GATE): W·diag(g), or w·g
// depthwise. Once per input slice, for every pixel of the block (on each pixel's input it would
// be BLOCK multiplies: +25 % on a 1×1 conv from 240 to 480 channels on llvmpipe).
WEIGHTS gated(WEIGHTS w, vec4 g) {
#if defined(INPUT_GATE) && defined(DENSE)
    return mat4(w[0] * g.x, w[1] * g.y, w[2] * g.z, w[3] * g.w);
#elif defined(INPUT_GATE)
    return w * g;
#else
    return w;
#endif
}

#ifdef SHARE_COLUMNS
#include "conv_block_columns.glsl"
#else
#include "conv_block_taps.glsl"
#endif
