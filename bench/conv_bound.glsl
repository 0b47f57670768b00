// conv_bound.glsl - the inner loop of a blocked KxK conv (K = 1 or 3), stride 1, pad K/2, with
// its weights and inputs from five places (bench/conv_bound.py): what a driver's fetches cost.
// Each fragment computes 8 output pixels in a row (x0 .. x0+7 of row y) of output slice `so`
// (4 channels), one render target per pixel, like glcnn's 1x8 blocked convs: per input slice
// it fetches the K rows x 7 + K columns its pixels read, once each, then the K*K taps' 4x4
// weight blocks. Input: a float32 buffer texture, slice-major rows (SI slices of H x W texels).
//
// Defines: K, H, W, SI (input slices), TW (W / 8), and one of
//   WEIGHTS_FETCHED  4 texelFetch per tap from u_w (glcnn's path): texel
//                    ((so * SI + c) * K * K + t) * 4 + column.
//   WEIGHTS_UNIFORM  one mat4 uniform for every tap and slice: the same multiply-adds with no
//                    weight fetches (a wrong conv; its time is the bound without them).
//   WEIGHTS_GATHERED 4 loads per tap from a uniform block at a uniform offset but a loop
//                    index (bound per output slice: conv_bound.py draws slice by slice).
//   WEIGHTS_BLENDED  input slice u_c only, its taps from u_taps at constant indices (one draw
//                    per output and input slice, summed by additive blending).
//   INPUT_COMPUTED   weights fetched, but no input fetches: the input is u_x scaled by
//                    1 + (c * H + y) * W + x (zero outside), the bound without input fetches.
//   PAIRED           K = 1, weights fetched, and a fragment computes 4 pixels of 2 output
//                    slices (2 * so and 2 * so + 1; targets 0-3 and 4-7): half the input
//                    fetches, twice the weight fetches.

#define TAPS (K * K)
#ifdef PAIRED
#define PIXELS 4  // per fragment and output slice
#if K != 1
#error PAIRED is for 1x1 convs
#endif
#else
#define PIXELS 8
#endif

uniform samplerBuffer u_in;
#if defined(WEIGHTS_FETCHED) || defined(INPUT_COMPUTED) || defined(PAIRED)
uniform samplerBuffer u_w;
uniform vec4 u_x;
#elif defined(WEIGHTS_UNIFORM)
uniform mat4 u_m;
#elif defined(WEIGHTS_BLENDED)
uniform mat4 u_taps[TAPS];
uniform int u_c;
#else
layout(std140) uniform Weights { vec4 u_wv[SI * TAPS * 4]; };
#endif

layout(location = 0) out vec4 o0;
layout(location = 1) out vec4 o1;
layout(location = 2) out vec4 o2;
layout(location = 3) out vec4 o3;
layout(location = 4) out vec4 o4;
layout(location = 5) out vec4 o5;
layout(location = 6) out vec4 o6;
layout(location = 7) out vec4 o7;

vec4 a0, a1, a2, a3, a4, a5, a6, a7;

vec4 fetch(int c, int y, int x) {
    bool inside = uint(x) < uint(W) && uint(y) < uint(H);
#ifdef INPUT_COMPUTED
    vec4 v = u_x * float(1 + (c * H + y) * W + x);
#else
    vec4 v = texelFetch(u_in, (c * H + clamp(y, 0, H - 1)) * W + clamp(x, 0, W - 1));
#endif
    return inside ? v : vec4(0.0);
}

mat4 weights(int so, int c, int t) {
#if defined(WEIGHTS_FETCHED) || defined(INPUT_COMPUTED) || defined(PAIRED)
    int i = ((so * SI + c) * TAPS + t) * 4;
    return mat4(texelFetch(u_w, i), texelFetch(u_w, i + 1), texelFetch(u_w, i + 2),
                texelFetch(u_w, i + 3));
#elif defined(WEIGHTS_UNIFORM)
    return u_m;
#elif defined(WEIGHTS_BLENDED)
    return u_taps[t];
#else
    int i = (c * TAPS + t) * 4;
    return mat4(u_wv[i], u_wv[i + 1], u_wv[i + 2], u_wv[i + 3]);
#endif
}

// The 8 pixels' multiply-adds of tap (ky, kx): pixel j reads column j + kx of row r.
#define TAP(r, ky, kx) { mat4 w = weights(so, c, K * ky + kx); \
    a0 += w * r[kx]; a1 += w * r[kx + 1]; a2 += w * r[kx + 2]; \
    a3 += w * r[kx + 3]; a4 += w * r[kx + 4]; a5 += w * r[kx + 5]; \
    a6 += w * r[kx + 6]; a7 += w * r[kx + 7]; }

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
#if defined(WEIGHTS_GATHERED) || defined(WEIGHTS_BLENDED)
    int so = 0;  // the bound range of the block is this slice's
#else
    int so = p.x / TW;
#endif
    int x0 = (p.x % TW) * PIXELS, y = p.y;
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = vec4(0.0);
#ifdef WEIGHTS_BLENDED
    { int c = u_c;
#else
    for (int c = 0; c < SI; ++c) {
#endif
#if K == 3
        vec4 r0_[10], r1_[10], r2_[10];
        for (int m = 0; m < 10; ++m) {
            r0_[m] = fetch(c, y - 1, x0 + m - 1);
            r1_[m] = fetch(c, y, x0 + m - 1);
            r2_[m] = fetch(c, y + 1, x0 + m - 1);
        }
        TAP(r0_, 0, 0) TAP(r0_, 0, 1) TAP(r0_, 0, 2)
        TAP(r1_, 1, 0) TAP(r1_, 1, 1) TAP(r1_, 1, 2)
        TAP(r2_, 2, 0) TAP(r2_, 2, 1) TAP(r2_, 2, 2)
#elif defined(PAIRED)
        vec4 r_[4];
        for (int m = 0; m < 4; ++m) r_[m] = fetch(c, y, x0 + m);
        mat4 w = weights(2 * so, c, 0), v = weights(2 * so + 1, c, 0);
        a0 += w * r_[0]; a1 += w * r_[1]; a2 += w * r_[2]; a3 += w * r_[3];
        a4 += v * r_[0]; a5 += v * r_[1]; a6 += v * r_[2]; a7 += v * r_[3];
#else
        vec4 r_[8];
        for (int m = 0; m < 8; ++m) r_[m] = fetch(c, y, x0 + m);
        TAP(r_, 0, 0)
#endif
    }
    o0 = a0; o1 = a1; o2 = a2; o3 = a3; o4 = a4; o5 = a5; o6 = a6; o7 = a7;
}
