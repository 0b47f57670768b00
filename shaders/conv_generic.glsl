// conv_generic.glsl - compute() of a conv whose groups are neither whole input slices nor
// single channels (neither DENSE nor DEPTHWISE; e.g. group 2 over 6 channels): each of the
// 4 output lanes gathers its own group's CG input channels one by one. fetch_channel reads
// zero outside the input, which masks padding taps and taps of a transposed conv with no
// input (source() -1). Included by conv.glsl and conv_transpose.glsl after their source() and
// taps().

vec4 compute(int slice, int oy, int ox) {
    begin_weights();
    vec4 acc = channel_params(u_params, slice, 0);
    ivec4 lanes = 4 * slice + ivec4(0, 1, 2, 3);
    ivec4 group_first = div_floor(lanes, u_cog) * u_cg;  // first input channel of each lane's group
    ivec3 ty = taps(oy, KH, u_pad.y, u_stride.y, u_dilation.y, u_input_shape.y);
    ivec3 tx = taps(ox, KW, u_pad.x, u_stride.x, u_dilation.x, u_input_shape.z);
    for (int ky = ty.x; ky <= ty.y; ky += ty.z) {
        int iy = source(oy, ky, u_pad.y, u_stride.y, u_dilation.y);
        for (int kx = tx.x; kx <= tx.y; kx += tx.z) {
            int ix = source(ox, kx, u_pad.x, u_stride.x, u_dilation.x);
            for (int c = 0; c < CG; ++c) {
                ivec4 ch = group_first + c;
                vec4 x = vec4(fetch_channel(u_input, u_input_shape, ch.x, iy, ix),
                              fetch_channel(u_input, u_input_shape, ch.y, iy, ix),
                              fetch_channel(u_input, u_input_shape, ch.z, iy, ix),
                              fetch_channel(u_input, u_input_shape, ch.w, iy, ix));
                acc += tap(c, slice, ky, kx) * x;
            }
        }
    }
    return acc;
}
