// overlay.glsl - fragment stage of overlay.vert (glcnn/viewer/overlay.py): a solid colour,
// or the colour times a glyph's coverage from the font atlas (R channel), one atlas texel per
// window pixel (quads are placed on whole pixels, so no filtering is involved).
// Built with CUSTOM_MAIN. Samplers: u_glyphs (the font atlas, R8).

#ifndef CUSTOM_MAIN
#error overlay.glsl needs CUSTOM_MAIN (it has its own main())
#endif

uniform sampler2D u_glyphs;
in vec2 v_uv;
flat in vec4 v_uv_rect;
in vec4 v_color;

void main() {
    float coverage = 1.0;
    if (v_uv_rect.z > v_uv_rect.x) {  // a glyph: clamp to its own cell, never past the atlas
        ivec2 lo = ivec2(v_uv_rect.xy), hi = ivec2(v_uv_rect.zw) - 1;
        coverage = texelFetch(u_glyphs, clamp(ivec2(floor(v_uv)), lo, hi), 0).r;
    }
    frag_color = vec4(v_color.rgb, v_color.a * coverage);
}
