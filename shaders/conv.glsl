// conv.glsl - ONNX Conv:
//     y[o] = B[o] + sum_{c,ky,kx} x[g(o)*Cg + c, oy*s - pad + ky*d] * W[o, c, ky, kx]
// and, with TRANSPOSED, ONNX/PyTorch ConvTranspose as a gather: output (oy, ox) sums the taps
// whose input row satisfies iy*s - pad + ky*d = oy (exact multiples of the stride only);
// glcnn/ops/conv.py re-orients its weights to (Co, Cg, kh, kw) so both share one layout.
// Defines: WEIGHTS_BUFFER (the filters in a buffer texture: glcnn/plan.py chooses it
//          where the GL allows that many texels in one);
//          TRANSPOSED (with UNIT_DILATION: loop only over taps in the stride phase);
//          KH, KW kernel size; CG input channels per group (padded to 4 for DENSE), or
//          WIDE_INPUT instead (DENSE with several input slices per group: the count is the
//          uniform u_cg_loop, so one program serves every width, and blocked passes share
//          input columns);
//          DENSE (groups made of whole slices: one vec4 fetch feeds a mat4*vec4),
//          DEPTHWISE (Cg = Co/group = 1: output slice s reads input slice s), or neither
//          (generic: each output lane gathers its own input channels one by one);
//          STRIDE_X, DILATION_X (BLOCKED_OUTPUT only: the x stride and dilation, constants for
//          the blocked loops; the direct form reads u_stride and u_dilation);
//          BLOCKED_OUTPUT (spatial blocking, common.glsl: compute_block() instead of compute());
//          IN_ACT_RELU or IN_ACT_LEAKYRELU (DENSE or DEPTHWISE: the activation is applied to
//          every input texel as it is fetched; both map 0 to 0, so masked taps stay zero);
//          BLOCKED_INPUT with IN_BLOCK_X, IN_BLOCK_Y, IN_BLOCK_STEP (DENSE and BLOCKED_OUTPUT
//          only): the input is the render-target array of the blocked conv that made it, read
//          in place (its unblock pass is skipped, glcnn/plan.py), see "Blocked input" below;
//          or INPUT_BUFFER (BLOCKED_OUTPUT only): the input atlas copied into a buffer texture,
//          u_input_width texels a row (see "Input buffer").
// Uniforms: u_input_shape, u_stride (x, y), u_dilation (x, y), u_pad (left, top),
//           u_cog output channels per group, u_cg input channels per group,
//           u_cg_loop (WIDE_INPUT: CG padded to whole slices), u_in_alpha (IN_ACT_LEAKYRELU).
//           u_in_block (BLOCKED_INPUT: the producer's u_block), u_input_width (INPUT_BUFFER).
// Samplers: u_input (activation atlas; with BLOCKED_INPUT a sampler2DArray, with INPUT_BUFFER
//           a samplerBuffer of the atlas texture row by row), u_weights
//           (layout.pack_filters of (Co, CG, KH, KW); with WEIGHTS_BUFFER a samplerBuffer
//           holding that layout row by row, u_weights_width texels a row), u_params (row 0:
//           bias).
//
// Speed (DESIGN.md section 5; measured on llvmpipe, sound on every GL): the loops visit only
// taps whose input lies inside the tile (bounds from taps()), so DENSE and DEPTHWISE never
// fetch padding and need no mask; every fetch is a NEAREST sample at a texel centre
// (sample_texel), about twice as fast as texelFetch on llvmpipe and exact everywhere; the
// innermost loop walks the group's input slices tile by tile, with no integer division
// (llvmpipe scalarises it) and no per-tap address setup repeated for every slice.
// Blocked (chosen by glcnn/plan.py on software rasterisers): BLOCK pixels per fragment
// share each weight fetch, and neighbouring pixels share input fetches (see compute_block).

#ifdef BLOCKED_INPUT
uniform sampler2DArray u_input;
uniform ivec4 u_in_block;
#elif defined(INPUT_BUFFER)
uniform samplerBuffer u_input;  // the input texture's texels row by row
uniform int u_input_width;  // texels per row of that texture
#else
uniform sampler2D u_input;
#endif
uniform ivec4 u_input_shape;
#ifdef WEIGHTS_BUFFER
uniform samplerBuffer u_weights;
uniform int u_weights_width;  // texels per row of the filter layout
#else
uniform sampler2D u_weights;
#endif
uniform sampler2D u_params;
uniform ivec2 u_stride;
uniform ivec2 u_dilation;
uniform ivec2 u_pad;
uniform int u_cog;
uniform int u_cg;

