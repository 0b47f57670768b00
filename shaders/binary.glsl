// binary.glsl - elementwise Add / Mul of the input and a second operand.
// Defines: OP_ADD | OP_MUL; OTHER_TENSOR (same shape), OTHER_CHANNEL ((C,1,1) tensor),
//          OTHER_CONSTANT (per-channel constant in u_params row 0).
// Uniforms: u_input_shape, u_other_shape.  Samplers: u_input, u_other | u_params.

#if defined(OP_ADD) == defined(OP_MUL)
#error binary.glsl needs exactly one of OP_ADD and OP_MUL
#endif
#if defined(OTHER_TENSOR) + defined(OTHER_CHANNEL) + defined(OTHER_CONSTANT) != 1
#error binary.glsl needs exactly one of OTHER_TENSOR, OTHER_CHANNEL and OTHER_CONSTANT
#endif

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
#if defined(OTHER_CONSTANT)
uniform sampler2D u_params;
#else
uniform sampler2D u_other;
uniform ivec4 u_other_shape;
#endif

vec4 other(int slice, int y, int x) {
#if defined(OTHER_TENSOR)
    return fetch(u_other, u_other_shape, slice, y, x);
#elif defined(OTHER_CHANNEL)
    return fetch(u_other, u_other_shape, slice, 0, 0);
#else
    return channel_params(u_params, slice, 0);
#endif
}

vec4 compute(int slice, int y, int x) {
    vec4 a = fetch(u_input, u_input_shape, slice, y, x);
#if defined(OP_ADD)
    return a + other(slice, y, x);
#else
    return a * other(slice, y, x);
#endif
}
