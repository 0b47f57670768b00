// slice.glsl - ONNX Slice: y[c, oy, ox] = x[c0 + c, y0 + oy * sy, x0 + ox * sx], steps > 0.
// Defines: CHANNEL_OFFSET (c0 is not a multiple of 4: each lane reads its own input slice).
// Uniforms: u_input_shape, u_origin (x0, y0), u_step (sx, sy), u_channel0 (c0).
// Samplers: u_input.

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
uniform ivec2 u_origin;
uniform ivec2 u_step;
uniform int u_channel0;

vec4 compute(int slice, int y, int x) {
    ivec2 p = u_origin + ivec2(x, y) * u_step;
#if defined(CHANNEL_OFFSET)
    int c = u_channel0 + 4 * slice;
    return vec4(fetch_channel(u_input, u_input_shape, c, p.y, p.x),
                fetch_channel(u_input, u_input_shape, c + 1, p.y, p.x),
                fetch_channel(u_input, u_input_shape, c + 2, p.y, p.x),
                fetch_channel(u_input, u_input_shape, c + 3, p.y, p.x));
#else
    return fetch(u_input, u_input_shape, slice + u_channel0 / 4, p.y, p.x);
#endif
}
