// matmul.glsl - batched matrix product (glcnn/ops/matmul.py):
//   y[b, m, n] = sum_k a[b, m, k] * B[b, k, n]
// Each operand's [batch, row, column] sit on the glcnn axes (0 = C, 1 = H, 2 = W) that
// u_a_axes, u_b_axes and u_out_axes name; a batch of size 1 broadcasts. The 4 lanes of an
// output texel are 4 consecutive values of the role (batch, m or n) on the output's channels;
// per k, each operand gives its 4 lanes as one texel (*_VECTOR: that role is on its channels
// too), 4 scalar fetches (*_GATHER: on another axis), or one scalar for all (neither: the
// operand does not depend on that role, or its batch is 1). Sums run in blocks of u_block.
// Defines: A_VECTOR | A_GATHER; B_VECTOR | B_GATHER; CONSTANT_B (b is u_weights, the
//          layout.pack_matrix of B^T: texel (k mod row, s*R + k div row) = B[k, 4s .. 4s+3]).
// Uniforms: u_input_shape, u_other_shape (tensor b), u_a_axes, u_b_axes, u_out_axes,
//           u_a_step, u_b_step (the unit vector of the lane role's axis in a, b; 0 if none),
//           u_dims = (batch of a, batch of b, K, 0), u_block (terms per partial sum: u_row
//           with CONSTANT_B), u_rows (R, CONSTANT_B).
// Samplers: u_input (a), u_other (b) | u_weights (CONSTANT_B).

#if defined(A_VECTOR) && defined(A_GATHER) || defined(B_VECTOR) && defined(B_GATHER)
#error matmul.glsl: an operand's lanes are a vector, a gather or a scalar
#endif
#if defined(CONSTANT_B) && defined(B_GATHER)
#error matmul.glsl: a constant B gives its lanes as a vector (n on the output's channels) or a scalar
#endif

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
#ifdef CONSTANT_B
uniform sampler2D u_weights;
uniform int u_rows;
#else
uniform sampler2D u_other;
uniform ivec4 u_other_shape;
#endif
uniform ivec3 u_a_axes;
uniform ivec3 u_b_axes;
uniform ivec3 u_out_axes;
uniform ivec3 u_a_step;
uniform ivec3 u_b_step;
uniform ivec4 u_dims;
uniform int u_block;

// The unit vector of glcnn axis `axis` (integer arithmetic only: no dynamic indexing, which
// llvmpipe turns into a chain of selects per access).
ivec3 unit(int axis) {
    return ivec3(equal(ivec3(axis), ivec3(0, 1, 2)));
}

int pick(ivec3 v, int axis) {
    ivec3 u = unit(axis);
    return v.x * u.x + v.y * u.y + v.z * u.z;
}

// Lanes of an operand at glcnn position p (lane 0), `step` apart; `slice` for a vector.
vec4 lanes(sampler2D t, ivec4 shape, ivec3 p, ivec3 step, int slice, bool vector, bool gather) {
    if (vector) {
        return fetch(t, shape, slice, p.y, p.z);
    }
    if (gather) {
        return vec4(fetch_channel(t, shape, p.x, p.y, p.z),
                    fetch_channel(t, shape, p.x + step.x, p.y + step.y, p.z + step.z),
                    fetch_channel(t, shape, p.x + 2 * step.x, p.y + 2 * step.y, p.z + 2 * step.z),
                    fetch_channel(t, shape, p.x + 3 * step.x, p.y + 3 * step.y, p.z + 3 * step.z));
    }
    return vec4(fetch_channel(t, shape, p.x, p.y, p.z));
}

#ifdef A_VECTOR
const bool A_VEC = true;
#else
const bool A_VEC = false;
#endif
#ifdef A_GATHER
const bool A_GAT = true;
#else
const bool A_GAT = false;
#endif
#ifdef B_VECTOR
const bool B_VEC = true;
#else
const bool B_VEC = false;
#endif
#ifdef B_GATHER
const bool B_GAT = true;
#else
const bool B_GAT = false;
#endif

vec4 compute(int slice, int y, int x) {
    ivec3 o = ivec3(4 * slice, y, x);
    int b = pick(o, u_out_axes.x);
    int m = pick(o, u_out_axes.y);
    int n = pick(o, u_out_axes.z);
    // a[b, m, k] = a at a0 + k * ak; likewise b.
    ivec3 a0 = (u_dims.x == 1 ? 0 : b) * unit(u_a_axes.x) + m * unit(u_a_axes.y);
    ivec3 ak = unit(u_a_axes.z);
#ifdef CONSTANT_B
    int column = B_VEC ? 0 : n - (n / 4) * 4;  // the lane holding B[k, n] (scalar form)
    int first_row = (B_VEC ? slice : n / 4) * u_rows;
#else
    ivec3 b0 = (u_dims.y == 1 ? 0 : b) * unit(u_b_axes.x) + n * unit(u_b_axes.z);
    ivec3 bk = unit(u_b_axes.y);
#endif
    vec4 acc = vec4(0.0);
    for (int first = 0, r = 0; first < u_dims.z; first += u_block, ++r) {
        vec4 part = vec4(0.0);
        for (int i = 0; i < min(u_block, u_dims.z - first); ++i) {
            int k = first + i;
            vec4 av = lanes(u_input, u_input_shape, a0 + k * ak, u_a_step, slice, A_VEC, A_GAT);
#ifdef CONSTANT_B
            vec4 w = texelFetch(u_weights, ivec2(i, first_row + r), 0);
            vec4 bv = B_VEC ? w : vec4(w[column]);
#else
            vec4 bv = lanes(u_other, u_other_shape, b0 + k * bk, u_b_step, slice, B_VEC, B_GAT);
#endif
            part += av * bv;
        }
        acc += part;
    }
    return acc;
}
