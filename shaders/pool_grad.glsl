// pool_grad.glsl - dL/dx of ONNX MaxPool / AveragePool (glcnn/train/grad_ops.py, PoolGrad):
//   dx[c, i] = sum over outputs o and taps k with o*s - p + k*d = i of dY[c, o] * w(c, o, k),
// MAX: w = 1 where k is the first tap of window o holding its maximum (PyTorch's rule for
// ties; taps outside the input never count), else 0. AVERAGE: w = 1 / (the taps of window o
// inside u_count_box, the forward's divisor).
// Defines: MAX | AVERAGE; KH, KW kernel size (the forward op's).
// Uniforms: u_grad_shape (dY), u_input_shape (x), u_stride (x, y), u_dilation (x, y),
//           u_pad (left, top), u_count_box (AVERAGE: x0, y0, x1, y1, half-open).
// Samplers: u_grad (dY), u_input (x, the forward input; MAX only).

#if defined(MAX) == defined(AVERAGE)
#error pool_grad.glsl needs exactly one of MAX and AVERAGE
#endif
#if !defined(KH) || !defined(KW)
#error pool_grad.glsl needs KH and KW
#endif

uniform sampler2D u_grad;
uniform ivec4 u_grad_shape;
#include "pool_window.glsl"

#ifdef MAX
// Per lane, the tap index ky * KW + kx of the first maximum of output o's window (as floats:
// GLSL 330's mix() selects floats only).
vec4 first_argmax(int slice, ivec2 o) {
    ivec2 origin = o * u_stride - u_pad;
    ivec4 input_box = ivec4(0, 0, u_input_shape.z, u_input_shape.y);
    vec4 best = vec4(uintBitsToFloat(0xFF800000u));  // -inf
    vec4 index = vec4(-1.0);
    for (int ky = 0; ky < KH; ++ky) {
        for (int kx = 0; kx < KW; ++kx) {
            ivec2 p = origin + ivec2(kx, ky) * u_dilation;
            if (inside(p, input_box)) {
                vec4 v = fetch(u_input, u_input_shape, slice, p.y, p.x);
                bvec4 above = greaterThan(v, best);  // strict: ties keep the first
                best = mix(best, v, above);
                index = mix(index, vec4(float(ky * KW + kx)), above);
            }
        }
    }
    return index;
}
#else
// The forward's divisor for output o: its taps inside u_count_box.
float divisor(ivec2 o) {
    ivec2 origin = o * u_stride - u_pad;
    float count = 0.0;
    for (int ky = 0; ky < KH; ++ky) {
        for (int kx = 0; kx < KW; ++kx) {
            count += inside(origin + ivec2(kx, ky) * u_dilation, u_count_box) ? 1.0 : 0.0;
        }
    }
    return count;
}
#endif

vec4 compute(int slice, int iy, int ix) {
    ivec4 out_box = ivec4(0, 0, u_grad_shape.z, u_grad_shape.y);
    vec4 acc = vec4(0.0);
    for (int ky = 0; ky < KH; ++ky) {
        for (int kx = 0; kx < KW; ++kx) {
            // The output whose tap (ky, kx) is this input pixel, if any: o * s = i + p - k * d.
            ivec2 num = ivec2(ix, iy) + u_pad - ivec2(kx, ky) * u_dilation;
            if (any(lessThan(num, ivec2(0)))) continue;
            ivec2 o = num / u_stride;
            if (any(notEqual(o * u_stride, num)) || !inside(o, out_box)) continue;
            vec4 g = fetch(u_grad, u_grad_shape, slice, o.y, o.x);
#ifdef MAX
            acc += g * vec4(equal(first_argmax(slice, o), vec4(float(ky * KW + kx))));
#else
            acc += g / divisor(o);
#endif
        }
    }
    return acc;
}
