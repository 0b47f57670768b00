// common.glsl - prepended to every op shader (glcnn/runtime/shaders.py, which also splices
// in the files a shader #includes): tile-grid addressing, the fused epilogue (residual add,
// activation, affine) and main(). Op shaders only define
//     vec4 compute(int slice, int y, int x);
// returning the 4 channels 4*slice..4*slice+3 of output pixel (y, x).
//
// Layout of a (C, H, W) tensor (glcnn/layout.py): 4 channels per RGBA texel ("slice"),
// S = ceil(C/4) tiles of WxH in a grid of cols = ceil(sqrt(S)) columns, row by row.
// C = 10 -> S = 3 -> 2x2 grid:     +---------+---------+
//                                | slice 0 | slice 1 |   ch 0-3 | ch 4-7
//                                +---------+---------+
//                                | slice 2 |  zeros  |   ch 8,9,0,0
//                                +---------+---------+
// Shapes travel as ivec4 (C, H, W, cols | id << 16): `id` names the tensor's row pair in
// u_ranges for u8 storage (0 = stored as is).
//
// Storage: fp32/fp16 textures hold values as they are. With STORAGE_U8 a texel holds
// (v - offset) / scale per channel in RGBA8 (glcnn/precision.py calibrates offset and scale
// so nothing clamps); decode() and encode() below are the only places that know.
//
// Defines: STORAGE_U8 (range-scaled RGBA8 storage); CUSTOM_MAIN (a shader with its own main(),
//          no compute(): display, unblock); BLOCKED_OUTPUT with BLOCK_X, BLOCK_Y, BLOCK_STEP
//          (the op defines compute_block() instead of compute(), see "Spatial blocking" below);
//          RESIDUAL (add u_residual before the activation; with RESIDUAL_AFTER, after it); one
//          of ACT_RELU, ACT_LEAKYRELU, ACT_PRELU, ACT_CLIP, ACT_SIGMOID, ACT_TANH, ACT_ELU,
//          ACT_HARDSIGMOID, ACT_HARDSWISH, ACT_SILU, or ACT_CLAMP (no activation, Relu, Clip,
//          HardSigmoid or HardSwish in one program: clamp(a x + b) to u_act, times x for
//          HardSwish, if u_act_on; glcnn/ops/base.py CLAMP_FORMS); POST_AFFINE (then v * scale
//          + shift per channel, glcnn/graph/fuse_affine.py); OUTPUT_GRAD with a GRAD_ define
//          (after the residual add: v * f'(y), activation_derivative.glsl).
// Uniforms: u_out (output shape), u_act (activation parameters: alpha/beta or min/max),
//           u_act_on and u_act_form (ACT_CLAMP: 0 = no activation; (a, b, times x)).
// Samplers: u_residual (RESIDUAL), u_slope (ACT_PRELU: 1xS texel row of slopes),
//           u_affine (POST_AFFINE: rows scale, shift),
//           u_ranges (STORAGE_U8: row 2*id = offsets, row 2*id + 1 = scales, per slice).

// Combinations that would compile into something else than they say (the long line: no \ in 330).
#if defined(ACT_RELU) + defined(ACT_LEAKYRELU) + defined(ACT_PRELU) + defined(ACT_CLIP) + defined(ACT_SIGMOID) + defined(ACT_TANH) + defined(ACT_ELU) + defined(ACT_HARDSIGMOID) + defined(ACT_HARDSWISH) + defined(ACT_SILU) + defined(ACT_CLAMP) > 1
#error at most one of ACT_RELU, ACT_LEAKYRELU, ACT_PRELU, ACT_CLIP, ACT_SIGMOID, ACT_TANH, ACT_ELU, ACT_HARDSIGMOID, ACT_HARDSWISH, ACT_SILU, ACT_CLAMP
#elif defined(RESIDUAL_AFTER) && (!defined(RESIDUAL) || defined(OUTPUT_GRAD))
#error RESIDUAL_AFTER needs RESIDUAL, and no OUTPUT_GRAD
#endif
#ifdef BLOCKED_OUTPUT
#if !defined(BLOCK_X) || !defined(BLOCK_Y) || !defined(BLOCK_STEP)
#error BLOCKED_OUTPUT needs BLOCK_X, BLOCK_Y and BLOCK_STEP
#elif BLOCK_X * BLOCK_Y < 1 || BLOCK_X * BLOCK_Y > 8
#error BLOCKED_OUTPUT needs BLOCK_X * BLOCK_Y in 1..8 (main() below writes 8 targets at most)
#endif
#endif

