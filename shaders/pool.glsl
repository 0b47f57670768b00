// pool.glsl - ONNX MaxPool / AveragePool over a KH x KW window:
//   y[c, oy, ox] = reduce over (ky, kx) of x[c, oy*sy - pt + ky*dy, ox*sx - pl + kx*dx].
// MAX skips taps outside the input (ONNX pads with -inf); glcnn/ops/pool.py checks that every
// window holds at least one input tap. AVERAGE sums the taps inside the input (fetch gives
// zero outside) and divides by the number of taps inside u_count_box: the input alone
// (count_include_pad = 0) or the input and its explicit pads (1), never ceil_mode's extra.
// Defines: MAX | AVERAGE; KH, KW kernel size; BLOCKED_INPUT with IN_BLOCK_X, IN_BLOCK_Y,
//          IN_BLOCK_STEP (the input is a blocked conv's render-target array, read in place:
//          glcnn/runtime/plan.py; conv_block_input.glsl addresses it).
// Uniforms: u_input_shape, u_stride (x, y), u_dilation (x, y), u_pad (left, top),
//           u_count_box (AVERAGE: x0, y0, x1, y1, half-open), u_in_block, u_in_group
//           (BLOCKED_INPUT).
// Samplers: u_input.

#if defined(MAX) == defined(AVERAGE)
#error pool.glsl needs exactly one of MAX and AVERAGE
#endif
#if !defined(KH) || !defined(KW)
#error pool.glsl needs KH and KW
#endif

#include "pool_window.glsl"
#ifdef BLOCKED_INPUT
#include "conv_block_input.glsl"
#endif

// Input pixel p of `slice` (zero outside the input), its tile starting at `tile` (BLOCKED_INPUT:
// tile_at(first_tile(slice)); else unused).
vec4 pool_input(vec2 tile, int slice, ivec2 p) {
#ifdef BLOCKED_INPUT
    bool inside_input = uint(p.x) < uint(u_input_shape.z) && uint(p.y) < uint(u_input_shape.y);
    return inside_input ? decode(input_pixel(tile, p.y, p.x), u_input_shape, slice) : vec4(0.0);
#else
    return fetch(u_input, u_input_shape, slice, p.y, p.x);
#endif
}

vec4 compute(int slice, int oy, int ox) {
    ivec2 origin = ivec2(ox, oy) * u_stride - u_pad;
#ifdef BLOCKED_INPUT
    input_texel_size = 1.0 / vec2(textureSize(u_input, 0).xy);
    vec2 tile = tile_at(first_tile(slice));
#else
    vec2 tile = vec2(0.0);
#endif
#ifdef MAX
    ivec4 input_box = ivec4(0, 0, u_input_shape.z, u_input_shape.y);
    vec4 acc = vec4(uintBitsToFloat(0xFF800000u));  // -inf
#else
    vec4 acc = vec4(0.0);
    float count = 0.0;
#endif
    for (int ky = 0; ky < KH; ++ky) {
        for (int kx = 0; kx < KW; ++kx) {
            ivec2 p = origin + ivec2(kx, ky) * u_dilation;
#ifdef MAX
            if (inside(p, input_box)) {
                acc = max(acc, pool_input(tile, slice, p));
            }
#else
            acc += pool_input(tile, slice, p);
            count += inside(p, u_count_box) ? 1.0 : 0.0;
#endif
        }
    }
#ifdef MAX
    return acc;
#else
    return acc / count;
#endif
}
