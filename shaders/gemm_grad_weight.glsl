// gemm_grad_weight.glsl - dL/dW of a Gemm y = W x + b (glcnn/train/grad_ops.py,
// GemmGradWeight): dW[n, k] = dY[n] * x[k], written in the Gemm's weight layout
// (layout.pack_matrix): texel (k mod row, s*R + k div row) = dW[4s .. 4s+3, k]; zero for the
// padding k >= K. One sample's share: the trainer adds a batch's by blending.
// Uniforms: u_input_shape (x: (K, 1, 1)), u_grad_shape (dY: (N, 1, 1)), u_row (texels per
//           row), u_slice_rows (R, rows per output slice).
// Samplers: u_input (x), u_grad (dY).

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
uniform sampler2D u_grad;
uniform ivec4 u_grad_shape;
uniform int u_row;
uniform int u_slice_rows;

vec4 compute(int slice, int y, int x) {
    int s = y / u_slice_rows;
    int k = (y - s * u_slice_rows) * u_row + x;
    if (k >= u_input_shape.x) return vec4(0.0);
    return fetch(u_grad, u_grad_shape, s, 0, 0) * fetch_channel(u_input, u_input_shape, k, 0, 0);
}