uniform ivec4 u_out;
uniform vec2 u_act;
#ifdef BLOCKED_OUTPUT
#define BLOCK (BLOCK_X * BLOCK_Y)
layout(location = 0) out vec4 frag_block[BLOCK];
#else
out vec4 frag_color;
#endif

#ifdef STORAGE_U8
uniform sampler2D u_ranges;
#endif

int grid_cols(ivec4 shape) { return shape.w & 0xFFFF; }

// a div b for a >= 0, b >= 1, in float: llvmpipe scalarises integer division by a non-constant
// (lane by lane): a quarter of the cost of a copy pass such as unblock.glsl went there. Exact
// for a < 2^21 on any GL (division is within 2.5 ulp; a, the texel coordinates and slices of
// a texture, is < 2^16, and (a + 0.5) / b is at least 0.5 / b from an integer).
int div_floor(int a, int b) { return int(floor((float(a) + 0.5) / float(b))); }
ivec2 div_floor(ivec2 a, ivec2 b) { return ivec2(floor((vec2(a) + 0.5) / vec2(b))); }
ivec4 div_floor(ivec4 a, int b) { return ivec4(floor((vec4(a) + 0.5) / float(b))); }

vec4 decode(vec4 stored, ivec4 shape, int slice) {
#ifdef STORAGE_U8
    int id = shape.w >> 16;
    if (id == 0) return stored;
    return stored * texelFetch(u_ranges, ivec2(slice, 2 * id + 1), 0)
         + texelFetch(u_ranges, ivec2(slice, 2 * id), 0);
#else
    return stored;
#endif
}

vec4 encode(vec4 value, ivec4 shape, int slice) {
#ifdef STORAGE_U8
    int id = shape.w >> 16;
    if (id == 0) return value;
    return (value - texelFetch(u_ranges, ivec2(slice, 2 * id), 0))
         / texelFetch(u_ranges, ivec2(slice, 2 * id + 1), 0);
#else
    return value;
#endif
}

// decode() for many texels of one slice: look the range up once with storage_range(), then
// apply it to each texel with decode_with() (an identity unless STORAGE_U8).
mat2x4 storage_range(ivec4 shape, int slice) {
#ifdef STORAGE_U8
    int id = shape.w >> 16;
    if (id != 0) return mat2x4(texelFetch(u_ranges, ivec2(slice, 2 * id + 1), 0),
                               texelFetch(u_ranges, ivec2(slice, 2 * id), 0));
#endif
    return mat2x4(vec4(1.0), vec4(0.0));
}

vec4 decode_with(vec4 stored, mat2x4 range) {
#ifdef STORAGE_U8
    return stored * range[0] + range[1];
#else
    return stored;
#endif
}

// Top-left texel of `slice`'s tile in the atlas of `shape`.
ivec2 tile_origin(ivec4 shape, int slice) {
    int cols = grid_cols(shape);
    int row = div_floor(slice, cols);
    return ivec2(slice - row * cols, row) * shape.zy;
}

// Texel p of t (inside t) given inv_size = 1 / textureSize(t, 0), read as a NEAREST sample at
// the texel centre: the same value as texelFetch on every GL (pipeline textures have no
// mipmaps and NEAREST filters, so the explicit LOD is exact and needs no derivatives), and
// about twice as fast on llvmpipe, whose texelFetch pays for bounds checks (DESIGN.md 5).
vec4 sample_texel(sampler2D t, vec2 inv_size, ivec2 p) {
    return textureLod(t, (vec2(p) + 0.5) * inv_size, 0.0);
}

// The texel of t under this fragment (gl_FragCoord is its centre), sampled as above.
vec4 texel_here(sampler2D t) {
    return textureLod(t, gl_FragCoord.xy / vec2(textureSize(t, 0)), 0.0);
}

