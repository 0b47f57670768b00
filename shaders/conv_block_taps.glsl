// conv_block_taps.glsl - compute_block() tap by tap (conv_block.glsl; without WIDE_INPUT):
// for each tap the block's pixels fetch their own sources and share its weights.

void compute_block(int slice, int oy, int ox) {
    int first_slice = begin_block(slice);
    ivec3 ty = block_taps(oy, BLOCK_Y, KH, u_pad.y, u_stride.y, u_dilation.y, INPUT_SIZE.y);
    ivec3 tx = block_taps(ox, BLOCK_X, KW, u_pad.x, u_stride.x, u_dilation.x, INPUT_SIZE.x);
    ivec2 src = ivec2(source(ox, tx.x, u_pad.x, u_stride.x, u_dilation.x),
                      source(oy, ty.x, u_pad.y, u_stride.y, u_dilation.y));
    ivec2 first_origin = first_tile(first_slice);
    int iy = src.y;
    for (int ky = ty.x; ky <= ty.y; ky += ty.z, iy += SRC_PER_TAP.y) {
        int ix = src.x;
        for (int kx = tx.x; kx <= tx.y; kx += tx.z, ix += SRC_PER_TAP.x) {
            INPUT_AXIS column[BLOCK], row[BLOCK];  // where each pixel's source lies in a tile
            int layer[BLOCK];  // and its layer (BLOCKED_INPUT; else 0)
            bool inside[BLOCK];
#for j < BLOCK unroll 8
            ivec2 at = ivec2(ix, iy) + ivec2(j % BLOCK_X, j / BLOCK_X) * SRC_PER_PIXEL;
            inside[j] = uint(at.x) < uint(INPUT_SIZE.x) && uint(at.y) < uint(INPUT_SIZE.y);
            int column_layer, row_layer;
            column[j] = column_at(at.x, column_layer);
            row[j] = row_at(at.y, row_layer);
            layer[j] = row_layer + column_layer;
#endfor
            WEIGHTS_ROW w_at = tap_row(slice, ky);
            ivec2 origin = first_origin;
            int s = first_slice;
            for (int c = 0; c < CG_LOOP; c += 4, ++s, origin = next_tile(origin)) {
                INPUT_TILE tile = tile_at(origin);
                mat2x4 range = storage_range(u_input_shape, s);
                WEIGHTS w = gated(tap_weights(w_at, slice, c, kx), input_gate(s));  // for every pixel
                vec4 fetched[BLOCK];  // fetches first (conv_block_columns.glsl says why)
#for j < BLOCK unroll 8
                fetched[j] = input_sample(tile, column[j], row[j], layer[j]);
#endfor
#for j < BLOCK unroll 8
                vec4 x = input_activation(decode_with(fetched[j], range));
                block_acc[j] += w * (inside[j] ? x : vec4(0.0));
#endfor
            }
        }
    }
}
