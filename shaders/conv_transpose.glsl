// conv_transpose.glsl - ONNX/PyTorch ConvTranspose (glcnn/ops/conv.py) as a gather: output
// (oy, ox) sums the taps whose input row satisfies iy*s - pad + ky*d = oy (exact multiples of
// the stride only); glcnn/ops/conv.py re-orients its weights to (Co, Cg, kh, kw), so it shares
// everything with conv.glsl (see there) but the geometry in this file: which input a tap
// reads, and which taps to visit.
// Defines: those of conv_defines.glsl; TRANSPOSED (set with this file); UNIT_DILATION: loop
//          only over the taps of the output's stride phase. Without it (a dilated transposed
//          conv) every tap is visited and masked (MASK_TAPS), and there is no blocked form.

#if defined(BLOCKED_OUTPUT) && !defined(UNIT_DILATION)
#error BLOCKED_OUTPUT with TRANSPOSED needs UNIT_DILATION (a dilated one masks each tap)
#endif
#include "conv_defines.glsl"
#include "conv_inputs.glsl"

#ifndef UNIT_DILATION
#define MASK_TAPS 1  // taps() cannot bound a dilated transposed conv: mask each tap instead
#endif

// Input row/column read by output position `o` through kernel tap `k`; -1 (masked to zero
// by the fetch) when there is no input there.
int source(int o, int k, int pad, int stride, int dilation) {
    int t = o + pad - k * dilation;
    int q = div_floor(max(t, 0), stride);
    return (t >= 0 && q * stride == t) ? q : -1;
}

// Taps (first, last, step) along one axis whose source() lies in [0, size): taps off the
// output's stride phase are never visited (unless MASK_TAPS).
ivec3 taps(int o, int k, int pad, int stride, int dilation, int size) {
#ifdef MASK_TAPS
    return ivec3(0, k - 1, 1);
#else
    // source = (t - k) / stride: k = t (mod stride) and t - (size - 1) * stride <= k <= t
    int t = o + pad;
    int phase = t - div_floor(t, stride) * stride;  // t mod stride
    return ivec3(max(phase, t - (size - 1) * stride), min(k - 1, t), stride);
#endif
}

// Change of the source per visited tap: one stride phase step back in the input. Pixels of a
// block are a stride apart (BLOCK_STEP), so neighbouring pixels read neighbouring inputs.
#define SRC_PER_TAP ivec2(-1)
#define SRC_PER_PIXEL ivec2(1)

#ifdef SHARE_COLUMNS
// Column pairing (conv_block_columns.glsl): pixels STRIDE_X apart (one stride phase) read,
// through the phase's taps kx = phase + STRIDE_X * t, columns base - t + jx. NW counts the
// taps of the largest phase; a phase with fewer gets zero weights.
#define NW ((KW + STRIDE_X - 1) / STRIDE_X)
#define SPAN_X (BLOCK_X + NW - 1)
int phase_x;
int first_column(int ox) {
    phase_x = (ox + u_pad.x) % STRIDE_X;
    return (ox + u_pad.x - phase_x) / STRIDE_X - (NW - 1);
}
int tap_column(int t) { return phase_x + STRIDE_X * t; }
int pair_tap(int m, int jx) {
    int t = jx + NW - 1 - m;
    return t >= 0 && t < NW ? t : -1;
}
#endif

#if defined(BLOCKED_OUTPUT)
#include "conv_block.glsl"
#elif defined(DENSE) || defined(DEPTHWISE)
#include "conv_direct.glsl"
#else
#include "conv_generic.glsl"
#endif
