// activation_grad.glsl - dZ = dY * f'(z) of an activation y = f(z), f' written in terms of
// the forward output y (glcnn/train/grad_ops.py, ActivationGrad), as PyTorch's backward does:
// activation_derivative.glsl (spliced in with common.glsl).
// Defines: one of GRAD_RELU, GRAD_LEAKYRELU, GRAD_SIGMOID, GRAD_TANH, GRAD_ELU.
// Uniforms: u_grad_shape, u_input_shape, u_grad_alpha (LeakyRelu, Elu; > 0).
// Samplers: u_grad (dY), u_input (y).

#if defined(GRAD_RELU) + defined(GRAD_LEAKYRELU) + defined(GRAD_SIGMOID) + defined(GRAD_TANH) + defined(GRAD_ELU) != 1
#error activation_grad.glsl needs exactly one of GRAD_RELU, GRAD_LEAKYRELU, GRAD_SIGMOID, GRAD_TANH, GRAD_ELU
#endif

uniform sampler2D u_grad;
uniform ivec4 u_grad_shape;
uniform sampler2D u_input;
uniform ivec4 u_input_shape;

vec4 compute(int slice, int y, int x) {
    return activation_derivative(fetch(u_grad, u_grad_shape, slice, y, x),
                                 fetch(u_input, u_input_shape, slice, y, x));
}