#ifdef WIDE_INPUT
uniform int u_cg_loop;  // input channels per group, padded to whole slices
#define CG_LOOP u_cg_loop
#else
#define CG_LOOP CG
#endif

#if defined(TRANSPOSED) && !defined(UNIT_DILATION)
#define MASK_TAPS 1  // taps() cannot bound a dilated transposed conv: mask each tap instead
#endif

#ifdef IN_ACT_LEAKYRELU
uniform float u_in_alpha;
#endif

// The fused activation of the input (glcnn.passes.fuse_input_activations), or none.
vec4 input_activation(vec4 x) {
#if defined(IN_ACT_RELU)
    return max(x, 0.0);
#elif defined(IN_ACT_LEAKYRELU)
    return mix(x * u_in_alpha, x, greaterThanEqual(x, vec4(0.0)));
#else
    return x;
#endif
}

vec2 weights_texel_size, input_texel_size;  // 1 / texture size, set by compute() or begin_block()

// The filter layout (layout.pack_filters): row `slice * KH + ky` holds, per input channel c,
// the KW taps of the slice's 4 output channels. A row is named by a weights_row and read
// texel by texel with weights_texel: an index into a buffer texture (WEIGHTS_BUFFER, one
// texelFetch, cheap on llvmpipe) or the texel centre of a 2D texture.
#ifdef WEIGHTS_BUFFER
#define WEIGHTS_ROW int
WEIGHTS_ROW weights_row(int slice, int ky) { return (slice * KH + ky) * u_weights_width; }
vec4 weights_texel(WEIGHTS_ROW row, int x) { return texelFetch(u_weights, row + x); }
void begin_weights() {}
#else
#define WEIGHTS_ROW vec2
WEIGHTS_ROW weights_row(int slice, int ky) {
    return (vec2(0, slice * KH + ky) + 0.5) * weights_texel_size;
}
vec4 weights_texel(WEIGHTS_ROW row, int x) {
    return textureLod(u_weights, row + vec2(float(x) * weights_texel_size.x, 0.0), 0.0);
}
void begin_weights() { weights_texel_size = 1.0 / vec2(textureSize(u_weights, 0)); }
#endif

// Weights of input channel c at tap (ky, kx) for the 4 output channels of `slice`.
vec4 tap(int c, int slice, int ky, int kx) {
    return weights_texel(weights_row(slice, ky), c * KW + kx);
}

// Input row/column read by output position `o` through kernel tap `k`; -1 (masked to zero
// by fetch) when a transposed conv has no input there.
int source(int o, int k, int pad, int stride, int dilation) {
#ifdef TRANSPOSED
    int t = o + pad - k * dilation;
    int q = div_floor(max(t, 0), stride);
    return (t >= 0 && q * stride == t) ? q : -1;
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
    int phase = t - div_floor(t, stride) * stride;  // t mod stride
    return ivec3(max(phase, t - (size - 1) * stride), min(k - 1, t), stride);
#else
    int b = o * stride - pad;  // source = b + k * dilation
    int first = b >= 0 ? 0 : div_floor(dilation - 1 - b, dilation);
    int last = b <= size - 1 ? min(k - 1, div_floor(size - 1 - b, dilation)) : -1;
    return ivec3(first, last, 1);
#endif
}

#ifndef BLOCKED_OUTPUT
// Texel (x, y) of input `slice`, whose tile starts at `origin`; (y, x) lies inside the tile
// unless MASK_TAPS, where taps with no input read zero.
vec4 input_texel(ivec2 origin, int slice, int y, int x) {
#ifdef MASK_TAPS
    if (uint(y) >= uint(u_input_shape.y) || uint(x) >= uint(u_input_shape.z)) return vec4(0.0);
#endif
    vec4 stored = sample_texel(u_input, input_texel_size, origin + ivec2(x, y));
    return input_activation(decode(stored, u_input_shape, slice));
}

