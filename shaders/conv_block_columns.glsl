// conv_block_columns.glsl - compute_block() with column sharing (conv_block.glsl; SHARE_COLUMNS).
// Along x a block reads SPAN_X input columns, most of them shared by several (pixel, kernel
// column) pairs; each is fetched once per input slice and kernel row and feeds every pair that
// reads it. NW weight taps per kernel row are loaded once; pair_tap(m, jx) names the tap by
// which pixel jx reads column m (-1: none). NW, SPAN_X, first_column, tap_column and pair_tap
// come from conv.glsl or conv_transpose.glsl. The loops over taps, rows and columns are
// written out (#for, glcnn/runtime/shaders.py), so the pairing is resolved at compile time and
// the arrays stay in registers on every driver. The innermost loop over a row's pixels stays a
// loop: at most 8 iterations of one multiply-add, which compilers unroll (Mesa 25 does; writing
// it out too made a blocked 3x3 conv's GLSL compile 44 -> 56 ms on Mesa 22.3). (Measured on
// llvmpipe: 1.2-1.4x faster than the tap loop of conv_block_taps.glsl from two input slices on;
// with one, the tap loop is faster, but for a depthwise conv, whose weight fetches feed few
// multiply-adds either way.)

void compute_block(int slice, int oy, int ox) {
    int first_slice = begin_block(slice);
    ivec3 ty = block_taps(oy, BLOCK_Y, KH, u_pad.y, u_stride.y, u_dilation.y, INPUT_SIZE.y);
    int ix0 = first_column(ox);
    INPUT_AXIS column[SPAN_X];  // where each column lies in a tile (column_at)
    int column_layer[SPAN_X];  // and its part of the layer (BLOCKED_INPUT; else 0)
    bool column_inside[SPAN_X];
#for m < SPAN_X unroll 24
    column[m] = column_at(ix0 + m, column_layer[m]);
    column_inside[m] = uint(ix0 + m) < uint(INPUT_SIZE.x);
#endfor
    ivec2 first_origin = first_tile(first_slice);
    int iy0 = source(oy, ty.x, u_pad.y, u_stride.y, u_dilation.y);  // in range: ty.x is a tap
    for (int ky = ty.x; ky <= ty.y; ky += ty.z, iy0 += SRC_PER_TAP.y) {
        INPUT_AXIS row[BLOCK_Y];
        int row_layer[BLOCK_Y];
        bool row_inside[BLOCK_Y];
#for jy < BLOCK_Y unroll 2
        int iy = iy0 + jy * SRC_PER_PIXEL.y;
        row[jy] = row_at(iy, row_layer[jy]);
        row_inside[jy] = uint(iy) < uint(INPUT_SIZE.y);
#endfor
        WEIGHTS_ROW w_at = tap_row(slice, ky);
        ivec2 origin = first_origin;
        int s = first_slice;
        for (int c = 0; c < CG_LOOP; c += 4, ++s, origin = next_tile(origin)) {
            INPUT_TILE tile = tile_at(origin);
            mat2x4 range = storage_range(u_input_shape, s);
            vec4 gate = input_gate(s);  // applied to the weights, shared by the block's pixels
            WEIGHTS w[NW];
#for t < NW unroll 12
            int kx = tap_column(t);
            w[t] = kx < KW ? gated(tap_weights(w_at, slice, c, kx), gate) : WEIGHTS(0.0);
#endfor
            // Every fetch of the slice first, then the multiply-adds: llvmpipe calls a function
            // for each fetch and spills the live vector registers (the block's 32 accumulators)
            // around it, so fetches between multiply-adds reloaded and spilled them each time.
            vec4 fetched[BLOCK_Y * SPAN_X];
#for jy < BLOCK_Y unroll 2
#for m < SPAN_X unroll 24
            fetched[jy * SPAN_X + m] = input_sample(tile, column[m], row[jy],
                                                    row_layer[jy] + column_layer[m]);
#endfor
#endfor
#for jy < BLOCK_Y unroll 2
#for m < SPAN_X unroll 24
            vec4 x = input_activation(decode_with(fetched[jy * SPAN_X + m], range));
            x = column_inside[m] && row_inside[jy] ? x : vec4(0.0);
            for (int jx = 0; jx < BLOCK_X; ++jx) {
                int t = pair_tap(m, jx);
                if (t >= 0) block_acc[jy * BLOCK_X + jx] += w[t] * x;
            }
#endfor
#endfor
        }
    }
}