// Texel (x, y) of `slice`; zero outside the HxW tile (padding taps are masked, not clamped).
vec4 fetch(sampler2D t, ivec4 shape, int slice, int y, int x) {
    bool inside = uint(y) < uint(shape.y) && uint(x) < uint(shape.z);
    ivec2 p = inside ? tile_origin(shape, slice) + ivec2(x, y) : ivec2(0);
    return inside ? decode(texelFetch(t, p, 0), shape, slice) : vec4(0.0);
}

// One channel of a tensor as a scalar (for ops whose lanes read unrelated channels).
float fetch_channel(sampler2D t, ivec4 shape, int channel, int y, int x) {
    int c = min(channel, shape.x - 1);
    return fetch(t, shape, c / 4, y, x)[c % 4];
}

// Per-channel parameters: row `row` of a (rows x S) texture made by layout.pack_channels.
vec4 channel_params(sampler2D t, int slice, int row) {
    return texelFetch(t, ivec2(slice, row), 0);
}

#ifdef RESIDUAL
uniform sampler2D u_residual;
uniform ivec4 u_residual_shape;
#endif
#ifdef ACT_PRELU
uniform sampler2D u_slope;
#endif
#ifdef ACT_CLAMP
uniform int u_act_on;
uniform vec3 u_act_form;  // (a, b, times x): clamp(a * x + b, u_act.x, u_act.y), times x if set
#endif
#ifdef POST_AFFINE
uniform sampler2D u_affine;
#endif

// exp() overflows to inf for large |x|; these forms stay finite at both ends.
vec4 sigmoid(vec4 x) { return 1.0 / (1.0 + exp(-x)); }
vec4 safe_tanh(vec4 x) { return 1.0 - 2.0 / (exp(2.0 * x) + 1.0); }

vec4 activate(vec4 x, int slice) {
#if defined(ACT_RELU)
    return max(x, 0.0);
#elif defined(ACT_LEAKYRELU)
    return mix(x * u_act.x, x, greaterThanEqual(x, vec4(0.0)));
#elif defined(ACT_PRELU)
    return mix(x * channel_params(u_slope, slice, 0), x, greaterThanEqual(x, vec4(0.0)));
#elif defined(ACT_CLIP)
    return clamp(x, u_act.x, u_act.y);
#elif defined(ACT_SIGMOID)
    return sigmoid(x);
#elif defined(ACT_TANH)
    return safe_tanh(x);
#elif defined(ACT_ELU)
    return mix(u_act.x * (exp(min(x, 0.0)) - 1.0), x, greaterThan(x, vec4(0.0)));
#elif defined(ACT_HARDSIGMOID)
    return clamp(u_act.x * x + u_act.y, 0.0, 1.0);
#elif defined(ACT_HARDSWISH)
    return x * clamp(x / 6.0 + 0.5, 0.0, 1.0);
#elif defined(ACT_SILU)
    return x * sigmoid(x);
#elif defined(ACT_CLAMP)
    vec4 t = clamp(u_act_form.x * x + u_act_form.y, u_act.x, u_act.y);
    return u_act_on == 0 ? x : u_act_form.z != 0.0 ? x * t : t;
#else
    return x;
#endif
}

// The slice of the output atlas this fragment writes and its (x, y) in the tile; false on a
// tile past the last slice (which stays zero).
bool output_texel(out int slice, out ivec2 q) {
    ivec2 p = ivec2(gl_FragCoord.xy);
    ivec2 tile = div_floor(p, u_out.zy);
    slice = tile.y * grid_cols(u_out) + tile.x;
    q = p - tile * u_out.zy;
    return slice < (u_out.x + 3) / 4;
}

#include "activation_derivative.glsl"

// The fused epilogue of output pixel (y, x) of `slice`: residual add and activation (in either
// order), affine, zero lanes past C (read as whole slices, unmasked, later), storage encoding.
vec4 epilogue(vec4 v, int slice, int y, int x) {
#if defined(RESIDUAL) && !defined(RESIDUAL_AFTER)
    v += fetch(u_residual, u_residual_shape, slice, y, x);
#endif
#ifdef OUTPUT_GRAD  // v is dL/dy of y = f(z) in u_forward: dL/dz (activation_derivative.glsl)
    v = activation_derivative(v, fetch(u_forward, u_forward_shape, slice, y, x));
#endif
    v = activate(v, slice);
#ifdef RESIDUAL_AFTER
    v += fetch(u_residual, u_residual_shape, slice, y, x);
#endif
#ifdef POST_AFFINE
    v = v * channel_params(u_affine, slice, 0) + channel_params(u_affine, slice, 1);
#endif
    v = mix(vec4(0.0), v, lessThan(ivec4(0, 1, 2, 3) + 4 * slice, ivec4(u_out.x)));
    return encode(v, u_out, slice);
}

