// conv_grad_weight_lanes.glsl - interleave the render targets of a lane-blocked weight gradient
// (conv_grad_weight.glsl LANE_BLOCK) into the forward conv's filter layout (grad_lanes.glsl),
// for Trainer.gradients(); the optimisers read the targets directly.
// Defines: CUSTOM_MAIN (its own main()).

#ifndef CUSTOM_MAIN
#error conv_grad_weight_lanes.glsl needs CUSTOM_MAIN (it has its own main())
#endif

#include "grad_lanes.glsl"

void main() {
    frag_color = lane_gradient(ivec2(gl_FragCoord.xy));
}
