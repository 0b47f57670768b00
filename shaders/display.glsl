// display.glsl - draw a tensor or a weight texture into a window rectangle, normalised on
// the GPU (glcnn/display.py). Built with CUSTOM_MAIN: this shader writes screen pixels,
// not atlas texels.
// Modes (u_mode): 0 image (channels 0-2 as RGB, or channel 0 as grey if C < 3),
//                 1 mosaic (every channel a grey tile, grid of ceil(sqrt(C)) columns),
//                 2 one channel (u_channel) enlarged,
//                 3 filters (weight texture of layout.pack_filters: a grid of kh x kw tiles,
//                   one row per output channel, one column per input channel).
// Uniforms: u_rect (x, y, w, h) in window pixels; u_tex_shape (C, H, W, cols);
//           u_view (x, y, w, h) texels of the tensor shown in mode 0 (a crop, or all of it);
//           u_grid (columns, rows) of the mosaic; u_channel; u_filter (kh, kw, Cg, Co);
//           u_range (lo, hi) with u_fixed_range = 1, else per-channel min/max from u_minmax
//           (a (C, 1, 2) atlas from minmax.glsl); u_diverging: blue-white-red around 0.
// Samplers: u_tex, u_minmax.

#ifndef CUSTOM_MAIN
#error display.glsl needs CUSTOM_MAIN (it has its own main())
#endif

uniform sampler2D u_tex;
uniform ivec4 u_tex_shape;
uniform sampler2D u_minmax;
uniform ivec4 u_minmax_shape;
uniform vec4 u_rect;
uniform ivec4 u_view;
uniform int u_mode;
uniform ivec2 u_grid;
uniform int u_channel;
uniform ivec4 u_filter;
uniform vec2 u_range;
uniform int u_fixed_range;
uniform int u_diverging;

vec2 channel_range(int c) {
    if (u_fixed_range == 1) return u_range;
    if (u_mode == 3) {  // weights: one range over all four lanes
        vec4 lo = fetch(u_minmax, u_minmax_shape, 0, 0, 0);
        vec4 hi = fetch(u_minmax, u_minmax_shape, 0, 0, 1);
        return vec2(min(min(lo.x, lo.y), min(lo.z, lo.w)), max(max(hi.x, hi.y), max(hi.z, hi.w)));
    }
    return vec2(fetch(u_minmax, u_minmax_shape, c / 4, 0, 0)[c % 4],
                fetch(u_minmax, u_minmax_shape, c / 4, 0, 1)[c % 4]);
}

vec3 shade(float v, vec2 range) {
    if (u_diverging == 1) {
        float t = clamp(v / max(max(abs(range.x), abs(range.y)), 1e-20), -1.0, 1.0);
        return t < 0.0 ? mix(vec3(1.0), vec3(0.2, 0.3, 1.0), -t) : mix(vec3(1.0), vec3(1.0, 0.2, 0.1), t);
    }
    float span = range.y - range.x;
    return vec3(span > 1e-20 ? clamp((v - range.x) / span, 0.0, 1.0) : 0.5);
}

float channel_value(int c, int y, int x) {
    return fetch(u_tex, u_tex_shape, c / 4, y, x)[c % 4];
}

void main() {
    vec2 uv = (gl_FragCoord.xy - u_rect.xy) / u_rect.zw;
    uv.y = 1.0 - uv.y;  // tensor row 0 at the top of the rectangle
    int h = u_tex_shape.y, w = u_tex_shape.z;
    vec3 color;
    if (u_mode == 0) {
        ivec2 p = u_view.xy + min(ivec2(uv * vec2(u_view.zw)), u_view.zw - 1);
        vec2 r = channel_range(0);
        if (u_fixed_range == 0 && u_tex_shape.x >= 3)
            r = vec2(min(r.x, min(channel_range(1).x, channel_range(2).x)),
                     max(r.y, max(channel_range(1).y, channel_range(2).y)));
        vec4 v = fetch(u_tex, u_tex_shape, 0, p.y, p.x);
        color = u_tex_shape.x >= 3 ? vec3(shade(v.r, r).r, shade(v.g, r).r, shade(v.b, r).r)
                                   : shade(v.r, r);
    } else if (u_mode == 1 || u_mode == 2) {
        ivec2 grid = u_mode == 1 ? u_grid : ivec2(1);
        ivec2 p = ivec2(uv * vec2(grid * ivec2(w, h)));
        ivec2 tile = p / ivec2(w, h);
        int c = u_mode == 1 ? tile.y * grid.x + tile.x : u_channel;
        color = c < u_tex_shape.x ? shade(channel_value(c, p.y % h, p.x % w), channel_range(c))
                                  : vec3(0.08);
    } else {
        ivec2 p = ivec2(uv * vec2(u_grid * u_filter.yx));  // (x over Cg*kw, y over Co*kh)
        ivec2 tile = p / u_filter.yx;
        ivec2 tap = p % u_filter.yx;
        int o = tile.y;
        vec4 t = texelFetch(u_tex, ivec2(tile.x * u_filter.y + tap.x, (o / 4) * u_filter.x + tap.y), 0);
        color = shade(t[o % 4], channel_range(0));
    }
    frag_color = vec4(color, 1.0);
}
