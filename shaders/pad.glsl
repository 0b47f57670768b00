// pad.glsl - ONNX Pad on H and W: y[c, oy, ox] = x'[c, m(oy - top, H'), m(ox - left, W')]
// where x' is the input after the crop of the negative pads (origin u_crop, size u_extent)
// and m maps a row/column outside [0, n) back inside by the mode:
//   CONSTANT: none, y = u_value there;  EDGE: clamp;
//   REFLECT: mirror about the edge without repeating it (pads < n, checked in pad.py);
//   SYMMETRIC: mirror repeating the edge (TF's MirrorPad SYMMETRIC; pads <= n);
//   WRAP: periodic.
// With CHANNEL_PAD (CONSTANT only) output channel c is input channel c - u_channel_pad, or
// u_value where that is outside [0, C) (lanes read channel by channel).
// Defines: CONSTANT | EDGE | REFLECT | SYMMETRIC | WRAP; CHANNEL_PAD.
// Uniforms: u_input_shape, u_pad (left, top) >= 0, u_crop (x, y) >= 0, u_extent (W', H'),
//           u_value (CONSTANT), u_channel_pad (CHANNEL_PAD: channels added in front).
// Samplers: u_input.

#if defined(CONSTANT) + defined(EDGE) + defined(REFLECT) + defined(SYMMETRIC) + defined(WRAP) != 1
#error pad.glsl needs exactly one of CONSTANT, EDGE, REFLECT, SYMMETRIC and WRAP
#endif

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
uniform ivec2 u_pad;
uniform ivec2 u_crop;
uniform ivec2 u_extent;
uniform float u_value;
#ifdef CHANNEL_PAD
uniform int u_channel_pad;
#endif

ivec2 source(ivec2 i, ivec2 n) {
#if defined(EDGE)
    return clamp(i, ivec2(0), n - 1);
#elif defined(REFLECT)
    i = abs(i);                        // before the start: -i
    return min(i, 2 * (n - 1) - i);    // past the end: 2(n - 1) - i
#elif defined(SYMMETRIC)
    i = max(i, -i - 1);                // before the start: -i - 1
    return min(i, 2 * n - 1 - i);      // past the end: 2n - 1 - i
#elif defined(WRAP)
    return (i + n * (abs(i) / n + 1)) % n;  // % is undefined for negative operands
#else
    return i;
#endif
}

vec4 compute(int slice, int oy, int ox) {
    ivec2 i = ivec2(ox, oy) - u_pad;
#ifdef CONSTANT
    if (any(lessThan(i, ivec2(0))) || any(greaterThanEqual(i, u_extent))) {
        return vec4(u_value);
    }
#endif
    ivec2 p = u_crop + source(i, u_extent);
#ifdef CHANNEL_PAD
    ivec4 c = 4 * slice + ivec4(0, 1, 2, 3) - u_channel_pad;  // input channel of each lane
    vec4 v = vec4(u_value);
    for (int k = 0; k < 4; ++k) {
        if (c[k] >= 0 && c[k] < u_input_shape.x) {
            v[k] = fetch_channel(u_input, u_input_shape, c[k], p.y, p.x);
        }
    }
    return v;
#else
    return fetch(u_input, u_input_shape, slice, p.y, p.x);
#endif
}
