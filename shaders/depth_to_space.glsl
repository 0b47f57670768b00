// depth_to_space.glsl - ONNX DepthToSpace with block b, C' = C / (b*b) output channels:
//   y[c, h*b + i, w*b + j] = x[k, h, w],  k = (i*b + j)*C' + c  (DCR)  or  c*b*b + i*b + j  (CRD).
// Defines: DCR | CRD.
// Uniforms: u_input_shape, u_block (b); u_out (common.glsl) gives C'.
// Samplers: u_input.

#if defined(DCR) == defined(CRD)
#error depth_to_space.glsl needs exactly one of DCR and CRD
#endif

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
uniform int u_block;

vec4 compute(int slice, int oy, int ox) {
    ivec2 source = div_floor(ivec2(ox, oy), ivec2(u_block));  // (w, h)
    ivec2 offset = ivec2(ox, oy) - source * u_block;  // (j, i)
    int tap = offset.y * u_block + offset.x;
    ivec4 c = 4 * slice + ivec4(0, 1, 2, 3);
#ifdef DCR
    ivec4 k = tap * u_out.x + c;
#else
    ivec4 k = c * u_block * u_block + tap;
#endif
    // fetch_channel clamps lanes past C' into range; common.glsl zeroes them afterwards.
    return vec4(fetch_channel(u_input, u_input_shape, k.x, source.y, source.x),
                fetch_channel(u_input, u_input_shape, k.y, source.y, source.x),
                fetch_channel(u_input, u_input_shape, k.z, source.y, source.x),
                fetch_channel(u_input, u_input_shape, k.w, source.y, source.x));
}
