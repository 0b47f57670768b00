// activation.glsl - a standalone activation: reads x, and the shared epilogue in common.glsl
// applies the ACT_* function selected by define (the same code a fused conv uses).
// Uniforms: u_input_shape, u_act.  Samplers: u_input.

uniform sampler2D u_input;
uniform ivec4 u_input_shape;

vec4 compute(int slice, int y, int x) {
    return fetch(u_input, u_input_shape, slice, y, x);
}
