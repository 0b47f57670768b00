// conv_grad_weight.glsl - dL/dW of a Conv or ConvTranspose (glcnn/train/grad_ops.py), written in
// the forward op's filter layout (layout.pack_filters): output texel (c*kw + kx, s*kh + ky) is
// the gradient of the weights of output channels 4s..4s+3 from input channel c of their group.
//     Conv:          sum over dZ's pixels (a, b) of dZ[o, a, b] * x[ci(o), a*s - p + ky*d, ..]
//     ConvTranspose: sum over x's pixels  (a, b) of x[ci(o), a, b] * dZ[o, a*s - p + ky*d, ..]
// with ci(o) = (o / Cog) * Cg + c. Rows u_rows.x .. u_rows.x + u_rows.y - 1 of the pixels summed
// only (the trainer adds the chunks by blending).
// Lane-blocked form (LANE_BLOCK, when the 4 lanes of an x texel are 4 input channels of one
// group: group 1, or Cg and Cog multiples of 4): fragment (q*kw + kx, s*kh + ky) sums the
// gradients of input channels 4q..4q+3 at once, one x texel and one dZ texel feeding 16
// multiply-adds (the plain form: 4), and writes channel 4q + j's to render target j (a layer of
// a texture array); conv_grad_weight_lanes.glsl then interleaves the layers into the layout.
// With BIAS_ROW fragments in rows past the layout's (u_bias_row) sum the bias gradient too.
// Defines: TRANSPOSED (the forward op is a ConvTranspose); LANE_BLOCK (with CUSTOM_MAIN and
//          BLOCKED_OUTPUT of BLOCK_X 4 or 8 (TAP_PAIRS), BLOCK_Y 1: frag_block); BIAS_ROW;
//          INPUT_BUFFER (x is a samplerBuffer holding its atlas texture row by row,
//          u_input_width texels a row: the trainer copies it there before the pass, as a
//          blocked conv's input; a fetch costs a quarter of a 2D sample on llvmpipe);
//          GRAD_BUFFER (dZ likewise, u_grad_width texels a row).
// Uniforms: u_input_shape, u_grad_shape, u_stride, u_dilation, u_pad (x, y), u_kernel (kw, kh),
//           u_groups (Cg, Cog, 1 if the 4 lanes of a slice read one input channel), u_rows,
//           u_pairs (TAP_PAIRS), u_bias_row (BIAS_ROW).
// Samplers: u_input (the forward input x), u_grad (dZ: the forward output's gradient before
//           its activation).

#ifdef INPUT_BUFFER
uniform samplerBuffer u_input;
uniform int u_input_width;
#else
uniform sampler2D u_input;
#endif
uniform ivec4 u_input_shape;
#ifdef GRAD_BUFFER
uniform samplerBuffer u_grad;
uniform int u_grad_width;
#else
uniform sampler2D u_grad;
#endif
uniform ivec4 u_grad_shape;
uniform ivec2 u_stride;
uniform ivec2 u_dilation;
uniform ivec2 u_pad;
uniform ivec2 u_kernel;
uniform ivec4 u_groups;
uniform ivec2 u_rows;

// floor(n / d) for any n and d >= 1.
int floor_div(int n, int d) { return n >= 0 ? n / d : -((d - 1 - n) / d); }

// The positions p (a row or a column) of the summed tensor, within [lo, hi), whose strided
// position p * stride + offset lies in [0, size): [first, last + 1).
ivec2 valid_range(int lo, int hi, int stride, int offset, int size) {
    int first = max(lo, -floor_div(offset, stride));  // ceil(-offset / stride)
    int last = min(hi - 1, floor_div(size - 1 - offset, stride));
    return ivec2(first, last + 1);
}

// The atlas texel of pixel p of channel `channel` of `shape`, and the one-hot lane mask.
ivec2 channel_origin(ivec4 shape, int channel, out vec4 lane) {
    lane = vec4(equal(ivec4(0, 1, 2, 3), ivec4(channel - channel / 4 * 4)));
    return tile_origin(shape, channel / 4);
}

