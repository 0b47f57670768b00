// softmax.glsl - Softmax along one axis (glcnn/ops/softmax.py):
//   y = exp(x - M) / S,  M = max over the line,  S = sum over the line of exp(x - M).
// Over channels (no OVER_* define) every output texel reads all ceil(C/4) slices of its pixel
// twice (for M, then S); over H or W (OVER_H, OVER_W) each lane is its own channel and walks
// its column or row twice. With long lines SoftmaxStats writes (M, S) once per line and
// SoftmaxApply reads it. A (C, 1, 1) classifier vector is the channel case with H = W = 1.
// Defines: OVER_H | OVER_W (else channels); STATS (write M and S: channels 0, 1 of a
//          (2, H, W) output over channels, else index 0 and 1 along the axis);
//          STATS_INPUT (read M and S from u_stats instead of computing them).
// Uniforms: u_input_shape, u_stats_shape (STATS_INPUT).
// Samplers: u_input, u_stats (STATS_INPUT).

#if defined(STATS) && defined(STATS_INPUT)
#error STATS and STATS_INPUT exclude each other
#endif
#if defined(OVER_H) && defined(OVER_W)
#error softmax.glsl takes one axis: OVER_H or OVER_W
#endif

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
#ifdef STATS_INPUT
uniform sampler2D u_stats;
uniform ivec4 u_stats_shape;
#endif

#if defined(OVER_H) || defined(OVER_W)
#include "line_walk.glsl"

// (M, S) of the 4 lanes of `slice` along the line through pixel (y, x).
mat2x4 stats(int slice, int y, int x) {
    ivec2 p = line_start(y, x);
    int n = line_length(u_input_shape);
    vec4 m = fetch(u_input, u_input_shape, slice, p.y, p.x);
    for (int i = 1; i < n; ++i) {
        ivec2 q = p + i * STEP;
        m = max(m, fetch(u_input, u_input_shape, slice, q.y, q.x));
    }
    vec4 s = vec4(0.0);
    for (int i = 0; i < n; ++i) {
        ivec2 q = p + i * STEP;
        s += exp(fetch(u_input, u_input_shape, slice, q.y, q.x) - m);
    }
    return mat2x4(m, s);
}

vec4 compute(int slice, int y, int x) {
    int index = STEP.x * x + STEP.y * y;  // position along the line
#  if defined(STATS)
    return stats(slice, y, x)[index];
#  else
#    if defined(STATS_INPUT)
    ivec2 p = line_start(y, x);
    mat2x4 s = mat2x4(fetch(u_stats, u_stats_shape, slice, p.y, p.x),
                      fetch(u_stats, u_stats_shape, slice, p.y + STEP.y, p.x + STEP.x));
#    else
    mat2x4 s = stats(slice, y, x);
#    endif
    return exp(fetch(u_input, u_input_shape, slice, y, x) - s[0]) / s[1];
#  endif
}

#else
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
#  if defined(STATS)
    return vec4(stats(y, x), 0.0, 0.0);
#  else
#    if defined(STATS_INPUT)
    vec2 s = fetch(u_stats, u_stats_shape, 0, y, x).xy;
#    else
    vec2 s = stats(y, x);
#    endif
    return exp(fetch(u_input, u_input_shape, slice, y, x) - s.x) / s.y;
#  endif
}
#endif
