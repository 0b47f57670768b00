// pool.glsl - ONNX MaxPool / AveragePool over a KH x KW window:
//   y[c, oy, ox] = reduce over (ky, kx) of x[c, oy*sy - pt + ky*dy, ox*sx - pl + kx*dx].
// MAX skips taps outside the input (ONNX pads with -inf); glcnn/ops/pool.py checks that every
// window holds at least one input tap. AVERAGE sums the taps inside the input (fetch gives
// zero outside) and divides by the number of taps inside u_count_box: the input alone
// (count_include_pad = 0) or the input and its explicit pads (1), never ceil_mode's extra.
// Defines: MAX | AVERAGE; KH, KW kernel size.
// Uniforms: u_input_shape, u_stride (x, y), u_dilation (x, y), u_pad (left, top),
//           u_count_box (AVERAGE: x0, y0, x1, y1, half-open).
// Samplers: u_input.

#if defined(MAX) == defined(AVERAGE)
#error pool.glsl needs exactly one of MAX and AVERAGE
#endif
#if !defined(KH) || !defined(KW)
#error pool.glsl needs KH and KW
#endif

#include "pool_window.glsl"

vec4 compute(int slice, int oy, int ox) {
    ivec2 origin = ivec2(ox, oy) * u_stride - u_pad;
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
                acc = max(acc, fetch(u_input, u_input_shape, slice, p.y, p.x));
            }
#else
            acc += fetch(u_input, u_input_shape, slice, p.y, p.x);
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