// Texel p of x's atlas: from the buffer, or a NEAREST sample at its centre (sample_texel in
// common.glsl: texelFetch's value, about twice as fast on llvmpipe, DESIGN.md section 5).
vec4 input_texel(ivec2 p) {
#ifdef INPUT_BUFFER
    return texelFetch(u_input, p.y * u_input_width + p.x);
#else
    return sample_texel(u_input, 1.0 / vec2(textureSize(u_input, 0)), p);
#endif
}

vec4 grad_pixel(ivec2 p) {  // texel p of dZ's atlas, likewise
#ifdef GRAD_BUFFER
    return texelFetch(u_grad, p.y * u_grad_width + p.x);
#else
    return sample_texel(u_grad, 1.0 / vec2(textureSize(u_grad, 0)), p);
#endif
}

// The pixels summed for kernel tap (kx, ky) of output slice s (rows, cols: [first, last + 1)),
// where the dZ texel of summed position (b, a) is (grad_origin + (b, a) * grad_scale, read by
// grad_texel) and x's, relative to the x slice's tile origin ((b, a) * input_scale +
// input_shift).
struct Terms {
    ivec2 rows, cols;
    ivec2 grad_origin, grad_scale;
    vec2 grad_base, grad_step;  // the same in texture coordinates, for a 2D u_grad
    ivec2 input_scale, input_shift;
    ivec2 offset;  // (kx, ky) * dilation - pad: the strided position of summed position 0
};

Terms terms(int s, int kx, int ky) {
    Terms t;
#ifdef TRANSPOSED
    ivec4 summed = u_input_shape, strided = u_grad_shape;
#else
    ivec4 summed = u_grad_shape, strided = u_input_shape;
#endif
    ivec2 offset = ivec2(kx, ky) * u_dilation - u_pad;
    t.offset = offset;
    t.rows = valid_range(u_rows.x, min(u_rows.x + u_rows.y, summed.y), u_stride.y, offset.y,
                         strided.y);
    t.cols = valid_range(0, summed.z, u_stride.x, offset.x, strided.z);
#ifdef TRANSPOSED
    t.grad_scale = u_stride;
    t.grad_origin = tile_origin(u_grad_shape, s) + offset;
    t.input_scale = ivec2(1);
    t.input_shift = ivec2(0);
#else
    t.grad_scale = ivec2(1);
    t.grad_origin = tile_origin(u_grad_shape, s);
    t.input_scale = u_stride;
    t.input_shift = offset;
#endif
#ifndef GRAD_BUFFER
    vec2 inv_grad = 1.0 / vec2(textureSize(u_grad, 0));
    t.grad_base = (vec2(t.grad_origin) + 0.5) * inv_grad;
    t.grad_step = vec2(t.grad_scale) * inv_grad;
#endif
    return t;
}

// dZ's texel at summed position (b, a): a buffer fetch, or a NEAREST sample at its centre
// (sample_texel in common.glsl: texelFetch's value, about twice as fast on llvmpipe).
vec4 grad_texel(Terms t, int a, int b) {
#ifdef GRAD_BUFFER
    return grad_pixel(t.grad_origin + ivec2(b, a) * t.grad_scale);
#else
    return textureLod(u_grad, t.grad_base + vec2(b, a) * t.grad_step, 0.0);
#endif
}

#ifdef BIAS_ROW
uniform ivec2 u_bias_row;  // (first row, width) of the fragments summing the bias gradient

