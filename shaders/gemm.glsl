// gemm.glsl - a dense layer on a vector (glcnn/ops/gemm.py, Gemm and MatMul):
//   y[n] = sum_k x[k] * W[n, k] + b[n]   (W = alpha * B', b = beta * C, folded on the CPU)
// x is a (K, 1, 1) tensor: input slice t holds x[4t .. 4t+3]. Each output texel (outputs
// 4s .. 4s+3) walks its R weight rows; one vec4 of x feeds a mat4 of 4 weight texels, and
// each row is summed on its own before adding (a two-level sum for K up to ~50k).
// Defines: none.
// Uniforms: u_input_shape, u_row (texels per weight row, a multiple of 4), u_rows (R).
// Samplers: u_input, u_weights (layout.pack_matrix: texel (k mod row, s*R + k div row)
//           = W[4s .. 4s+3, k]), u_params (row 0: b).

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
uniform sampler2D u_weights;
uniform sampler2D u_params;
uniform int u_row;
uniform int u_rows;

// Weights of inputs 4i .. 4i+3 of texture row `ty` (one column per input).
mat4 weights(int i, int ty) {
    return mat4(texelFetch(u_weights, ivec2(4 * i, ty), 0),
                texelFetch(u_weights, ivec2(4 * i + 1, ty), 0),
                texelFetch(u_weights, ivec2(4 * i + 2, ty), 0),
                texelFetch(u_weights, ivec2(4 * i + 3, ty), 0));
}

vec4 compute(int slice, int y, int x) {
    int input_slices = (u_input_shape.x + 3) / 4;
    int per_row = u_row / 4;
    vec4 acc = channel_params(u_params, slice, 0);
    for (int r = 0; r < u_rows; ++r) {
        int first = r * per_row;
        int count = min(per_row, input_slices - first);
        vec4 part = vec4(0.0);
        for (int i = 0; i < count; ++i) {
            part += weights(i, slice * u_rows + r) * fetch(u_input, u_input_shape, first + i, 0, 0);
        }
        acc += part;
    }
    return acc;
}
