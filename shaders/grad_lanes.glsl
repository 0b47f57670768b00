// grad_lanes.glsl - a weight gradient read from the render targets of a lane-blocked weight
// gradient pass (conv_grad_weight.glsl LANE_BLOCK) as if from the forward conv's filter layout:
// texel (c*kw + kx, y) is layer c % 4's texel ((c / 4)*kw + kx, y); padding columns (c >= Cg)
// are zero. Included by optim_sgd.glsl / optim_adam.glsl (LANE_GRAD) and
// conv_grad_weight_lanes.glsl.
// Uniforms: u_kernel (kw, kh), u_groups (Cg, ...).
// Samplers: u_grad, the texture array the gradient pass drew into.

uniform sampler2DArray u_grad;
uniform ivec2 u_kernel;
uniform ivec4 u_groups;

vec4 lane_gradient(ivec2 p) {
    int c = p.x / u_kernel.x;
    int q = c / 4;
    // A NEAREST sample at the texel centre (common.glsl sample_texel): texelFetch's value.
    vec2 at = (vec2(p.x + (q - c) * u_kernel.x, p.y) + 0.5) / vec2(textureSize(u_grad, 0).xy);
    return c < u_groups.x ? textureLod(u_grad, vec3(at, float(c - 4 * q)), 0.0) : vec4(0.0);
}
