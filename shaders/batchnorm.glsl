// batchnorm.glsl - BatchNormalization in inference form: y = x * a + b per channel, where
// a = scale / sqrt(var + eps) and b = B - mean * a (precomputed by glcnn/ops/batchnorm.py).
// Uniforms: u_input_shape.  Samplers: u_input, u_params (row 0: a, row 1: b).

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
uniform sampler2D u_params;

vec4 compute(int slice, int y, int x) {
    vec4 v = fetch(u_input, u_input_shape, slice, y, x);
    return v * channel_params(u_params, slice, 0) + channel_params(u_params, slice, 1);
}
