// filter_grid.glsl - a conv layer's filter bank as a square grid of kh x kw tiles, one per
// output channel, each normalised on its own (glcnn/viewer/filters.py). Built with CUSTOM_MAIN
// and one of:
//   MINMAX: one fragment per (x = 0 min | 1 max, y = output slice s) of a (2, S) texture:
//           the min or max of the 4 filters of slice s over the shown input channels'
//           taps (u_in_channel, and the next two with u_rgb = 1).
//   DRAW:   one fragment per window pixel of u_rect. The grid has cols = ceil(sqrt(Co))
//           columns; a 1-texel gutter surrounds every tile:
//              +-+-+-+-+-+      tile o (row o / cols, column o % cols) shows filter o:
//              | o0  | o1 |     RGB from input channels 0..2 (u_rgb = 1), else grey from
//              +-+-+-+-+-+      input channel u_in_channel, mapped from that filter's
//              | o2  |    |     (min, max) to 0..1 (0.5 where the filter is constant).
//              +-+-+-+-+-+
// Weights: layout.pack_filters: texel (c * kw + kx, s * kh + ky) holds w[4s..4s+3, c, ky, kx].
// Uniforms: u_filter (kh, kw, Cg, Co); u_rgb; u_in_channel (< Cg, + 2 < Cg with u_rgb);
//           DRAW: u_rect (x, y, w, h) in window pixels, u_cols (grid columns).
// Samplers: u_weights (the filter texture), DRAW: u_minmax (the MINMAX output).

#if !defined(CUSTOM_MAIN) || defined(MINMAX) == defined(DRAW)
#error filter_grid.glsl needs CUSTOM_MAIN and exactly one of MINMAX and DRAW
#endif

uniform sampler2D u_weights;
uniform ivec4 u_filter;
uniform int u_rgb;
uniform int u_in_channel;

vec4 tap(int c, int s, int ky, int kx) {
    return texelFetch(u_weights, ivec2(c * u_filter.y + kx, s * u_filter.x + ky), 0);
}

#ifdef MINMAX
void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    bool want_max = p.x == 1;
    vec4 acc = vec4(want_max ? -3.4e38 : 3.4e38);
    for (int c = u_in_channel; c < u_in_channel + (u_rgb == 1 ? 3 : 1); ++c)
        for (int ky = 0; ky < u_filter.x; ++ky)
            for (int kx = 0; kx < u_filter.y; ++kx) {
                vec4 v = tap(c, p.y, ky, kx);
                acc = want_max ? max(acc, v) : min(acc, v);
            }
    frag_color = acc;
}
#else
uniform vec4 u_rect;
uniform int u_cols;
uniform sampler2D u_minmax;

float unit(float v, float lo, float hi) {
    return hi - lo > 1e-20 ? clamp((v - lo) / (hi - lo), 0.0, 1.0) : 0.5;
}

void main() {
    ivec2 k = u_filter.yx;  // (kw, kh)
    int rows = (u_filter.w + u_cols - 1) / u_cols;
    ivec2 size = ivec2(u_cols, rows) * (k + 1) + 1;
    vec2 uv = (gl_FragCoord.xy - u_rect.xy) / u_rect.zw;
    ivec2 p = clamp(ivec2(vec2(uv.x, 1.0 - uv.y) * vec2(size)), ivec2(0), size - 1);
    ivec2 q = max(p - 1, ivec2(0));  // p = 0 is the outer gutter (no % of a negative)
    ivec2 tile = q / (k + 1), t = q % (k + 1);
    int o = tile.y * u_cols + tile.x;
    if (p.x == 0 || p.y == 0 || t.x == k.x || t.y == k.y || o >= u_filter.w) {
        frag_color = vec4(0.3, 0.3, 0.34, 1.0);  // the gutter, and the grid's unused tiles
        return;
    }
    int s = o / 4, lane = o % 4;
    float lo = texelFetch(u_minmax, ivec2(0, s), 0)[lane];
    float hi = texelFetch(u_minmax, ivec2(1, s), 0)[lane];
    int c = u_in_channel;
    vec3 color = u_rgb == 1
        ? vec3(unit(tap(c, s, t.y, t.x)[lane], lo, hi), unit(tap(c + 1, s, t.y, t.x)[lane], lo, hi),
               unit(tap(c + 2, s, t.y, t.x)[lane], lo, hi))
        : vec3(unit(tap(c, s, t.y, t.x)[lane], lo, hi));
    frag_color = vec4(color, 1.0);
}
#endif
