// resize_grad.glsl - dL/dx of ONNX Resize / Upsample on H and W, nearest or bilinear
// (glcnn/train/grad_ops.py, ResizeGrad): the forward's adjoint,
//   dx[c, i, j] = sum over outputs (o, q) of a_y(o, i) * a_x(q, j) * dY[c, o, q],
// a(o, i) the weight output o gives input i in the forward: NEAREST 1 at its tap i0; LINEAR
// 1 - t at i0 and t at i1 (both when i0 = i1 at an edge).
// Defines: NEAREST | LINEAR.
// Uniforms: u_grad_shape (dY), u_reach (x, y: the most outputs one input column / row spans).
// Samplers: u_grad (dY); u_coords (the forward table: texel (q, 0) for output column q, (o, 1)
//           for output row o, each (i0, i1, t, 0)); u_span (texel (j, 0) for input column j,
//           (i, 1) for input row i: (first output reading it, outputs from there, 0, 0)).

#if defined(NEAREST) == defined(LINEAR)
#error resize_grad.glsl needs exactly one of NEAREST and LINEAR
#endif

uniform sampler2D u_grad;
uniform ivec4 u_grad_shape;
uniform sampler2D u_coords;
uniform sampler2D u_span;
uniform ivec2 u_reach;

// The weight output entry `taps` (i0, i1, t) gives input index i.
float weight(vec4 taps, int i) {
    ivec2 at = ivec2(taps.xy);
#ifdef NEAREST
    return at.x == i ? 1.0 : 0.0;
#else
    return (at.x == i ? 1.0 - taps.z : 0.0) + (at.y == i ? taps.z : 0.0);
#endif
}

vec4 compute(int slice, int iy, int ix) {
    ivec2 cols = ivec2(texelFetch(u_span, ivec2(ix, 0), 0).xy);
    ivec2 rows = ivec2(texelFetch(u_span, ivec2(iy, 1), 0).xy);
    vec4 acc = vec4(0.0);
    for (int a = 0; a < u_reach.y; ++a) {
        if (a >= rows.y) break;
        int o = rows.x + a;
        float wy = weight(texelFetch(u_coords, ivec2(o, 1), 0), iy);
        for (int b = 0; b < u_reach.x; ++b) {
            if (b >= cols.y) break;
            int q = cols.x + b;
            float w = wy * weight(texelFetch(u_coords, ivec2(q, 0), 0), ix);
            acc += w * fetch(u_grad, u_grad_shape, slice, o, q);
        }
    }
    return acc;
}
