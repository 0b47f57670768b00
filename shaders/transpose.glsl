// transpose.glsl - Transpose of (C, H, W) by any permutation: y[o0, o1, o2] = x[i0, i1, i2],
// the input coordinates picked from the output's (channel, y, x) (glcnn/ops/transpose.py).
// Defines: IN_C, IN_H, IN_W, each 0, 1 or 2 (all different): the output coordinate
//          (0 = channel, 1 = y, 2 = x) that indexes the input's channel, row and column.
// Uniforms: u_input_shape.  Samplers: u_input.

#if !defined(IN_C) || !defined(IN_H) || !defined(IN_W)
#error transpose.glsl needs IN_C, IN_H and IN_W
#elif IN_C < 0 || IN_C > 2 || IN_H < 0 || IN_H > 2 || IN_W < 0 || IN_W > 2 || IN_C == IN_H || IN_C == IN_W || IN_H == IN_W
#error transpose.glsl needs IN_C, IN_H and IN_W to be a permutation of 0, 1, 2
#endif

uniform sampler2D u_input;
uniform ivec4 u_input_shape;

// Output coordinate k of (c, y, x); k is a define, so this folds away.
int pick(int k, int c, int y, int x) { return k == 0 ? c : (k == 1 ? y : x); }

vec4 compute(int slice, int y, int x) {
#if IN_C == 0
    // Channels stay channels: one texel holds the output's 4 lanes.
    return fetch(u_input, u_input_shape, slice, pick(IN_H, 0, y, x), pick(IN_W, 0, y, x));
#else
    vec4 v;
    for (int lane = 0; lane < 4; ++lane) {
        int c = 4 * slice + lane;
        v[lane] = c < u_out.x ? fetch_channel(u_input, u_input_shape, pick(IN_C, c, y, x),
                                              pick(IN_H, c, y, x), pick(IN_W, c, y, x)) : 0.0;
    }
    return v;
#endif
}
