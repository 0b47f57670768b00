// layernorm.glsl - LayerNormalization over one axis (glcnn/ops/layernorm.py):
//   y = (x - mu) / sqrt(var + eps) * scale + bias, mu and var (population) along the axis.
// OVER_C: a pixel's channels (lanes past C masked); OVER_H / OVER_W: each lane (channel)
// along its own column / row. The mean is found first, then the variance as the mean of
// squared deviations.
// Defines: OVER_C | OVER_H | OVER_W.
// Uniforms: u_input_shape, u_epsilon.
// Samplers: u_input, u_params (OVER_C: layout.pack_channels rows scale, bias; OVER_H /
//           OVER_W: the atlas of a (2, L, 1) / (2, 1, L) tensor, channel 0 scale, 1 bias).

#if defined(OVER_C) + defined(OVER_H) + defined(OVER_W) != 1
#error layernorm.glsl needs exactly one of OVER_C, OVER_H and OVER_W
#endif

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
uniform sampler2D u_params;
uniform float u_epsilon;

const float FLT_MIN = 1.17549435e-38;

#ifdef OVER_C
vec4 real_lanes(int t) {
    return vec4(lessThan(4 * t + ivec4(0, 1, 2, 3), ivec4(u_input_shape.x)));
}

vec4 compute(int slice, int y, int x) {
    int slices = (u_input_shape.x + 3) / 4;
    float n = float(u_input_shape.x);
    vec4 sum = vec4(0.0);
    for (int t = 0; t < slices; ++t) {
        sum += fetch(u_input, u_input_shape, t, y, x) * real_lanes(t);
    }
    float mu = dot(sum, vec4(1.0)) / n;
    vec4 squares = vec4(0.0);
    for (int t = 0; t < slices; ++t) {
        vec4 d = (fetch(u_input, u_input_shape, t, y, x) - mu) * real_lanes(t);
        squares += d * d;
    }
    float var = dot(squares, vec4(1.0)) / n;
    vec4 v = (fetch(u_input, u_input_shape, slice, y, x) - mu)
           * inversesqrt(max(var + u_epsilon, FLT_MIN));
    return v * channel_params(u_params, slice, 0) + channel_params(u_params, slice, 1);
}

#else
#include "line_walk.glsl"

vec4 compute(int slice, int y, int x) {
    ivec2 p = line_start(y, x);
    int len = line_length(u_input_shape);
    vec4 sum = vec4(0.0);
    for (int i = 0; i < len; ++i) {
        ivec2 q = p + i * STEP;
        sum += fetch(u_input, u_input_shape, slice, q.y, q.x);
    }
    vec4 mu = sum / float(len);
    vec4 squares = vec4(0.0);
    for (int i = 0; i < len; ++i) {
        ivec2 q = p + i * STEP;
        vec4 d = fetch(u_input, u_input_shape, slice, q.y, q.x) - mu;
        squares += d * d;
    }
    vec4 var = squares / float(len);
    vec4 v = (fetch(u_input, u_input_shape, slice, y, x) - mu)
           * inversesqrt(max(var + u_epsilon, FLT_MIN));
    int i = STEP.x * x + STEP.y * y;
    ivec4 params_shape = ivec4(2, 1 + STEP.y * (len - 1), 1 + STEP.x * (len - 1), 1);
    vec2 affine = fetch(u_params, params_shape, 0, STEP.y * i, STEP.x * i).xy;
    return v * affine.x + affine.y;
}
#endif
