// optim_inputs.glsl - what optim_sgd.glsl and optim_adam.glsl read at this fragment's texel of
// a weight layout: PARAM, the weights (with PARAM_BUFFER the forward pipeline's buffer texture,
// u_param_width texels a row: a buffer fetch costs a quarter of a 2D sample on llvmpipe; else
// the 2D texture u_param), and GRADIENT (the 2D texture u_grad, or with LANE_GRAD a lane-blocked
// gradient's texture array, grad_lanes.glsl).

#ifdef PARAM_BUFFER
uniform samplerBuffer u_param;
uniform int u_param_width;
#define PARAM texelFetch(u_param, int(gl_FragCoord.y) * u_param_width + int(gl_FragCoord.x))
#else
uniform sampler2D u_param;
#define PARAM texel_here(u_param)
#endif

#ifdef LANE_GRAD
#include "grad_lanes.glsl"
#define GRADIENT lane_gradient(ivec2(gl_FragCoord.xy))
#else
uniform sampler2D u_grad;
#define GRADIENT texel_here(u_grad)
#endif
