// unblock.glsl - copy the render targets of a spatially blocked pass (common.glsl, "Spatial
// blocking") back into the ordinary atlas of its output; values are copied as stored (already
// encoded), so this pass is exact in every storage precision.
// Defines: CUSTOM_MAIN; BLOCK_X, BLOCK_Y, BLOCK_STEP as in the blocked pass.
// Uniforms: u_out (output shape), u_block (tile rows, tile columns, grid columns, pitch) of
//           the blocked tensor.
// Samplers: u_block0 .. u_block<BLOCK - 1>, render target j of the blocked pass.

#define BLOCK (BLOCK_X * BLOCK_Y)
uniform ivec4 u_block;
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

// Texel p of render target j (GLSL 3.30 indexes sampler arrays by constants only).
vec4 block_texel(int j, ivec2 p) {
    switch (j) {
#if BLOCK > 1
    case 1: return texelFetch(u_block1, p, 0);
#endif
#if BLOCK > 2
    case 2: return texelFetch(u_block2, p, 0);
    case 3: return texelFetch(u_block3, p, 0);
#endif
#if BLOCK > 4
    case 4: return texelFetch(u_block4, p, 0);
    case 5: return texelFetch(u_block5, p, 0);
#endif
#if BLOCK > 6
    case 6: return texelFetch(u_block6, p, 0);
    case 7: return texelFetch(u_block7, p, 0);
#endif
    default: return texelFetch(u_block0, p, 0);
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
    ivec2 origin = ivec2(slice % u_block.z, slice / u_block.z) * ivec2(u_block.w, u_block.x);
    frag_color = block_texel(jj.y * BLOCK_X + jj.x, origin + blocked);
}
