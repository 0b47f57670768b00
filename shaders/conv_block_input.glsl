// conv_block_input.glsl - where a blocked conv (conv_block.glsl) reads its input (and, with
// BLOCKED_INPUT, a direct depthwise conv's input_texel and a pool's pool_input, each through
// input_pixel(tile, y, x)), in one of four forms behind one interface: column_at(x, layer) and
// row_at(y, layer) give where input column x and row y lie in a tile (and their part of the
// layer), tile_at(origin) names the tile starting at atlas texel `origin`,
// input_sample(tile, column, row, layer) reads a stored texel, and first_tile(slice) and
// next_tile(origin) walk the tiles of a group's input slices.
// Defines: BLOCKED_INPUT with IN_BLOCK_X, IN_BLOCK_Y, IN_BLOCK_STEP (the producer's render
//          targets, read in place; with INPUT_BUFFER too, from a buffer texture that the
//          pipeline copies the render-target array into before the pass, layer after layer),
//          INPUT_BUFFER alone (the atlas copied into a buffer texture), or neither (the atlas
//          as a 2D texture). Uniforms and samplers: conv_inputs.glsl (a pool's:
//          pool_window.glsl).

#ifndef SOURCE_X  // stored column and row of input column x, row y (conv_inputs.glsl)
#define SOURCE_X(x) (x)
#define SOURCE_Y(y) (y)
#endif

#ifdef BLOCKED_INPUT
// Blocked input. Layer j = jy * IN_BLOCK_X + jx of u_input holds pixel (jy, jx) of every block of
// the producer, whose tile of slice s starts at grid cell s (one band per tile; groups of
// u_in_group cells, the producer's u_bands.z: u_in_block is
// (tile rows, tile columns, grid columns, pitch)). Along one axis, input coordinate x lies at
// blocked coordinate (x div span) * step + x mod step and block pixel (x mod span) div step,
// span = step * block (common.glsl, "Spatial blocking"); blocked_axis returns both. Coordinates
// outside the input (padding) are clamped to 0: their taps are masked anyway.
ivec2 blocked_axis(int x, int block) {
    int span = IN_BLOCK_STEP * block;
    int c = max(x, 0);
    int within = c % span;
    return ivec2(c / span * IN_BLOCK_STEP + within % IN_BLOCK_STEP, within / IN_BLOCK_STEP);
}
#endif

