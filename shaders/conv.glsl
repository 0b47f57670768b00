// conv.glsl - ONNX Conv:
//     y[o] = B[o] + sum_{c,ky,kx} x[g(o)*Cg + c, oy*s - pad + ky*d] * W[o, c, ky, kx]
// and, with TRANSPOSED, ONNX/PyTorch ConvTranspose as a gather: output (oy, ox) sums the taps
// whose input row satisfies iy*s - pad + ky*d = oy (exact multiples of the stride only);
// glcnn/ops/conv.py re-orients its weights to (Co, Cg, kh, kw) so both share one layout.
// Defines: TRANSPOSED (with UNIT_DILATION: loop only over taps in the stride phase);
//          KH, KW kernel size; CG input channels per group (padded to 4 for DENSE);
//          DENSE (groups made of whole slices: one vec4 fetch feeds a mat4*vec4),
//          DEPTHWISE (Cg = Co/group = 1: output slice s reads input slice s), or neither
//          (generic: each output lane gathers its own input channels one by one).
// Uniforms: u_input_shape, u_stride (x, y), u_dilation (x, y), u_pad (left, top),
//           u_cog output channels per group, u_cg input channels per group.
// Samplers: u_input (activation atlas), u_weights (layout.pack_filters of (Co, CG, KH, KW)),
//           u_params (row 0: bias).
//
// Speed (DESIGN.md section 5; measured on llvmpipe, sound on every GL): the loops visit only
// taps whose input lies inside the tile (bounds from taps()), so DENSE and DEPTHWISE never
// fetch padding and need no mask; every fetch is a NEAREST sample at a texel centre
// (sample_texel), about twice as fast as texelFetch on llvmpipe and exact everywhere; the
// innermost loop walks the group's input slices tile by tile, with no integer division
// (llvmpipe scalarises it) and no per-tap address setup repeated for every slice.

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
uniform sampler2D u_weights;
uniform sampler2D u_params;
uniform ivec2 u_stride;
uniform ivec2 u_dilation;
uniform ivec2 u_pad;
uniform int u_cog;
uniform int u_cg;

#if defined(TRANSPOSED) && !defined(UNIT_DILATION)
#define MASK_TAPS 1  // taps() cannot bound a dilated transposed conv: mask each tap instead
#endif

vec2 weights_texel_size, input_texel_size;  // 1 / texture size, set by compute()

// Weights of input channel c at tap (ky, kx) for the 4 output channels of `slice`.
vec4 tap(int c, int slice, int ky, int kx) {
    return sample_texel(u_weights, weights_texel_size, ivec2(c * KW + kx, slice * KH + ky));
}

// Input row/column read by output position `o` through kernel tap `k`; -1 (masked to zero
// by fetch) when a transposed conv has no input there.
int source(int o, int k, int pad, int stride, int dilation) {
#ifdef TRANSPOSED
    int t = o + pad - k * dilation;
    return (t >= 0 && t % stride == 0) ? t / stride : -1;
#else
    return o * stride - pad + k * dilation;
#endif
}

// Taps (first, last, step) along one axis whose source() lies in [0, size): padding taps and,
// for a strided transposed conv, taps off the output's stride phase are never visited.
ivec3 taps(int o, int k, int pad, int stride, int dilation, int size) {
#if defined(MASK_TAPS)
    return ivec3(0, k - 1, 1);
#elif defined(TRANSPOSED)
    // source = (t - k) / stride: k = t (mod stride) and t - (size - 1) * stride <= k <= t
    int t = o + pad;
    return ivec3(max(t % stride, t - (size - 1) * stride), min(k - 1, t), stride);
#else
    int b = o * stride - pad;  // source = b + k * dilation
    int first = b >= 0 ? 0 : (dilation - 1 - b) / dilation;
    int last = b <= size - 1 ? min(k - 1, (size - 1 - b) / dilation) : -1;
    return ivec3(first, last, 1);
#endif
}

// Texel (x, y) of input `slice`, whose tile starts at `origin`; (y, x) lies inside the tile
// unless MASK_TAPS, where taps with no input read zero.
vec4 input_texel(ivec2 origin, int slice, int y, int x) {
#ifdef MASK_TAPS
    if (uint(y) >= uint(u_input_shape.y) || uint(x) >= uint(u_input_shape.z)) return vec4(0.0);
#endif
    vec4 stored = sample_texel(u_input, input_texel_size, origin + ivec2(x, y));
    return decode(stored, u_input_shape, slice);
}

