// slice.glsl - spatial crop (ONNX Slice on H/W): y[c, oy, ox] = x[c, oy + y0, ox + x0].
// Uniforms: u_input_shape, u_origin (x0, y0).  Samplers: u_input.

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
uniform ivec2 u_origin;

vec4 compute(int slice, int y, int x) {
    return fetch(u_input, u_input_shape, slice, y + u_origin.y, x + u_origin.x);
}
