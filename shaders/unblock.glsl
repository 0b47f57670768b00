// unblock.glsl - copy the render targets of a spatially blocked pass (common.glsl, "Spatial
// blocking") back into the ordinary atlas of its output; values are copied as stored (already
// encoded), so this pass is exact in every storage precision.
// Defines: CUSTOM_MAIN; BLOCK_X, BLOCK_Y, BLOCK_STEP as in the blocked pass.
// Uniforms: u_out (output shape), u_block (band rows, tile columns, grid columns, pitch) and
//           u_bands (bands per tile, tile rows) of the blocked tensor.
// Samplers: u_block0 .. u_block<BLOCK - 1>, render target j of the blocked pass.

#define BLOCK (BLOCK_X * BLOCK_Y)
uniform ivec4 u_block;
uniform ivec2 u_bands;
uniform sampler2D u_block0;
#if BLOCK > 1
uniform sampler2D u_block1;
#endif
#if BLOCK > 2
uniform sampler2D u_block2;
uniform sampler2D u_block3;
#endif
#if BLOCK > 4
uniform sampler2D u_block4;
uniform sampler2D u_block5;
#endif
#if BLOCK > 6
uniform sampler2D u_block6;
uniform sampler2D u_block7;
#endif

// Texel p of render target j (GLSL 3.30 indexes sampler arrays by constants only), sampled at
// its centre like sample_texel (NEAREST, no mipmaps): 1.3x faster than texelFetch on llvmpipe.
vec4 block_texel(int j, ivec2 p) {
    vec2 at = (vec2(p) + 0.5) / vec2(textureSize(u_block0, 0));
    switch (j) {
#if BLOCK > 1
    case 1: return textureLod(u_block1, at, 0.0);
#endif
#if BLOCK > 2
    case 2: return textureLod(u_block2, at, 0.0);
    case 3: return textureLod(u_block3, at, 0.0);
#endif
#if BLOCK > 4
    case 4: return textureLod(u_block4, at, 0.0);
    case 5: return textureLod(u_block5, at, 0.0);
#endif
#if BLOCK > 6
    case 6: return textureLod(u_block6, at, 0.0);
    case 7: return textureLod(u_block7, at, 0.0);
#endif
    default: return textureLod(u_block0, at, 0.0);
    }
}

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
    int cell = slice * u_bands.x + band;
    int row = div_floor(cell, u_block.z);  // of the blocked grid
    ivec2 origin = ivec2(cell - row * u_block.z, row) * ivec2(u_block.w, u_block.x);
    blocked.y -= band * u_block.x;
    frag_color = block_texel(jj.y * BLOCK_X + jj.x, origin + blocked);
}
