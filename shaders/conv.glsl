// conv.glsl - ONNX Conv (glcnn/ops/conv.py):
//     y[o] = B[o] + sum_{c,ky,kx} x[g(o)*Cg + c, oy*s - pad + ky*d] * W[o, c, ky, kx]
// This file holds what is Conv's own, the geometry: which input a tap reads, and which taps to
// visit. The rest is shared with ConvTranspose (conv_transpose.glsl):
//   conv_defines.glsl    the defines, and an #error for each combination that makes no sense
//   conv_inputs.glsl     uniforms, samplers, the fused input activation, the filter layout
//   conv_direct.glsl     compute() over whole input slices (DENSE, DEPTHWISE)
//   conv_generic.glsl    compute() lane by lane (neither)
//   conv_block.glsl      compute_block() (BLOCKED_OUTPUT: several output pixels per fragment)
// Defines: those of conv_defines.glsl; never TRANSPOSED or UNIT_DILATION.

#if defined(TRANSPOSED) || defined(UNIT_DILATION)
#error TRANSPOSED and UNIT_DILATION are ConvTranspose's: its shader is conv_transpose.glsl
#endif
#include "conv_defines.glsl"
#include "conv_inputs.glsl"

// Input row/column read by output position `o` through kernel tap `k`.
int source(int o, int k, int pad, int stride, int dilation) {
    return o * stride - pad + k * dilation;
}

// Taps (first, last, step) along one axis whose source() lies in [0, size): padding taps are
// never visited.
ivec3 taps(int o, int k, int pad, int stride, int dilation, int size) {
    int b = o * stride - pad;  // source = b + k * dilation
    int first = b >= 0 ? 0 : div_floor(dilation - 1 - b, dilation);
    int last = b <= size - 1 ? min(k - 1, div_floor(size - 1 - b, dilation)) : -1;
    return ivec3(first, last, 1);
}

// Change of the source per visited tap, and from one pixel of a block to the next (pixels
// one apart read inputs a stride apart).
#define SRC_PER_TAP u_dilation
#define SRC_PER_PIXEL u_stride

#ifdef SHARE_COLUMNS
// Column pairing (conv_block_columns.glsl): pixel jx reads columns
// ix0 + jx * STRIDE_X + kx * DILATION_X.
#define NW KW
#define SPAN_X ((BLOCK_X - 1) * STRIDE_X + (KW - 1) * DILATION_X + 1)
int first_column(int ox) { return ox * STRIDE_X - u_pad.x; }
int tap_column(int t) { return t; }
int pair_tap(int m, int jx) {
    int t = m - jx * STRIDE_X;
    return t >= 0 && t % DILATION_X == 0 && t / DILATION_X < KW ? t / DILATION_X : -1;
}
#endif

// Where a blocked conv, or a direct depthwise one reading its input in place, reads its input.
#if defined(BLOCKED_OUTPUT) || defined(BLOCKED_INPUT)
#include "conv_block_input.glsl"
#endif
#if defined(BLOCKED_OUTPUT)
#include "conv_block.glsl"
#elif defined(DENSE) || defined(DEPTHWISE)
#include "conv_direct.glsl"
#else
#include "conv_generic.glsl"
#endif
