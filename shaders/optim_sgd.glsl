// optim_sgd.glsl - one step of PyTorch's SGD on a weight layout, texel by texel
// (glcnn/train/optim.py): g = grad + wd * p; buf = momentum * buf + g (buf = g at the first
// step, where buf is still zero); g = nesterov ? g + momentum * buf : buf; p -= lr * g.
// Padding texels stay zero (zero weight, zero gradient).
// Defines: CUSTOM_MAIN, BLOCKED_OUTPUT with BLOCK_X = 2, BLOCK_Y = 1, BLOCK_STEP = 1 (two
//          render targets: the new weights, the new momentum buffer); NESTEROV;
//          PARAM_BUFFER, LANE_GRAD (optim_inputs.glsl).
// Uniforms: u_sgd (lr, momentum, weight decay, 0).
// Samplers: u_param, u_grad, u_buf (the momentum buffer).

#ifndef CUSTOM_MAIN
#error optim_sgd.glsl needs CUSTOM_MAIN (it has its own main())
#endif

#include "optim_inputs.glsl"
uniform sampler2D u_buf;
uniform vec4 u_sgd;

void main() {
    vec4 w = PARAM;
    vec4 g = GRADIENT + u_sgd.z * w;
    vec4 buf = u_sgd.y * texel_here(u_buf) + g;
#ifdef NESTEROV
    g = g + u_sgd.y * buf;
#else
    g = buf;
#endif
    frag_block[0] = w - u_sgd.x * g;
    frag_block[1] = buf;
}
