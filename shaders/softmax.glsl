// softmax.glsl - Softmax over channels at each pixel (glcnn/ops/softmax.py):
//   y[c] = exp(x[c] - M) / S,  M = max_k x[k],  S = sum_k exp(x[k] - M)  (no exp overflows).
// In one pass every output texel reads all ceil(C/4) slices of its pixel twice (for M, then
// S); with many channels SoftmaxStats writes (M, S) once per pixel and SoftmaxApply reads it.
// A (C, 1, 1) classifier vector is the case H = W = 1.
// Defines: STATS (write vec4(M, S, 0, 0) to the (2, H, W) output);
//          STATS_INPUT (read M and S from u_stats instead of computing them).
// Uniforms: u_input_shape, u_stats_shape (STATS_INPUT).
// Samplers: u_input, u_stats (STATS_INPUT: channels 0 and 1 = M and S).

#if defined(STATS) && defined(STATS_INPUT)
#error STATS and STATS_INPUT exclude each other
#endif

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
#ifdef STATS_INPUT
uniform sampler2D u_stats;
uniform ivec4 u_stats_shape;
#endif

// Slice t of pixel (y, x); lanes past C become -1e38 so they neither win the max nor add
// to the sum (exp underflows to 0).
vec4 logits(int t, int y, int x) {
    vec4 v = fetch(u_input, u_input_shape, t, y, x);
    return mix(vec4(-1e38), v, lessThan(4 * t + ivec4(0, 1, 2, 3), ivec4(u_input_shape.x)));
}

// (M, S) of pixel (y, x).
vec2 stats(int y, int x) {
    int slices = (u_input_shape.x + 3) / 4;
    vec4 top = logits(0, y, x);
    for (int t = 1; t < slices; ++t) {
        top = max(top, logits(t, y, x));
    }
    float m = max(max(top.x, top.y), max(top.z, top.w));
    vec4 sum = vec4(0.0);
    for (int t = 0; t < slices; ++t) {
        sum += exp(logits(t, y, x) - m);
    }
    return vec2(m, dot(sum, vec4(1.0)));
}

vec4 compute(int slice, int y, int x) {
#if defined(STATS)
    return vec4(stats(y, x), 0.0, 0.0);
#else
#  if defined(STATS_INPUT)
    vec2 s = fetch(u_stats, u_stats_shape, 0, y, x).xy;
#  else
    vec2 s = stats(y, x);
#  endif
    return exp(fetch(u_input, u_input_shape, slice, y, x) - s.x) / s.y;
#endif
}
