// line_walk.glsl - the H or W line through a pixel, for ops reducing along it (softmax.glsl,
// layernorm.glsl): STEP is one texel along the line (OVER_W: x, else y), line_start() its
// first texel, line_length() its length in texels.

#ifdef OVER_W
const ivec2 STEP = ivec2(1, 0);  // (x, y)
#else
const ivec2 STEP = ivec2(0, 1);
#endif

ivec2 line_start(int y, int x) { return ivec2(x, y) * (ivec2(1) - STEP); }
int line_length(ivec4 shape) { return STEP.x * shape.z + STEP.y * shape.y; }
