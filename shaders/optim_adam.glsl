// optim_adam.glsl - one step of PyTorch's Adam / AdamW on a weight layout, texel by texel
// (glcnn/train/optim.py), with t the step number:
//     Adam:  g = grad + wd * p          AdamW: p = p * (1 - lr * wd), g = grad
//     m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g^2
//     p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Padding texels stay zero (zero weight, zero gradient, zero moments).
// Defines: CUSTOM_MAIN, BLOCKED_OUTPUT with BLOCK_X = 3, BLOCK_Y = 1, BLOCK_STEP = 1 (render
//          targets: the new weights, m, v); ADAMW (decoupled weight decay); PARAM_BUFFER,
//          LANE_GRAD (optim_inputs.glsl).
// Uniforms: u_adam (lr, b1, b2, eps), u_step (lr / (1 - b1^t), sqrt(1 - b2^t), wd, 0).
// Samplers: u_param, u_grad, u_m, u_v.

#ifndef CUSTOM_MAIN
#error optim_adam.glsl needs CUSTOM_MAIN (it has its own main())
#endif

#include "optim_inputs.glsl"
uniform sampler2D u_m;
uniform sampler2D u_v;
uniform vec4 u_adam;
uniform vec4 u_step;

void main() {
    vec4 w = PARAM;
    vec4 g = GRADIENT;
#ifdef ADAMW
    w = w * (1.0 - u_adam.x * u_step.z);
#else
    g = g + u_step.z * w;
#endif
    vec4 m = u_adam.y * texel_here(u_m) + (1.0 - u_adam.y) * g;
    vec4 v = u_adam.z * texel_here(u_v) + (1.0 - u_adam.z) * g * g;
    frag_block[0] = w - u_step.x * m / (sqrt(v) / u_step.y + u_adam.w);
    frag_block[1] = m;
    frag_block[2] = v;
}
