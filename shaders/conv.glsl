// conv.glsl - ONNX Conv: y[o] = B[o] + sum_{c,ky,kx} x[g(o)*Cg + c, oy*s - pad + ky*d] * W[o, c, ky, kx]
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

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
uniform sampler2D u_weights;
uniform sampler2D u_params;
uniform ivec2 u_stride;
uniform ivec2 u_dilation;
uniform ivec2 u_pad;
uniform int u_cog;
uniform int u_cg;

// Weights of input channel c at tap (ky, kx) for the 4 output channels of `slice`.
vec4 tap(int c, int slice, int ky, int kx) {
    return texelFetch(u_weights, ivec2(c * KW + kx, slice * KH + ky), 0);
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

vec4 compute(int slice, int oy, int ox) {
    vec4 acc = channel_params(u_params, slice, 0);
    ivec4 lanes = 4 * slice + ivec4(0, 1, 2, 3);
    ivec4 group_first = (lanes / u_cog) * u_cg;  // first input channel of each lane's group
#if defined(TRANSPOSED) && defined(UNIT_DILATION)
    // Only taps in the output's stride phase reach an input: skip the others outright
    // (a stride-2 transposed conv would otherwise spend 3/4 of its fetches on zeros).
    ivec2 first = (ivec2(ox, oy) + u_pad) % u_stride;
    ivec2 step = u_stride;
#else
    ivec2 first = ivec2(0), step = ivec2(1);
#endif
    for (int ky = first.y; ky < KH; ky += step.y) {
        int iy = source(oy, ky, u_pad.y, u_stride.y, u_dilation.y);
        for (int kx = first.x; kx < KW; kx += step.x) {
            int ix = source(ox, kx, u_pad.x, u_stride.x, u_dilation.x);
#if defined(DENSE)
            for (int c = 0; c < CG; c += 4) {
                vec4 x = fetch(u_input, u_input_shape, group_first.x / 4 + c / 4, iy, ix);
                acc += mat4(tap(c, slice, ky, kx), tap(c + 1, slice, ky, kx),
                            tap(c + 2, slice, ky, kx), tap(c + 3, slice, ky, kx)) * x;
            }
#elif defined(DEPTHWISE)
            acc += tap(0, slice, ky, kx) * fetch(u_input, u_input_shape, slice, iy, ix);
#else
            for (int c = 0; c < CG; ++c) {
                ivec4 ch = group_first + c;
                vec4 x = vec4(fetch_channel(u_input, u_input_shape, ch.x, iy, ix),
                              fetch_channel(u_input, u_input_shape, ch.y, iy, ix),
                              fetch_channel(u_input, u_input_shape, ch.z, iy, ix),
                              fetch_channel(u_input, u_input_shape, ch.w, iy, ix));
                acc += tap(c, slice, ky, kx) * x;
            }
#endif
        }
    }
    return acc;
}
