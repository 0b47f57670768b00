// activation_derivative.glsl - dL/dz = dL/dy * f'(z) of an activation y = f(z), with f' written
// in terms of the output y, as PyTorch's backward does (glcnn/train/grad_ops.py): for
// activation_grad.glsl, and with OUTPUT_GRAD for the fused epilogue of an op computing dL/dy
// (common.glsl), which then reads y from u_forward at its output pixel and writes dL/dz.
// Included by common.glsl; empty without a GRAD_ define.
// Defines: at most one of GRAD_RELU, GRAD_LEAKYRELU, GRAD_SIGMOID, GRAD_TANH, GRAD_ELU;
//          OUTPUT_GRAD (with one of them).
// Uniforms: u_grad_alpha (LeakyRelu, Elu; > 0), u_forward_shape (OUTPUT_GRAD).
// Samplers: u_forward (OUTPUT_GRAD: y).

#if defined(GRAD_RELU) + defined(GRAD_LEAKYRELU) + defined(GRAD_SIGMOID) + defined(GRAD_TANH) + defined(GRAD_ELU) > 1
#error activation_derivative.glsl takes at most one of GRAD_RELU, GRAD_LEAKYRELU, GRAD_SIGMOID, GRAD_TANH, GRAD_ELU
#endif

#if defined(GRAD_RELU) || defined(GRAD_LEAKYRELU) || defined(GRAD_SIGMOID) || defined(GRAD_TANH) || defined(GRAD_ELU)
uniform float u_grad_alpha;

// dy * f'(z) where y = f(z) is `v`.
vec4 activation_derivative(vec4 dy, vec4 v) {
    bvec4 positive = greaterThan(v, vec4(0.0));
#if defined(GRAD_RELU)
    return mix(vec4(0.0), dy, positive);
#elif defined(GRAD_LEAKYRELU)
    return mix(dy * u_grad_alpha, dy, positive);
#elif defined(GRAD_SIGMOID)
    return dy * (v * (1.0 - v));
#elif defined(GRAD_TANH)
    return dy * (1.0 - v * v);
#else
    return mix(dy * (v + u_grad_alpha), dy, positive);
#endif
}
#elif defined(OUTPUT_GRAD)
#error OUTPUT_GRAD needs one of GRAD_RELU, GRAD_LEAKYRELU, GRAD_SIGMOID, GRAD_TANH, GRAD_ELU
#endif

#ifdef OUTPUT_GRAD
uniform sampler2D u_forward;
uniform ivec4 u_forward_shape;
#endif
