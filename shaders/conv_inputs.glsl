// conv_inputs.glsl - what a conv program reads (conv.glsl, conv_transpose.glsl): its uniforms
// and samplers, the fused input activation and gate, and the filter layout tap by tap.
// Defines: conv_defines.glsl.
// Uniforms: u_input_shape, u_stride (x, y), u_dilation (x, y), u_pad (left, top),
//           u_cog output channels per group, u_cg input channels per group,
//           u_cg_loop (WIDE_INPUT: CG padded to whole slices), u_in_alpha (IN_ACT_LEAKYRELU),
//           u_in_block and u_in_group (BLOCKED_INPUT: the producer's u_block and u_bands.z),
//           u_input_width (INPUT_BUFFER),
//           u_input_layer (INPUT_BUFFER with BLOCKED_INPUT).
// Samplers: u_input (activation atlas; with BLOCKED_INPUT a sampler2DArray, with INPUT_BUFFER
//           a samplerBuffer of the atlas texture row by row, or with both of the array
//           layer by layer), u_gate (INPUT_GATE: the
//           (C, 1, 1) gate, shape u_gate_shape), u_weights
//           (layout.pack_filters of (Co, CG, KH, KW); with WEIGHTS_BUFFER a samplerBuffer
//           holding that layout row by row, u_weights_width texels a row), u_params (row 0:
//           bias).

#ifdef BLOCKED_INPUT
uniform ivec4 u_in_block;
uniform int u_in_group;  // the producer's cells per group (u_bands.z)
#endif
#ifdef INPUT_BUFFER
uniform samplerBuffer u_input;  // the input texture's texels row by row (layer by layer)
uniform int u_input_width;  // texels per row of that texture
#ifdef BLOCKED_INPUT
uniform int u_input_layer;  // texels per layer of that texture array
#endif
#elif defined(BLOCKED_INPUT)
uniform sampler2DArray u_input;
#else
uniform sampler2D u_input;
#endif
uniform ivec4 u_input_shape;
// The (W, H) the conv reads, and the stored column and row of its input column x and row y:
// u_input_shape's, unless the input is read upscaled (INPUT_UPSAMPLE; a coordinate below 0
// is padding, masked, and reads column or row 0).
#ifdef INPUT_UPSAMPLE
#define INPUT_SIZE (u_input_shape.zy * ivec2(UPSAMPLE_X, UPSAMPLE_Y))
#define SOURCE_X(x) (max(x, 0) / UPSAMPLE_X)
#define SOURCE_Y(y) (max(y, 0) / UPSAMPLE_Y)
#else
#define INPUT_SIZE u_input_shape.zy
#define SOURCE_X(x) (x)
#define SOURCE_Y(y) (y)
#endif
#ifdef WEIGHTS_BUFFER
uniform samplerBuffer u_weights;
uniform int u_weights_width;  // texels per row of the filter layout
#else
uniform sampler2D u_weights;
#endif
uniform sampler2D u_params;
uniform ivec2 u_stride;
uniform ivec2 u_dilation;
uniform ivec2 u_pad;
uniform int u_cog;
uniform int u_cg;

#ifdef WIDE_INPUT
uniform int u_cg_loop;  // input channels per group, padded to whole slices
#define CG_LOOP u_cg_loop
#else
#define CG_LOOP CG
#endif

#ifdef IN_ACT_LEAKYRELU
uniform float u_in_alpha;
#endif

// The fused activation of the input (glcnn.passes.fuse_input_activations), or none.
vec4 input_activation(vec4 x) {
#if defined(IN_ACT_RELU)
    return max(x, 0.0);
#elif defined(IN_ACT_LEAKYRELU)
    return mix(x * u_in_alpha, x, greaterThanEqual(x, vec4(0.0)));
#else
    return x;
#endif
}

#ifdef INPUT_GATE
uniform sampler2D u_gate;
uniform ivec4 u_gate_shape;
#endif