// The bias gradient of output slice s (layer 0 of fragment (s mod w, row + s div w), u_bias_row
// = (row, w)): Σ dZ over this draw's chunk of summed rows; for a ConvTranspose over the dZ rows
// from stride * its first x row to stride * the next chunk's (to the end in the last chunk).
vec4 bias_gradient(int s) {
    if (s >= (u_grad_shape.x + 3) / 4) return vec4(0.0);
#ifdef TRANSPOSED
    bool last = u_rows.x + u_rows.y >= u_input_shape.y;
    int first = min(u_rows.x * u_stride.y, u_grad_shape.y);
    int end = last ? u_grad_shape.y : min((u_rows.x + u_rows.y) * u_stride.y, u_grad_shape.y);
#else
    int first = u_rows.x, end = min(u_rows.x + u_rows.y, u_grad_shape.y);
#endif
    ivec2 origin = tile_origin(u_grad_shape, s);
    vec4 acc = vec4(0.0);
    for (int a = first; a < end; ++a) {
        for (int b = 0; b < u_grad_shape.z; ++b) acc += grad_pixel(origin + ivec2(b, a));
    }
    return acc;
}
#endif

#ifdef LANE_BLOCK
// Input channels 4q..4q+3's gradients `acc` to render targets 0-3; with BIAS_ROW, in fragments
// past the layout's rows (where acc is zero), the bias gradient in target 0.
void write_lanes(mat4 acc, ivec2 p) {
#ifdef BIAS_ROW
    if (p.y >= u_bias_row.x) acc[0] = bias_gradient((p.y - u_bias_row.x) * u_bias_row.y + p.x);
#endif
    frag_block[0] = acc[0];
    frag_block[1] = acc[1];
    frag_block[2] = acc[2];
    frag_block[3] = acc[3];
}
#endif

#ifdef TAP_PAIRS
// Kernel columns kx and kx + m of 4 input channels (TAP_PAIRS; m * dilation = stride): the
// strided tensor's column that kx + m reads at summed column b is the one kx reads at b + 1, so
// a sweep along b fetches each strided texel once and each summed texel once for both columns
// (half the fetches of one column per fragment), writing kx's to render targets 0-3 and
// kx + m's to 4-7. Strided columns outside the tensor read zero (the fetch is clamped into it).
uniform ivec2 u_pairs;  // (m, P): ConvGradWeight.tap_pairs

