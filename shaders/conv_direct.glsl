// conv_direct.glsl - compute() of a conv over whole input slices, one output texel per
// fragment: DENSE (one vec4 fetch feeds a mat4*vec4) or DEPTHWISE (output slice s reads input
// slice s only). Included by conv.glsl and conv_transpose.glsl after their source(), taps()
// and SRC_PER_TAP; MASK_TAPS (conv_transpose.glsl: a dilated transposed conv) visits every
// tap and reads zero where a tap has no input.
//
// Speed (DESIGN.md section 5; measured on llvmpipe, sound on every GL): the loops visit only
// taps whose input lies inside the tile (bounds from taps()), so DENSE and DEPTHWISE never
// fetch padding and need no mask; every fetch is a NEAREST sample at a texel centre
// (sample_texel), about twice as fast as texelFetch on llvmpipe and exact everywhere; the
// innermost loop walks the group's input slices tile by tile, with no integer division
// (llvmpipe scalarises it) and no per-tap address setup repeated for every slice.

// Texel (x, y) of input `slice`, whose tile starts at `origin`; (y, x) lies inside the tile
// unless MASK_TAPS, where taps with no input read zero. BLOCKED_INPUT (a DEPTHWISE Conv only,
// glcnn/runtime/plan.py): the input is its producer's render-target array, read in place through
// conv_block_input.glsl (included by conv.glsl; from a buffer copy with INPUT_BUFFER), `origin`
// its cell (first_tile).
vec4 input_texel(ivec2 origin, int slice, int y, int x) {
#ifdef BLOCKED_INPUT
    return input_activation(decode(input_pixel(tile_at(origin), y, x), u_input_shape, slice));
#elif defined(INPUT_MEAN)
    // The mean of the slice's H×W tile (a 1×1 conv's only tap reads y = x = 0).
    vec4 sum = vec4(0.0);
    for (int i = 0; i < u_input_shape.y; ++i) {
        for (int j = 0; j < u_input_shape.z; ++j) {
            vec4 stored = sample_texel(u_input, input_texel_size, origin + ivec2(j, i));
            sum += input_activation(decode(stored, u_input_shape, slice));
        }
    }
    return sum / float(u_input_shape.y * u_input_shape.z);
#else
#ifdef MASK_TAPS
    if (uint(y) >= uint(INPUT_SIZE.y) || uint(x) >= uint(INPUT_SIZE.x)) return vec4(0.0);
#endif
    vec4 stored = sample_texel(u_input, input_texel_size, origin + ivec2(SOURCE_X(x), SOURCE_Y(y)));
    return input_activation(decode(stored, u_input_shape, slice));
#endif
}

vec4 compute(int slice, int oy, int ox) {
    begin_weights();
#ifndef INPUT_BUFFER
    input_texel_size = 1.0 / vec2(textureSize(u_input, 0).xy);
#endif
    vec4 acc = channel_params(u_params, slice, 0);
    ivec4 lanes = 4 * slice + ivec4(0, 1, 2, 3);
    ivec4 group_first = div_floor(lanes, u_cog) * u_cg;  // first input channel of each lane's group
    ivec3 ty = taps(oy, KH, u_pad.y, u_stride.y, u_dilation.y, INPUT_SIZE.y);
    ivec3 tx = taps(ox, KW, u_pad.x, u_stride.x, u_dilation.x, INPUT_SIZE.x);
    // Source row/column of the first tap and its change per visited tap, so the tap loops
    // below do no integer division (scalarised, hence slow, on llvmpipe).
    ivec2 src = ivec2(source(ox, tx.x, u_pad.x, u_stride.x, u_dilation.x),
                      source(oy, ty.x, u_pad.y, u_stride.y, u_dilation.y));
    ivec2 src_step = SRC_PER_TAP;
#ifdef DENSE
    int first_slice = group_first.x / 4;
#else
    int first_slice = slice;  // depthwise (CG = 1): output slice s reads input slice s only
#endif
#ifdef BLOCKED_INPUT
    ivec2 first_origin = first_tile(first_slice);
#else
    ivec2 first_origin = tile_origin(u_input_shape, first_slice);
#endif
#if defined(DEPTHWISE) && !defined(MASK_TAPS)
    if (ivec3(ty.x, ty.z, tx.x) == ivec3(0, 1, 0) && tx.z == 1 && ty.y == KH - 1 &&
            tx.y == KW - 1) {
        // Every tap visited and inside the tile: constant loop bounds, which the compiler
        // unrolls. One input slice: one gate for every tap.
        vec4 gate = input_gate(slice);
        for (int ky = 0; ky < KH; ++ky) {
            WEIGHTS_ROW row = weights_row(slice, ky);
            for (int kx = 0; kx < KW; ++kx) {
                acc += weights_texel(row, kx) * gate * input_texel(first_origin, slice,
                    src.y + ky * src_step.y, src.x + kx * src_step.x);
            }
        }
        return acc;
    }
#endif
    int row_end = grid_cols(u_input_shape) * u_input_shape.z;  // atlas width of whole tiles
    int iy = src.y;
    for (int ky = ty.x; ky <= ty.y; ky += ty.z, iy += src_step.y) {
        int ix = src.x;
        WEIGHTS_ROW row = tap_row(slice, ky);
        for (int kx = tx.x; kx <= tx.y; kx += tx.z, ix += src_step.x) {
#ifdef MASK_TAPS  // every tap is visited: recompute its source, -1 where it has none
            iy = source(oy, ky, u_pad.y, u_stride.y, u_dilation.y);
            ix = source(ox, kx, u_pad.x, u_stride.x, u_dilation.x);
#endif
            // Walk the input slices of the group tile by tile: no division per slice.
            ivec2 origin = first_origin;
            int s = first_slice;
            for (int c = 0; c < CG_LOOP; c += 4, ++s) {
                vec4 x = input_texel(origin, s, iy, ix) * input_gate(s);
#ifdef DENSE
                acc += weights_block(row, slice, c, kx) * x;
#else
                acc += tap(0, slice, ky, kx) * x;
#endif
                origin.x += u_input_shape.z;
                origin = origin.x < row_end ? origin : ivec2(0, origin.y + u_input_shape.y);
            }
        }
    }
    return acc;
}