vec4 compute(int slice, int oy, int ox) {
    begin_weights();
    input_texel_size = 1.0 / vec2(textureSize(u_input, 0));
    vec4 acc = channel_params(u_params, slice, 0);
    ivec4 lanes = 4 * slice + ivec4(0, 1, 2, 3);
    ivec4 group_first = div_floor(lanes, u_cog) * u_cg;  // first input channel of each lane's group
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
            for (int c = 0; c < CG_LOOP; c += 4, ++s) {
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
#define SRC_PER_TAP ivec2(-1)  // one stride phase step back in the input per visited tap
#else
#define SRC_PER_PIXEL u_stride
#define SRC_PER_TAP u_dilation
#endif

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

// Common start of both forms below: texel sizes, block_acc = bias; returns the first input
// slice the output slice reads.
int begin_block(int slice) {
    begin_weights();
#ifndef INPUT_BUFFER
    input_texel_size = 1.0 / vec2(textureSize(u_input, 0).xy);
#endif
    vec4 bias = channel_params(u_params, slice, 0);
    for (int j = 0; j < BLOCK; ++j) block_acc[j] = bias;
#ifdef DENSE
    return div_floor(4 * slice, u_cog) * u_cg / 4;  // first input slice of the group
#else
    return slice;
#endif
}

// Weights at kernel column kx of tap row `row`, for input channels c..c+3.
WEIGHTS tap_weights(WEIGHTS_ROW row, int c, int kx) {
    int x = c * KW + kx;
#ifdef DENSE
    return mat4(weights_texel(row, x), weights_texel(row, x + KW),
                weights_texel(row, x + 2 * KW), weights_texel(row, x + 3 * KW));
#else
    return weights_texel(row, x);
#endif
}

#ifdef BLOCKED_INPUT
// Blocked input. Layer j = jy * IN_BLOCK_X + jx of u_input holds pixel (jy, jx) of every block of
// the producer, whose tile of slice s starts at grid cell s (one band per tile: u_in_block is
// (tile rows, tile columns, grid columns, pitch)). Along one axis, input coordinate x lies at
// blocked coordinate (x div span) * step + x mod step and block pixel (x mod span) div step,
// span = step * block (common.glsl, "Spatial blocking"); blocked_axis returns both. Coordinates
// outside the input (padding) are clamped to 0: their taps are masked anyway.
ivec2 blocked_axis(int x, int block) {
    int span = IN_BLOCK_STEP * block;
    int c = max(x, 0);
    int within = c % span;
    return ivec2(c / span * IN_BLOCK_STEP + within % IN_BLOCK_STEP, within / IN_BLOCK_STEP);
}

// Texture coordinate (relative to the tile) and layer of input column x and row y.
#define INPUT_AXIS float
INPUT_AXIS column_at(int x, out int layer) {
    ivec2 b = blocked_axis(x, IN_BLOCK_X);
    layer = b.y;
    return (float(b.x) + 0.5) * input_texel_size.x;
}
INPUT_AXIS row_at(int y, out int layer) {
    ivec2 b = blocked_axis(y, IN_BLOCK_Y);
    layer = b.y * IN_BLOCK_X;
    return (float(b.x) + 0.5) * input_texel_size.y;
}

ivec2 first_tile(int slice) {
    int row = div_floor(slice, u_in_block.z);
    return ivec2(slice - row * u_in_block.z, row) * u_in_block.wx;
}

// The origin of the input tile after `origin`, walking the grid cell by cell.
ivec2 next_tile(ivec2 origin) {
    origin.x += u_in_block.w;
    return origin.x < u_in_block.z * u_in_block.w ? origin : ivec2(0, origin.y + u_in_block.x);
}

#define INPUT_TILE vec2
INPUT_TILE tile_at(ivec2 origin) { return vec2(origin) * input_texel_size; }
vec4 input_sample(INPUT_TILE tile, INPUT_AXIS column, INPUT_AXIS row, int layer) {
    return textureLod(u_input, vec3(tile + vec2(column, row), float(layer)), 0.0);
}
#else
#ifdef INPUT_BUFFER
// Input buffer (glcnn/pipeline.py copies the input texture into a buffer texture before the
// pass): one texelFetch at index tile + row + column, cheaper on llvmpipe than a 2D sample.
// Coordinates outside the input are clamped into the tile: their taps are masked anyway.
#define INPUT_AXIS int
#define INPUT_TILE int
INPUT_AXIS column_at(int x, out int layer) {
    layer = 0;
    return clamp(x, 0, u_input_shape.z - 1);
}
INPUT_AXIS row_at(int y, out int layer) {
    layer = 0;
    return clamp(y, 0, u_input_shape.y - 1) * u_input_width;
}
INPUT_TILE tile_at(ivec2 origin) { return origin.y * u_input_width + origin.x; }
vec4 input_sample(INPUT_TILE tile, INPUT_AXIS column, INPUT_AXIS row, int layer) {
    return texelFetch(u_input, tile + row + column);
}
#else
#define INPUT_AXIS float
#define INPUT_TILE vec2
INPUT_AXIS column_at(int x, out int layer) {
    layer = 0;
    return (float(x) + 0.5) * input_texel_size.x;
}
INPUT_AXIS row_at(int y, out int layer) {
    layer = 0;
    return (float(y) + 0.5) * input_texel_size.y;
}
INPUT_TILE tile_at(ivec2 origin) { return vec2(origin) * input_texel_size; }
vec4 input_sample(INPUT_TILE tile, INPUT_AXIS column, INPUT_AXIS row, int layer) {
    return textureLod(u_input, tile + vec2(column, row), 0.0);
}
#endif

ivec2 first_tile(int slice) { return tile_origin(u_input_shape, slice); }

// The origin of the input tile after `origin`, walking the atlas row by row.
ivec2 next_tile(ivec2 origin) {
    origin.x += u_input_shape.z;
    int row_end = grid_cols(u_input_shape) * u_input_shape.z;
    return origin.x < row_end ? origin : ivec2(0, origin.y + u_input_shape.y);
}

#endif

#if defined(WIDE_INPUT) && (!defined(TRANSPOSED) || defined(UNIT_DILATION))
// Column sharing. Along x a block reads SPAN_X input columns, most of them shared by several
// (pixel, kernel column) pairs; each is fetched once per input slice and kernel row and feeds
// every pair that reads it. NW weight taps per kernel row are loaded once; pair_tap(m, jx)
// names the tap by which pixel jx reads column m (-1: none). The constant loops unroll, so the
// pairing is resolved at compile time. (Measured on llvmpipe: 1.2-1.4x faster than the tap
// loop further below from two input slices on; with one, the tap loop is faster.)
#ifndef TRANSPOSED
// A conv: pixel jx reads columns ix0 + jx * STRIDE_X + kx * DILATION_X.
#define NW KW
#define SPAN_X ((BLOCK_X - 1) * STRIDE_X + (KW - 1) * DILATION_X + 1)
int first_column(int ox) { return ox * STRIDE_X - u_pad.x; }
int tap_column(int t) { return t; }
int pair_tap(int m, int jx) {
    int t = m - jx * STRIDE_X;
    return t >= 0 && t % DILATION_X == 0 && t / DILATION_X < KW ? t / DILATION_X : -1;
}
#else
// A transposed conv: pixels STRIDE_X apart (one stride phase) read, through the phase's taps
// kx = phase + STRIDE_X * t, columns base - t + jx. NW counts the taps of the largest phase;
// a phase with fewer gets zero weights.
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

void compute_block(int slice, int oy, int ox) {
    int first_slice = begin_block(slice);
    ivec3 ty = block_taps(oy, BLOCK_Y, KH, u_pad.y, u_stride.y, u_dilation.y, u_input_shape.y);
    int ix0 = first_column(ox);
    INPUT_AXIS column[SPAN_X];  // where each column lies in a tile (column_at)
    int column_layer[SPAN_X];  // and its part of the layer (BLOCKED_INPUT; else 0)
    bool column_inside[SPAN_X];
    for (int m = 0; m < SPAN_X; ++m) {
        column[m] = column_at(ix0 + m, column_layer[m]);
        column_inside[m] = uint(ix0 + m) < uint(u_input_shape.z);
    }
    ivec2 first_origin = first_tile(first_slice);
    int iy0 = source(oy, ty.x, u_pad.y, u_stride.y, u_dilation.y);  // in range: ty.x is a tap
    for (int ky = ty.x; ky <= ty.y; ky += ty.z, iy0 += SRC_PER_TAP.y) {
        INPUT_AXIS row[BLOCK_Y];
        int row_layer[BLOCK_Y];
        bool row_inside[BLOCK_Y];
        for (int jy = 0; jy < BLOCK_Y; ++jy) {
            int iy = iy0 + jy * SRC_PER_PIXEL.y;
            row[jy] = row_at(iy, row_layer[jy]);
            row_inside[jy] = uint(iy) < uint(u_input_shape.y);
        }
        WEIGHTS_ROW w_at = weights_row(slice, ky);
        ivec2 origin = first_origin;
        int s = first_slice;
        for (int c = 0; c < CG_LOOP; c += 4, ++s, origin = next_tile(origin)) {
            INPUT_TILE tile = tile_at(origin);
            mat2x4 range = storage_range(u_input_shape, s);
            WEIGHTS w[NW];
            for (int t = 0; t < NW; ++t) {
                int kx = tap_column(t);
                w[t] = kx < KW ? tap_weights(w_at, c, kx) : WEIGHTS(0.0);
            }
            for (int jy = 0; jy < BLOCK_Y; ++jy) {
                for (int m = 0; m < SPAN_X; ++m) {
                    vec4 stored = input_sample(tile, column[m], row[jy],
                                               row_layer[jy] + column_layer[m]);
                    vec4 x = input_activation(decode_with(stored, range));
                    x = column_inside[m] && row_inside[jy] ? x : vec4(0.0);
                    for (int jx = 0; jx < BLOCK_X; ++jx) {
                        int t = pair_tap(m, jx);
                        if (t >= 0) block_acc[jy * BLOCK_X + jx] += w[t] * x;
                    }
                }
            }
        }
    }
}
#else
// Tap by tap: for each tap the block's pixels fetch their own sources and share its weights.
void compute_block(int slice, int oy, int ox) {
    int first_slice = begin_block(slice);
    ivec3 ty = block_taps(oy, BLOCK_Y, KH, u_pad.y, u_stride.y, u_dilation.y, u_input_shape.y);
    ivec3 tx = block_taps(ox, BLOCK_X, KW, u_pad.x, u_stride.x, u_dilation.x, u_input_shape.z);
    ivec2 src = ivec2(source(ox, tx.x, u_pad.x, u_stride.x, u_dilation.x),
                      source(oy, ty.x, u_pad.y, u_stride.y, u_dilation.y));
    ivec2 first_origin = first_tile(first_slice);
    int iy = src.y;
    for (int ky = ty.x; ky <= ty.y; ky += ty.z, iy += SRC_PER_TAP.y) {
        int ix = src.x;
        for (int kx = tx.x; kx <= tx.y; kx += tx.z, ix += SRC_PER_TAP.x) {
            INPUT_AXIS column[BLOCK], row[BLOCK];  // where each pixel's source lies in a tile
            int layer[BLOCK];  // and its layer (BLOCKED_INPUT; else 0)
            bool inside[BLOCK];
            for (int j = 0; j < BLOCK; ++j) {
                ivec2 at = ivec2(ix, iy) + ivec2(j % BLOCK_X, j / BLOCK_X) * SRC_PER_PIXEL;
                inside[j] = uint(at.x) < uint(u_input_shape.z) &&
                            uint(at.y) < uint(u_input_shape.y);
                int column_layer, row_layer;
                column[j] = column_at(at.x, column_layer);
                row[j] = row_at(at.y, row_layer);
                layer[j] = row_layer + column_layer;
            }
            WEIGHTS_ROW w_at = weights_row(slice, ky);
            ivec2 origin = first_origin;
            int s = first_slice;
            for (int c = 0; c < CG_LOOP; c += 4, ++s, origin = next_tile(origin)) {
                INPUT_TILE tile = tile_at(origin);
                mat2x4 range = storage_range(u_input_shape, s);
                WEIGHTS w = tap_weights(w_at, c, kx);
                for (int j = 0; j < BLOCK; ++j) {
                    vec4 stored = input_sample(tile, column[j], row[j], layer[j]);
                    vec4 x = input_activation(decode_with(stored, range));
                    block_acc[j] += w * (inside[j] ? x : vec4(0.0));
                }
            }
        }
    }
}
#endif  // the two forms of compute_block
#endif  // BLOCKED_OUTPUT
