// unblock.glsl - copy the render targets of a spatially blocked pass (common.glsl, "Spatial
// blocking") back into the ordinary atlas of its output; values are copied as stored (already
// encoded), so this pass is exact in every storage precision.
// Defines: CUSTOM_MAIN; BLOCK_X, BLOCK_Y, BLOCK_STEP as in the blocked pass.
// Uniforms: u_out (output shape), u_block (band rows, tile columns, grid columns, pitch) and
//           u_bands (bands per tile, tile rows, cells per group) of the blocked tensor.
// Samplers: u_blocks, a texture array whose layer j is render target j of the blocked pass
//           (Context.layer_framebuffer): one fetch whatever the target, where separate
//           textures would need a switch that a SIMD rasteriser runs in full for every lane.

#ifndef CUSTOM_MAIN
#error unblock.glsl needs CUSTOM_MAIN (it has its own main())
#endif
#if !defined(BLOCK_X) || !defined(BLOCK_Y) || !defined(BLOCK_STEP)
#error unblock.glsl needs BLOCK_X, BLOCK_Y and BLOCK_STEP
#endif

uniform ivec4 u_block;
uniform ivec3 u_bands;
uniform sampler2DArray u_blocks;

void main() {
    int slice;
    ivec2 q;  // output pixel (x, y)
    if (!output_texel(slice, q)) {
        frag_color = vec4(0.0);
        return;
    }
    ivec2 span = BLOCK_STEP * ivec2(BLOCK_X, BLOCK_Y);  // pixels covered by one block row/col
    ivec2 within = q % span;
    ivec2 jj = within / BLOCK_STEP;  // (jx, jy): which pixel of its block
    ivec2 blocked = q / span * BLOCK_STEP + within % BLOCK_STEP;
    int band = div_floor(blocked.y, u_block.x);
    ivec2 origin = cell_origin(band * ((u_out.x + 3) / 4) + slice, u_block, u_bands.z);
    blocked.y -= band * u_block.x;
    // Sampled at the texel centre like sample_texel (NEAREST, no mipmaps).
    vec2 at = (vec2(origin + blocked) + 0.5) / vec2(textureSize(u_blocks, 0).xy);
    frag_color = textureLod(u_blocks, vec3(at, float(jj.y * BLOCK_X + jj.x)), 0.0);
}