#ifdef INPUT_BUFFER
// Input buffer (the pipeline copies the input texture into a buffer texture before the pass,
// an array layer after layer: u_input_width texels a row, u_input_layer a layer): one
// texelFetch at index tile + row + column, cheaper on llvmpipe than a 2D sample. Coordinates
// outside the input are clamped into it, so every index lies inside the buffer: their taps are
// masked anyway. `layer` is 0: a blocked input's layer is folded into the column's and row's
// indices.
#define INPUT_AXIS int
#define INPUT_TILE int
#ifdef BLOCKED_INPUT
INPUT_AXIS column_at(int x, out int layer) {
    x = SOURCE_X(x);
    ivec2 b = blocked_axis(min(x, u_input_shape.z - 1), IN_BLOCK_X);
    layer = 0;
    return b.x + b.y * u_input_layer;
}
INPUT_AXIS row_at(int y, out int layer) {
    y = SOURCE_Y(y);
    ivec2 b = blocked_axis(min(y, u_input_shape.y - 1), IN_BLOCK_Y);
    layer = 0;
    return b.x * u_input_width + b.y * IN_BLOCK_X * u_input_layer;
}
#else
INPUT_AXIS column_at(int x, out int layer) {
    x = SOURCE_X(x);
    layer = 0;
    return clamp(x, 0, u_input_shape.z - 1);
}
INPUT_AXIS row_at(int y, out int layer) {
    y = SOURCE_Y(y);
    layer = 0;
    return clamp(y, 0, u_input_shape.y - 1) * u_input_width;
}
#endif  // BLOCKED_INPUT
INPUT_TILE tile_at(ivec2 origin) { return origin.y * u_input_width + origin.x; }
vec4 input_sample(INPUT_TILE tile, INPUT_AXIS column, INPUT_AXIS row, int layer) {
    return texelFetch(u_input, tile + row + column);
}
#elif defined(BLOCKED_INPUT)
// The render-target array sampled in place: texture coordinate (relative to the tile) and
// layer of input column x and row y.
#define INPUT_AXIS float
#define INPUT_TILE vec2
INPUT_AXIS column_at(int x, out int layer) {
    x = SOURCE_X(x);
    ivec2 b = blocked_axis(x, IN_BLOCK_X);
    layer = b.y;
    return (float(b.x) + 0.5) * input_texel_size.x;
}
INPUT_AXIS row_at(int y, out int layer) {
    y = SOURCE_Y(y);
    ivec2 b = blocked_axis(y, IN_BLOCK_Y);
    layer = b.y * IN_BLOCK_X;
    return (float(b.x) + 0.5) * input_texel_size.y;
}
INPUT_TILE tile_at(ivec2 origin) { return vec2(origin) * input_texel_size; }
vec4 input_sample(INPUT_TILE tile, INPUT_AXIS column, INPUT_AXIS row, int layer) {
    return textureLod(u_input, vec3(tile + vec2(column, row), float(layer)), 0.0);
}
#else
// The atlas as a 2D texture, sampled at texel centres (sample_texel, common.glsl).
#define INPUT_AXIS float
#define INPUT_TILE vec2
INPUT_AXIS column_at(int x, out int layer) {
    x = SOURCE_X(x);
    layer = 0;
    return (float(x) + 0.5) * input_texel_size.x;
}
INPUT_AXIS row_at(int y, out int layer) {
    y = SOURCE_Y(y);
    layer = 0;
    return (float(y) + 0.5) * input_texel_size.y;
}
INPUT_TILE tile_at(ivec2 origin) { return vec2(origin) * input_texel_size; }
vec4 input_sample(INPUT_TILE tile, INPUT_AXIS column, INPUT_AXIS row, int layer) {
    return textureLod(u_input, tile + vec2(column, row), 0.0);
}
#endif

#ifdef BLOCKED_INPUT
ivec2 first_tile(int slice) { return cell_origin(slice, u_in_block, u_in_group); }

// The origin of the input tile after `origin`, walking the grid cell by cell: the next cell of
// its group, else the first of the next group.
ivec2 next_tile(ivec2 origin) {
    int group_x = div_floor(origin.x, u_in_block.w) * u_in_block.w;  // the group's first texel
    origin.x += u_in_block.y;
    if (origin.x - group_x < u_in_group * u_in_block.y) {
        return origin;
    }
    origin.x = group_x + u_in_block.w;
    return origin.x < u_in_block.z * u_in_block.w ? origin : ivec2(0, origin.y + u_in_block.x);
}

// The stored texel of input pixel (y, x) in the tile at `tile`: one pixel read alone (a direct
// depthwise conv's tap, a pool's), where a blocked conv shares rows and columns between taps.
vec4 input_pixel(INPUT_TILE tile, int y, int x) {
    int ly, lx;
    INPUT_AXIS row = row_at(y, ly);
    INPUT_AXIS column = column_at(x, lx);
    return input_sample(tile, column, row, ly + lx);
}
#else
ivec2 first_tile(int slice) { return tile_origin(u_input_shape, slice); }

// The origin of the input tile after `origin`, walking the atlas row by row.
ivec2 next_tile(ivec2 origin) {
    origin.x += u_input_shape.z;
    int row_end = grid_cols(u_input_shape) * u_input_shape.z;
    return origin.x < row_end ? origin : ivec2(0, origin.y + u_input_shape.y);
}
#endif  // BLOCKED_INPUT