// The strided tensor's texel at (column `col`, row a of the summed tensor) for tap row ky of
// output slice s (x's channels from `origin`), zero outside its columns.
vec4 strided_texel(ivec2 origin, Terms t, int a, int col) {
#ifdef TRANSPOSED
    ivec4 shape = u_grad_shape;
#else
    ivec4 shape = u_input_shape;
#endif
    bool inside = uint(col) < uint(shape.z);
    int column = clamp(col, 0, shape.z - 1);
#ifdef TRANSPOSED
    vec4 v = grad_pixel(ivec2(t.grad_origin.x - t.offset.x + column,
                              t.grad_origin.y + a * t.grad_scale.y));
#else
    vec4 v = input_texel(origin + ivec2(column, a * t.input_scale.y + t.input_shift.y));
#endif
    return inside ? v : vec4(0.0);
}

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    int q = p.x / u_pairs.y;
    int i = p.x - q * u_pairs.y;
    int m = u_pairs.x;
    int kx = i / m * 2 * m + i % m;  // the pair's first column; the second is kx + m
    int s = p.y / u_kernel.y;
    mat4 acc = mat4(0.0), acc2 = mat4(0.0);  // column j: input channel 4q + j's gradients
    if (4 * q < u_groups.x && s < (u_grad_shape.x + 3) / 4) {
        int first = 4 * s / u_groups.y * u_groups.x + 4 * q;
        ivec2 origin = tile_origin(u_input_shape, first / 4);
        Terms t = terms(s, kx, p.y - s * u_kernel.y);
        bool second = kx + m < u_kernel.x;
        Terms t2 = terms(s, second ? kx + m : kx, p.y - s * u_kernel.y);
        int lo = min(t.cols.x, t2.cols.x), hi = max(t.cols.y, t2.cols.y);
        for (int a = t.rows.x; a < t.rows.y; ++a) {
            int col = lo * u_stride.x + t.offset.x;  // kx's strided column at b = lo
            vec4 cur = strided_texel(origin, t, a, col);
            for (int b = lo; b < hi; ++b) {
                col += u_stride.x;
                vec4 next = strided_texel(origin, t, a, col);
#ifdef TRANSPOSED
                vec4 x = input_texel(origin + ivec2(b, a));
                acc += outerProduct(cur, x);
                acc2 += outerProduct(next, x);
#else
                vec4 g = grad_texel(t, a, b);
                acc += outerProduct(g, cur);
                acc2 += outerProduct(g, next);
#endif
                cur = next;
            }
        }
    }
    write_lanes(acc, p);
    acc2 = kx + m < u_kernel.x ? acc2 : mat4(0.0);  // a pair of one column
    frag_block[4] = acc2[0];
    frag_block[5] = acc2[1];
    frag_block[6] = acc2[2];
    frag_block[7] = acc2[3];
}
#elif defined(LANE_BLOCK)
void main() {
    ivec2 p = ivec2(gl_FragCoord.xy);
    int q = p.x / u_kernel.x;
    int s = p.y / u_kernel.y;
    mat4 acc = mat4(0.0);  // column j: input channel 4q + j's gradients of output slice s
    if (4 * q < u_groups.x && s < (u_grad_shape.x + 3) / 4) {
        // The group's first input channel plus 4q: a multiple of 4 (see the header).
        int first = 4 * s / u_groups.y * u_groups.x + 4 * q;
        ivec2 origin = tile_origin(u_input_shape, first / 4);
        Terms t = terms(s, p.x - q * u_kernel.x, p.y - s * u_kernel.y);
        for (int a = t.rows.x; a < t.rows.y; ++a) {
            for (int b = t.cols.x; b < t.cols.y; ++b) {
                vec4 g = grad_texel(t, a, b);
                acc += outerProduct(g, input_texel(origin + ivec2(b, a) * t.input_scale
                                                   + t.input_shift));
            }
        }
    }
    write_lanes(acc, p);
}
#else
vec4 compute(int slice, int y, int x) {
    int c = x / u_kernel.x;
    int s = y / u_kernel.y;
    if (c >= u_groups.x) return vec4(0.0);  // a DENSE layout's padding columns
    // Input channel of each lane (clamped: lanes past Co have a zero gradient).
    ivec4 ci = min((4 * s + ivec4(0, 1, 2, 3)) / u_groups.y * u_groups.x + c,
                   ivec4(u_input_shape.x - 1));
    mat4 lanes;  // column j: the one-hot mask of lane j's input channel
    ivec2 o0 = channel_origin(u_input_shape, ci.x, lanes[0]);
    ivec2 o1 = channel_origin(u_input_shape, ci.y, lanes[1]);
    ivec2 o2 = channel_origin(u_input_shape, ci.z, lanes[2]);
    ivec2 o3 = channel_origin(u_input_shape, ci.w, lanes[3]);
    Terms t = terms(s, x - c * u_kernel.x, y - s * u_kernel.y);
    vec4 acc = vec4(0.0);
    for (int a = t.rows.x; a < t.rows.y; ++a) {
        for (int b = t.cols.x; b < t.cols.y; ++b) {
            vec4 g = grad_texel(t, a, b);
            ivec2 at = ivec2(b, a) * t.input_scale + t.input_shift;
            vec4 x0 = input_texel(o0 + at);
            if (u_groups.z != 0) {
                acc += g * dot(x0, lanes[0]);
            } else {
                acc += g * vec4(dot(x0, lanes[0]), dot(input_texel(o1 + at), lanes[1]),
                                dot(input_texel(o2 + at), lanes[2]),
                                dot(input_texel(o3 + at), lanes[3]));
            }
        }
    }
    return acc;
}
#endif
