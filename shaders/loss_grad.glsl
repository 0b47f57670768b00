// loss_grad.glsl - dL/dy of a mean-reduced loss with PyTorch's definitions
// (glcnn/train/grad_ops.py, LossGrad); u_scale = 1 / (batch * C*H*W).
// Defines: one of LOSS_MSE, LOSS_L1, LOSS_BCE.
// Uniforms: u_input_shape, u_target_shape, u_scale.
// Samplers: u_input (y), u_target.

#if defined(LOSS_MSE) + defined(LOSS_L1) + defined(LOSS_BCE) != 1
#error loss_grad.glsl needs exactly one of LOSS_MSE, LOSS_L1, LOSS_BCE
#endif

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
uniform sampler2D u_target;
uniform ivec4 u_target_shape;
uniform float u_scale;

vec4 compute(int slice, int y, int x) {
    vec4 v = fetch(u_input, u_input_shape, slice, y, x);
    vec4 t = fetch(u_target, u_target_shape, slice, y, x);
#if defined(LOSS_MSE)
    return 2.0 * (v - t) * u_scale;
#elif defined(LOSS_L1)
    return sign(v - t) * u_scale;
#else
    return (v - t) / max((1.0 - v) * v, 1e-12) * u_scale;  // PyTorch's EPSILON
#endif
}
