// gemm_grad_input.glsl - dL/dx of a Gemm y = W x + b (glcnn/train/grad_ops.py, GemmGradInput):
//   dx[k] = sum_n W[n, k] * dY[n],
// reading W from the Gemm's own weight layout (layout.pack_matrix, the texture the optimiser
// updates): texel (k mod row, s*R + k div row) = W[4s .. 4s+3, k]. Output texel t holds
// dx[4t .. 4t+3]: 4 consecutive texels of one layout row (row is a multiple of 4), each dotted
// with dY's slice s.
// Uniforms: u_grad_shape (dY: (N, 1, 1)), u_weights_shape (the layout as a (4, S*R, row)
//           tensor), u_row, u_slice_rows (R).
// Samplers: u_grad (dY), u_weights (the layout).

uniform sampler2D u_grad;
uniform ivec4 u_grad_shape;
uniform sampler2D u_weights;
uniform ivec4 u_weights_shape;
uniform int u_row;
uniform int u_slice_rows;

vec4 compute(int slice, int y, int x) {
    int k = 4 * slice;
    int r = k / u_row;
    int column = k - r * u_row;
    int slices = (u_grad_shape.x + 3) / 4;
    vec4 acc = vec4(0.0);
    for (int s = 0; s < slices; ++s) {
        vec4 g = fetch(u_grad, u_grad_shape, s, 0, 0);
        int row = s * u_slice_rows + r;
        mat4 w = mat4(fetch(u_weights, u_weights_shape, 0, row, column),
                      fetch(u_weights, u_weights_shape, 0, row, column + 1),
                      fetch(u_weights, u_weights_shape, 0, row, column + 2),
                      fetch(u_weights, u_weights_shape, 0, row, column + 3));
        acc += g * w;  // row vector times matrix: lane j is dot(g, column j)
    }
    return acc;
}
