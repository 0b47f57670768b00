// buffer_probe.glsl - reads four texels of a buffer texture of u_texels texels, so that
// glcnn.context.Context can check the driver honours its GL_MAX_TEXTURE_BUFFER_SIZE: fragment
// x of a 4x1 target fetches texel 0, u_texels / 2 - 1, u_texels / 2 or u_texels - 1. A driver
// that wraps indices past a smaller size of its own (Mesa softpipe: 512 KiB, i.e. 32768
// RGBA32F texels, while it reports 65536) returns another texel's value for the last ones.
// Defines: CUSTOM_MAIN. Uniforms: u_texels. Samplers: u_probe (samplerBuffer, RGBA32F).

#ifndef CUSTOM_MAIN
#error buffer_probe.glsl needs CUSTOM_MAIN (it has its own main())
#endif

uniform samplerBuffer u_probe;
uniform int u_texels;

void main() {
    int x = int(gl_FragCoord.x);
    int index = x == 0 ? 0 : x == 1 ? u_texels / 2 - 1 : x == 2 ? u_texels / 2 : u_texels - 1;
    frag_color = texelFetch(u_probe, index);
}
