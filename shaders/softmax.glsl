// softmax.glsl - Softmax over channels at each pixel (glcnn/ops/softmax.py):
//   y[c] = exp(x[c] - M) / sum_k exp(x[k] - M),  M = max_k x[k]  (no exp overflows).
// Every output texel reads all ceil(C/4) slices of its pixel twice: once for M, once for
// the sum. A (C, 1, 1) classifier vector is the case H = W = 1.
// Defines: none.
// Uniforms: u_input_shape.
// Samplers: u_input.

uniform sampler2D u_input;
uniform ivec4 u_input_shape;

// Slice t of pixel (y, x); lanes past C become -1e38 so they neither win the max nor add
// to the sum (exp underflows to 0).
vec4 logits(int t, int y, int x) {
    vec4 v = fetch(u_input, u_input_shape, t, y, x);
    return mix(vec4(-1e38), v, lessThan(4 * t + ivec4(0, 1, 2, 3), ivec4(u_input_shape.x)));
}

vec4 compute(int slice, int y, int x) {
    int slices = (u_input_shape.x + 3) / 4;
    vec4 top = logits(0, y, x);
    for (int t = 1; t < slices; ++t) {
        top = max(top, logits(t, y, x));
    }
    float m = max(max(top.x, top.y), max(top.z, top.w));
    vec4 sum = vec4(0.0);
    for (int t = 0; t < slices; ++t) {
        sum += exp(logits(t, y, x) - m);
    }
    return exp(fetch(u_input, u_input_shape, slice, y, x) - m) / dot(sum, vec4(1.0));
}