// Spatial blocking (DESIGN.md section 5; glcnn/plan.py chooses it per context). One
// fragment computes BLOCK = BLOCK_Y x BLOCK_X output pixels of one slice, BLOCK_STEP apart
// (1 for a conv; the stride for a transposed conv, so the pixels share their kernel taps), and
// writes pixel j = (j / BLOCK_X, j % BLOCK_X) of its block to render target j. Each weight
// fetch then feeds 4 * BLOCK multiply-adds instead of 4. Render target j holds the "blocked
// tensor": S tiles of u_bands.y rows by u_block.y columns, where blocked (row, col) = (by, bx)
// holds output pixel
//     (by / STEP * STEP * BLOCK_Y + by % STEP + jy * STEP,  likewise for x);
// each tile is cut into u_bands.x bands of u_block.x rows, and band b of slice s is cell
// v = b * S + s; groups of u_bands.z cells sit side by side (u_block.y texels apart) in
// a grid of u_block.z columns, u_block.w texels apart; small outputs are cut into bands to
// spread over every llvmpipe thread, the outputs of large inputs so that a screen tile reads
// a band of the input (glcnn/layout.py, Blocking). unblock.glsl copies them into the atlas.

// The first texel of cell `cell` of a blocked tensor laid out by `block` (its u_block) in
// groups of `group` cells (its u_bands.z).
ivec2 cell_origin(int cell, ivec4 block, int group) {
    int g = div_floor(cell, group);
    int row = div_floor(g, block.z);
    return ivec2((g - row * block.z) * block.w + (cell - g * group) * block.y, row * block.x);
}

#if defined(BLOCKED_OUTPUT) && !defined(CUSTOM_MAIN)
uniform ivec4 u_block;  // (band rows, tile columns, grid columns, pitch) of the blocked tensor
uniform ivec3 u_bands;  // (bands per tile, tile rows, cells per group)
vec4 block_acc[BLOCK];  // compute_block() leaves pixel j's sum here
void compute_block(int slice, int y, int x);  // pixel j = (y + jy * STEP, x + jx * STEP)

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    ivec2 group = div_floor(p, ivec2(u_block.w, u_block.x));  // (grid column, grid row)
    ivec2 q = p - group * ivec2(u_block.w, u_block.x);  // within the group
    int slot = q.x / u_block.y;  // its cell
    q.x -= slot * u_block.y;  // blocked (col, row) within the tile
    int band_index = (group.y * u_block.z + group.x) * u_bands.z + slot;
    int band = div_floor(band_index, (u_out.x + 3) / 4);
    int slice = band_index - band * ((u_out.x + 3) / 4);
    q.y += band * u_block.x;
    if (band >= u_bands.x || slot >= u_bands.z || q.y >= u_bands.y) {
#for j < BLOCK unroll 8
        block_acc[j] = vec4(0.0);
#endfor
    } else {
        ivec2 o = q / BLOCK_STEP * BLOCK_STEP * ivec2(BLOCK_X, BLOCK_Y) + q % BLOCK_STEP;
        compute_block(slice, o.y, o.x);
#for j < BLOCK unroll 8
        ivec2 at = o + BLOCK_STEP * ivec2(j % BLOCK_X, j / BLOCK_X);
        block_acc[j] = epilogue(block_acc[j], slice, at.y, at.x);
#endfor
    }
    // Outputs indexed by constants only (#for): some drivers (and GLSL ES) allow nothing else.
#for j < BLOCK unroll 8
    frag_block[j] = block_acc[j];
#endfor
}
#elif !defined(CUSTOM_MAIN)
vec4 compute(int slice, int y, int x);

void main() {
    int slice;
    ivec2 q;
    if (!output_texel(slice, q)) {
        frag_color = vec4(0.0);
        return;
    }
    frag_color = epilogue(compute(slice, q.y, q.x), slice, q.y, q.x);
}
#endif