#ifndef BLOCKED_OUTPUT
vec4 compute(int slice, int oy, int ox) {
    weights_texel_size = 1.0 / vec2(textureSize(u_weights, 0));
    input_texel_size = 1.0 / vec2(textureSize(u_input, 0));
    vec4 acc = channel_params(u_params, slice, 0);
    ivec4 lanes = 4 * slice + ivec4(0, 1, 2, 3);
    ivec4 group_first = (lanes / u_cog) * u_cg;  // first input channel of each lane's group
    ivec3 ty = taps(oy, KH, u_pad.y, u_stride.y, u_dilation.y, u_input_shape.y);
    ivec3 tx = taps(ox, KW, u_pad.x, u_stride.x, u_dilation.x, u_input_shape.z);
#if defined(DENSE) || defined(DEPTHWISE)
    // Source row/column of the first tap and its change per visited tap, so the tap loops
    // below do no integer division (scalarised, hence slow, on llvmpipe).
    ivec2 src = ivec2(source(ox, tx.x, u_pad.x, u_stride.x, u_dilation.x),
                      source(oy, ty.x, u_pad.y, u_stride.y, u_dilation.y));
#if defined(TRANSPOSED)
    ivec2 src_step = ivec2(-1);  // one stride phase step back in the input per tap
#else
    ivec2 src_step = u_dilation;
#endif
#ifdef DENSE
    int first_slice = group_first.x / 4;
#else
    int first_slice = slice;  // depthwise (CG = 1): output slice s reads input slice s only
#endif
    ivec2 first_origin = tile_origin(u_input_shape, first_slice);
    int row_end = grid_cols(u_input_shape) * u_input_shape.z;  // atlas width of whole tiles
    int iy = src.y;
    for (int ky = ty.x; ky <= ty.y; ky += ty.z, iy += src_step.y) {
        int ix = src.x;
        for (int kx = tx.x; kx <= tx.y; kx += tx.z, ix += src_step.x) {
#ifdef MASK_TAPS  // every tap is visited: recompute its source, -1 where it has none
            iy = source(oy, ky, u_pad.y, u_stride.y, u_dilation.y);
            ix = source(ox, kx, u_pad.x, u_stride.x, u_dilation.x);
#endif
            // Walk the input slices of the group tile by tile: no division per slice.
            ivec2 origin = first_origin;
            int s = first_slice;
            for (int c = 0; c < CG; c += 4, ++s) {
                vec4 x = input_texel(origin, s, iy, ix);
#ifdef DENSE
                acc += mat4(tap(c, slice, ky, kx), tap(c + 1, slice, ky, kx),
                            tap(c + 2, slice, ky, kx), tap(c + 3, slice, ky, kx)) * x;
#else
                acc += tap(0, slice, ky, kx) * x;
#endif
                origin.x += u_input_shape.z;
                origin = origin.x < row_end ? origin : ivec2(0, origin.y + u_input_shape.y);
            }
        }
    }
#else
    for (int ky = ty.x; ky <= ty.y; ky += ty.z) {
        int iy = source(oy, ky, u_pad.y, u_stride.y, u_dilation.y);
        for (int kx = tx.x; kx <= tx.y; kx += tx.z) {
            int ix = source(ox, kx, u_pad.x, u_stride.x, u_dilation.x);
            for (int c = 0; c < CG; ++c) {
                ivec4 ch = group_first + c;
                vec4 x = vec4(fetch_channel(u_input, u_input_shape, ch.x, iy, ix),
                              fetch_channel(u_input, u_input_shape, ch.y, iy, ix),
                              fetch_channel(u_input, u_input_shape, ch.z, iy, ix),
                              fetch_channel(u_input, u_input_shape, ch.w, iy, ix));
                acc += tap(c, slice, ky, kx) * x;
            }
        }
    }
#endif
    return acc;
}
#endif

