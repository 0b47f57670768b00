// conv_grad_bias.glsl - dL/dB of a conv (glcnn/train/grad_ops.py): output texel s (a
// layout.pack_channels row) sums dZ over rows u_rows.x .. u_rows.x + u_rows.y - 1 of slice s.
// Uniforms: u_grad_shape, u_rows (first row, rows).
// Samplers: u_grad (dZ).

uniform sampler2D u_grad;
uniform ivec4 u_grad_shape;
uniform ivec2 u_rows;

vec4 compute(int slice, int y, int x) {
    vec4 acc = vec4(0.0);
    for (int r = 0; r < u_rows.y; ++r) {
        for (int b = 0; b < u_grad_shape.z; ++b) {
            acc += fetch(u_grad, u_grad_shape, x, u_rows.x + r, b);
        }
    }
    return acc;
}
