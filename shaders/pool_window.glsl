// pool_window.glsl - what a pooling pass reads about its window (pool.glsl, pool_grad.glsl):
// the input, the window's stride, dilation and pads, AVERAGE's counting box, and inside().
// Uniforms: u_input_shape, u_stride (x, y), u_dilation (x, y), u_pad (left, top),
//           u_count_box (AVERAGE: x0, y0, x1, y1, half-open).
// Samplers: u_input (with BLOCKED_INPUT, pool.glsl's, the producer's render-target array read
//           in place through conv_block_input.glsl, with uniforms u_in_block, u_in_group).

#ifdef BLOCKED_INPUT
uniform sampler2DArray u_input;
uniform ivec4 u_in_block;
uniform int u_in_group;  // the producer's cells per group (u_bands.z)
vec2 input_texel_size;  // 1 / the array's layer size, set by compute()
#else
uniform sampler2D u_input;
#endif
uniform ivec4 u_input_shape;
uniform ivec2 u_stride;
uniform ivec2 u_dilation;
uniform ivec2 u_pad;
#ifdef AVERAGE
uniform ivec4 u_count_box;
#endif

bool inside(ivec2 p, ivec4 box) {
    return all(greaterThanEqual(p, box.xy)) && all(lessThan(p, box.zw));
}