#ifdef BLOCKED_OUTPUT
// Spatial blocking (common.glsl; DENSE and DEPTHWISE, never MASK_TAPS): the BLOCK pixels share
// every weight fetch. At one tap, pixel j = (jy, jx) reads its source SRC_PER_PIXEL * (jx, jy)
// from pixel 0's: pixels one apart in a conv read inputs a stride apart, pixels a stride apart
// (same stride phase, hence same taps) in a transposed conv read neighbouring inputs. The loops
// visit the union of the block's taps; a pixel whose source lies outside the input reads zero.
#ifdef TRANSPOSED
#define SRC_PER_PIXEL ivec2(1)
#else
#define SRC_PER_PIXEL u_stride
#endif

ivec3 tap_union(ivec3 a, ivec3 b) { return ivec3(min(a.x, b.x), max(a.y, b.y), a.z); }

void compute_block(int slice, int oy, int ox) {
    vec2 w_inv = 1.0 / vec2(textureSize(u_weights, 0));
    vec2 x_inv = 1.0 / vec2(textureSize(u_input, 0));
    vec4 bias = channel_params(u_params, slice, 0);
    for (int j = 0; j < BLOCK; ++j) block_acc[j] = bias;
    ivec2 last = ivec2(ox, oy) + (ivec2(BLOCK_X, BLOCK_Y) - 1) * BLOCK_STEP;
    ivec3 ty = tap_union(taps(oy, KH, u_pad.y, u_stride.y, u_dilation.y, u_input_shape.y),
                         taps(last.y, KH, u_pad.y, u_stride.y, u_dilation.y, u_input_shape.y));
    ivec3 tx = tap_union(taps(ox, KW, u_pad.x, u_stride.x, u_dilation.x, u_input_shape.z),
                         taps(last.x, KW, u_pad.x, u_stride.x, u_dilation.x, u_input_shape.z));
    ivec2 src = ivec2(source(ox, tx.x, u_pad.x, u_stride.x, u_dilation.x),
                      source(oy, ty.x, u_pad.y, u_stride.y, u_dilation.y));
#ifdef TRANSPOSED
    ivec2 src_step = ivec2(-1);
#else
    ivec2 src_step = u_dilation;
#endif
#ifdef DENSE
    int first_slice = 4 * slice / u_cog * u_cg / 4;  // first input slice of the group
#else
    int first_slice = slice;
#endif
    ivec2 first_origin = tile_origin(u_input_shape, first_slice);
    int row_end = grid_cols(u_input_shape) * u_input_shape.z;
    vec2 next_weight = vec2(KW * w_inv.x, 0.0);  // from input channel c to c + 1
    int iy = src.y;
    for (int ky = ty.x; ky <= ty.y; ky += ty.z, iy += src_step.y) {
        int ix = src.x;
        for (int kx = tx.x; kx <= tx.y; kx += tx.z, ix += src_step.x) {
            vec2 offset[BLOCK];  // texel centre of each pixel's source, relative to the tile
            bool inside[BLOCK];
            for (int j = 0; j < BLOCK; ++j) {
                ivec2 at = ivec2(ix, iy) + ivec2(j % BLOCK_X, j / BLOCK_X) * SRC_PER_PIXEL;
                inside[j] = uint(at.x) < uint(u_input_shape.z) &&
                            uint(at.y) < uint(u_input_shape.y);
                offset[j] = (vec2(at) + 0.5) * x_inv;
            }
            vec2 w_at = (vec2(kx, slice * KH + ky) + 0.5) * w_inv;
            ivec2 origin = first_origin;
            int s = first_slice;
            for (int c = 0; c < CG; c += 4, ++s) {
                vec2 tile = vec2(origin) * x_inv;
                mat2x4 range = storage_range(u_input_shape, s);
#ifdef DENSE
                vec2 wc = w_at + float(c) * next_weight;
                mat4 w = mat4(textureLod(u_weights, wc, 0.0),
                              textureLod(u_weights, wc + next_weight, 0.0),
                              textureLod(u_weights, wc + 2.0 * next_weight, 0.0),
                              textureLod(u_weights, wc + 3.0 * next_weight, 0.0));
#else
                vec4 w = textureLod(u_weights, w_at, 0.0);
#endif
                for (int j = 0; j < BLOCK; ++j) {
                    vec4 x = decode_with(textureLod(u_input, tile + offset[j], 0.0), range);
                    block_acc[j] += w * (inside[j] ? x : vec4(0.0));
                }
                origin.x += u_input_shape.z;
                origin = origin.x < row_end ? origin : ivec2(0, origin.y + u_input_shape.y);
            }
        }
    }
}
#endif
