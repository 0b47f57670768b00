// optim_inputs.glsl - what optim_sgd.glsl and optim_adam.glsl read at this fragment's texel of
// a weight layout: PARAM, the weights (with PARAM_BUFFER the forward pipeline's buffer texture,
// u_param_width texels a row: a buffer fetch costs a quarter of a 2D sample on llvmpipe; else
// the 2D texture u_param), and GRADIENT (the 2D texture u_grad, or with LANE_GRAD a lane-blocked
// gradient's texture array, grad_lanes.glsl; with LANE_BIAS layer 0 of that array's rows
// from u_bias_row, where the weight gradient's pass summed the bias gradient).

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
#elif defined(LANE_BIAS)  // a bias gradient summed by its weight gradient's pass (BIAS_ROW)
uniform sampler2DArray u_grad;
uniform ivec2 u_bias_row;  // (first row, width): ConvGradWeight.bias_row

vec4 bias_gradient_here() {  // of output slice s = this fragment's x
    int s = int(gl_FragCoord.x);
    return texelFetch(u_grad, ivec3(s % u_bias_row.y, u_bias_row.x + s / u_bias_row.y, 0), 0);
}
#define GRADIENT bias_gradient_here()
#else
uniform sampler2D u_grad;
#define GRADIENT texel_here(u_grad)
#endif
