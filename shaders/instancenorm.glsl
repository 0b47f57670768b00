// instancenorm.glsl - InstanceNormalization with shifted two-pass statistics:
//   d = x - x[c, 0, 0],  m = mean(d),  v = mean((d - m)^2),
//   y = (d - m) / sqrt(v + eps) * scale[c] + B[c]          (glcnn/ops/instancenorm.py)
// Without STATS_INPUT every texel computes m and v of its channel itself (two loops over
// the plane, rows summed on their own before adding); with STATS_INPUT they come from the
// reduction passes of glcnn.passes.expand_reductions (InstanceNormApply).
// Defines: STATS_INPUT.
// Uniforms: u_input_shape, u_epsilon, u_mean_shape and u_var_shape (STATS_INPUT).
// Samplers: u_input, u_params (row 0: scale, row 1: B), u_mean and u_var (STATS_INPUT:
//           (C, 1, 1) tensors holding m and v).

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
uniform sampler2D u_params;
uniform float u_epsilon;
#ifdef STATS_INPUT
uniform sampler2D u_mean;
uniform ivec4 u_mean_shape;
uniform sampler2D u_var;
uniform ivec4 u_var_shape;
#endif

// mean over the plane of (x - shift - center)^power, power 1 or 2.
vec4 plane_mean(int slice, vec4 shift, vec4 center, int power) {
    vec4 acc = vec4(0.0);
    for (int iy = 0; iy < u_input_shape.y; ++iy) {
        vec4 row = vec4(0.0);
        for (int ix = 0; ix < u_input_shape.z; ++ix) {
            vec4 d = fetch(u_input, u_input_shape, slice, iy, ix) - shift - center;
            row += power == 2 ? d * d : d;
        }
        acc += row;
    }
    return acc / float(u_input_shape.y * u_input_shape.z);
}

vec4 compute(int slice, int y, int x) {
    vec4 shift = fetch(u_input, u_input_shape, slice, 0, 0);
#ifdef STATS_INPUT
    vec4 m = fetch(u_mean, u_mean_shape, slice, 0, 0);
    vec4 v = fetch(u_var, u_var_shape, slice, 0, 0);
#else
    vec4 m = plane_mean(slice, shift, vec4(0.0), 1);
    vec4 v = plane_mean(slice, shift, m, 2);
#endif
    vec4 d = (fetch(u_input, u_input_shape, slice, y, x) - shift) - m;
    return d / sqrt(v + u_epsilon) * channel_params(u_params, slice, 0)
        + channel_params(u_params, slice, 1);
}
