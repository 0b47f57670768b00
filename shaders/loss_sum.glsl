// loss_sum.glsl - one sample's share of a mean-reduced loss (glcnn/train/grad_ops.py,
// LossSum): the sum of its terms over rows u_rows.x .. u_rows.x + u_rows.y - 1 of the atlas of
// y, times u_scale, in R of the one output texel. Texels past the tensor are zero in y and the
// target, and every loss term is zero there.
// Defines: one of LOSS_MSE, LOSS_L1, LOSS_BCE (BCE clamps its logs at -100, as PyTorch).
// Uniforms: u_input_shape, u_target_shape, u_scale, u_rows.
// Samplers: u_input (y), u_target.

#if defined(LOSS_MSE) + defined(LOSS_L1) + defined(LOSS_BCE) != 1
#error loss_sum.glsl needs exactly one of LOSS_MSE, LOSS_L1, LOSS_BCE
#endif

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
uniform sampler2D u_target;
uniform ivec4 u_target_shape;
uniform float u_scale;
uniform ivec2 u_rows;

// max(log(v), -100) with log(0) = -inf clamped too (GLSL's log(0) is undefined).
vec4 clamped_log(vec4 v) {
    return mix(vec4(-100.0), max(log(max(v, 1e-38)), -100.0), greaterThan(v, vec4(0.0)));
}

vec4 term(vec4 v, vec4 t) {
#if defined(LOSS_MSE)
    return (v - t) * (v - t);
#elif defined(LOSS_L1)
    return abs(v - t);
#else
    return -(t * clamped_log(v) + (1.0 - t) * clamped_log(1.0 - v));
#endif
}

vec4 compute(int slice, int y, int x) {
    int width = grid_cols(u_input_shape) * u_input_shape.z;
    vec2 inv_input = 1.0 / vec2(textureSize(u_input, 0));
    vec2 inv_target = 1.0 / vec2(textureSize(u_target, 0));
    vec4 acc = vec4(0.0);
    for (int r = 0; r < u_rows.y; ++r) {
        for (int b = 0; b < width; ++b) {
            ivec2 p = ivec2(b, u_rows.x + r);
            acc += term(sample_texel(u_input, inv_input, p), sample_texel(u_target, inv_target, p));
        }
    }
    return vec4(dot(acc, vec4(1.0)) * u_scale, 0.0, 0.0, 0.0);
}