// The fused input gate (glcnn.graph.fuse_gate): the factors of input slice s's 4 channels, or
// 1. A gated conv reads x * gate (after the input activation); 0 * gate = 0 keeps masked taps
// zero.
vec4 input_gate(int s) {
#ifdef INPUT_GATE
    vec2 texel_size = 1.0 / vec2(textureSize(u_gate, 0));
    return decode(sample_texel(u_gate, texel_size, tile_origin(u_gate_shape, s)), u_gate_shape, s);
#else
    return vec4(1.0);
#endif
}

vec2 weights_texel_size, input_texel_size;  // 1 / texture size, set by compute() or begin_block()

// The filter layout (layout.pack_filters): row `slice * KH + ky` holds, per input channel c,
// the KW taps of the slice's 4 output channels. A row is named by a weights_row and read
// texel by texel with weights_texel: an index into a buffer texture (WEIGHTS_BUFFER, one
// texelFetch, cheap on llvmpipe) or the texel centre of a 2D texture; rows_down(row, n) is n
// rows below.
#ifdef WEIGHTS_BUFFER
#define WEIGHTS_ROW int
WEIGHTS_ROW weights_row(int slice, int ky) { return (slice * KH + ky) * u_weights_width; }
WEIGHTS_ROW rows_down(WEIGHTS_ROW row, int n) { return row + n * u_weights_width; }
vec4 weights_texel(WEIGHTS_ROW row, int x) { return texelFetch(u_weights, row + x); }
void begin_weights() {}
#else
#define WEIGHTS_ROW vec2
WEIGHTS_ROW weights_row(int slice, int ky) {
    return (vec2(0, slice * KH + ky) + 0.5) * weights_texel_size;
}
WEIGHTS_ROW rows_down(WEIGHTS_ROW row, int n) {
    return row + vec2(0.0, float(n) * weights_texel_size.y);
}
vec4 weights_texel(WEIGHTS_ROW row, int x) {
    return textureLod(u_weights, row + vec2(float(x) * weights_texel_size.x, 0.0), 0.0);
}
void begin_weights() { weights_texel_size = 1.0 / vec2(textureSize(u_weights, 0)); }
#endif

// FILTERS_TRANSPOSED (DENSE, one group; glcnn/ops/conv.py): the texture holds the layout of
// the other kind of conv on the same weight array, whose output channels are this conv's
// inputs and whose inputs are its outputs: the conv computing a layer's input gradient reads
// the layer's own filters (glcnn/train). Its output slice s is then that layout's input
// channels 4s..4s+3 (texels 4s*KW + kx + i*KW of a row) and its input slice c/4 that
// layout's output slice (rows (c/4)*KH + ky): the same 4 texels, read as the transpose.
// The row a DENSE tap of `slice` walks from: weights_row(slice, ky), or with
// FILTERS_TRANSPOSED input slice 0's.
WEIGHTS_ROW tap_row(int slice, int ky) {
#ifdef FILTERS_TRANSPOSED
    return weights_row(0, ky);
#else
    return weights_row(slice, ky);
#endif
}

// The weights from input channels c..c+3 (c a multiple of 4) to output slice `slice`'s 4
// channels at kernel column kx of tap row `row` = tap_row(slice, ky): out += W * in.
mat4 weights_block(WEIGHTS_ROW row, int slice, int c, int kx) {
#ifdef FILTERS_TRANSPOSED
    WEIGHTS_ROW r = rows_down(row, (c >> 2) * KH);
    int x = 4 * slice * KW + kx;
    return transpose(mat4(weights_texel(r, x), weights_texel(r, x + KW),
                          weights_texel(r, x + 2 * KW), weights_texel(r, x + 3 * KW)));
#else
    int x = c * KW + kx;
    return mat4(weights_texel(row, x), weights_texel(row, x + KW),
                weights_texel(row, x + 2 * KW), weights_texel(row, x + 3 * KW));
#endif
}

// Weights of input channel c at tap (ky, kx) for the 4 output channels of `slice`.
vec4 tap(int c, int slice, int ky, int kx) {
    return weights_texel(weights_row(slice, ky), c * KW + kx);
}
