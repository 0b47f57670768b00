// conv_grad_weight_lanes.glsl - interleave the render targets of a lane-blocked weight gradient
// (conv_grad_weight.glsl LANE_BLOCK) into the forward conv's filter layout (grad_lanes.glsl),
// for Trainer.gradients(); the optimisers read the targets directly.
// Defines: CUSTOM_MAIN (its own main()); LANE_BIAS (copy the bias gradient of BIAS_ROW out).

#ifndef CUSTOM_MAIN
#error conv_grad_weight_lanes.glsl needs CUSTOM_MAIN (it has its own main())
#endif

#ifdef LANE_BIAS  // the bias gradient the pass summed in layer 0 of rows from u_bias_row
uniform sampler2DArray u_grad;
uniform ivec2 u_bias_row;  // (first row, width): ConvGradWeight.bias_row

void main() {
    int s = int(gl_FragCoord.x);  // the output slice
    frag_color = texelFetch(u_grad, ivec3(s % u_bias_row.y, u_bias_row.x + s / u_bias_row.y, 0), 0);
}
#else
#include "grad_lanes.glsl"

void main() {
    frag_color = lane_gradient(ivec2(gl_FragCoord.xy));
}
#endif
