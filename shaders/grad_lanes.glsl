// grad_lanes.glsl - a weight gradient read from the render targets of a lane-blocked weight
// gradient pass (conv_grad_weight.glsl LANE_BLOCK) as if from the forward conv's filter layout:
// texel (c*kw + kx, y) is input channel c = 4q + j's gradient at kernel column kx, which the
// pass wrote to layer j (first column of its pair) or 4 + j (second) of texel (q*P + i, y),
// i the pair (ConvGradWeight.tap_pairs); padding columns (c >= Cg) are zero. Included by
// optim_sgd.glsl / optim_adam.glsl (LANE_GRAD) and conv_grad_weight_lanes.glsl.
// Uniforms: u_kernel (kw, kh), u_groups (Cg, ...), u_pairs (m, P).
// Samplers: u_grad, the texture array the gradient pass drew into.

uniform sampler2DArray u_grad;
uniform ivec2 u_kernel;
uniform ivec4 u_groups;
uniform ivec2 u_pairs;

// n / d for 0 <= n < 2^20, 1 <= d, in float arithmetic (llvmpipe scalarises integer division):
// (n + 0.5) / d lies at least 0.5 / d from an integer, far beyond the division's rounding.
int small_div(int n, int d) { return int((float(n) + 0.5) / float(d)); }

vec4 lane_gradient(ivec2 p) {
    int c = small_div(p.x, u_kernel.x);
    int kx = p.x - c * u_kernel.x;
    int q = c >> 2;
    int m = u_pairs.x;
    int second = small_div(kx, m) & 1;  // kx is the second column of its pair
    int first = kx - second * m;
    int i = small_div(first, 2 * m) * m + first - small_div(first, m) * m;
    // A NEAREST sample at the texel centre (common.glsl sample_texel): texelFetch's value.
    vec2 at = (vec2(q * u_pairs.y + i, p.y) + 0.5) / vec2(textureSize(u_grad, 0).xy);
    return c < u_groups.x ? textureLod(u_grad, vec3(at, float(4 * second + c - 4 * q)), 0.0)
                          : vec4(0.0);
}
