// filter_transpose.glsl - a conv's filter layout (layout.pack_filters of its (Co, Cg, kh, kw)
// view) re-laid out for the conv computing its input gradient (glcnn/train/optim.py): the other
// kind of conv on the same weight array, whose (Co', Cg') view reads target (o', c') from
//     source o = (o' / A) * B + c',  c = o' % A
// (Conv -> ConvTranspose: A = Cg, B = Co / group; ConvTranspose -> Conv: A = Ci / group,
// B = Cog). Lanes past Co' and columns past Cg' (padding) are zero.
// Defines: CUSTOM_MAIN.
// Uniforms: u_map (A, B, Co', Cg'), u_kernel (kw, kh).
// Samplers: u_source (the forward layout).

#ifndef CUSTOM_MAIN
#error filter_transpose.glsl needs CUSTOM_MAIN (it has its own main())
#endif

uniform ivec4 u_map;
uniform ivec2 u_kernel;
#ifdef SOURCE_BUFFER
uniform samplerBuffer u_source;
uniform int u_source_width;
#else
uniform sampler2D u_source;
#endif

float source_weight(int target_o, int target_c, ivec2 tap) {
    if (target_o >= u_map.z || target_c >= u_map.w) return 0.0;
    int o = target_o / u_map.x * u_map.y + target_c;
    int c = target_o - target_o / u_map.x * u_map.x;
    ivec2 p = ivec2(c, o / 4) * u_kernel + tap;
#ifdef SOURCE_BUFFER
    return texelFetch(u_source, p.y * u_source_width + p.x)[o % 4];
#else
    return sample_texel(u_source, 1.0 / vec2(textureSize(u_source, 0)), p)[o % 4];
#endif
}

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    ivec2 cell = p / u_kernel;  // (input column c', output slice s')
    ivec2 tap = p - cell * u_kernel;
    int o = 4 * cell.y;
    frag_color = vec4(source_weight(o, cell.x, tap), source_weight(o + 1, cell.x, tap),
                      source_weight(o + 2, cell.x, tap), source_weight(o + 3, cell.x, tap));
}
