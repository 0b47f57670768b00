// overlay.vert - the viewer's labels, bars and plot lines (glcnn/viewer/overlay.py), in
// window pixels, origin at the bottom left.
// u_lines = 0: one instance per quad (a glyph of the font atlas or a solid rectangle), its
//              4 corners from gl_VertexID as a triangle strip;
// u_lines = 1: one vertex per point of a line strip, at in_rect.xy.
// Attributes: in_rect (x, y, w, h), in_uv (atlas texels u0, v0, u1, v1, v down; u1 <= u0 for
//             a solid rectangle), in_color (RGBA). Uniforms: u_screen (window size).
uniform vec2 u_screen;
uniform int u_lines;
in vec4 in_rect;
in vec4 in_uv;
in vec4 in_color;
out vec2 v_uv;
flat out vec4 v_uv_rect;
out vec4 v_color;

void main() {
    vec2 corner = vec2(float(gl_VertexID & 1), float((gl_VertexID >> 1) & 1));
    vec2 pos = u_lines == 1 ? in_rect.xy : in_rect.xy + corner * in_rect.zw;
    v_uv = mix(in_uv.xw, in_uv.zy, corner);  // v runs down the atlas, y up the window
    v_uv_rect = in_uv;
    v_color = in_color;
    gl_Position = vec4(pos / u_screen * 2.0 - 1.0, 0.0, 1.0);
}
