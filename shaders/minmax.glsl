// minmax.glsl - per-channel min and max of an activation atlas, in two parallel stages
// (display normalisation without CPU readback; glcnn/display.py).
// Stage ROWS: input (C, H, W) -> output (C, H, 2): x = 0 min, x = 1 max over each row.
// Stage COLS: input (C, H, 2) -> output (C, 1, 2): min of mins, max of maxes over rows.
// Defines: ROWS | COLS.  Uniforms: u_input_shape.  Samplers: u_input.

#if defined(ROWS) == defined(COLS)
#error minmax.glsl needs exactly one of ROWS and COLS
#endif

uniform sampler2D u_input;
uniform ivec4 u_input_shape;

vec4 compute(int slice, int y, int x) {
    bool want_max = x == 1;
    vec4 acc = vec4(want_max ? -3.4e38 : 3.4e38);
#if defined(ROWS)
    for (int i = 0; i < u_input_shape.z; ++i) {
        vec4 v = fetch(u_input, u_input_shape, slice, y, i);
#else
    for (int i = 0; i < u_input_shape.y; ++i) {
        vec4 v = fetch(u_input, u_input_shape, slice, i, x);
#endif
        acc = want_max ? max(acc, v) : min(acc, v);
    }
    return acc;
}
