// resize.glsl - ONNX Resize / Upsample on H and W, nearest or bilinear.
// The source taps of every output column and row come precomputed (glcnn/ops/resize.py, exact
// arithmetic) in u_coords: texel (ox, 0) for column ox, (oy, 1) for row oy, each (i0, i1, t, 0).
//   NEAREST: y = x[iy0, ix0]
//   LINEAR:  y = mix(mix(x[iy0, ix0], x[iy0, ix1], tx), mix(x[iy1, ix0], x[iy1, ix1], tx), ty)
// Defines: NEAREST | LINEAR; with NEAREST, UPSCALE_Y and UPSCALE_X (whole factors: output pixel
//          (y, x) reads input (y / UPSCALE_Y, x / UPSCALE_X), computed here instead of read from
//          u_coords: one sample per pixel instead of three).
// Uniforms: u_input_shape.
// Samplers: u_input, u_coords (2 x max(OH, OW) table of taps).

#if defined(NEAREST) == defined(LINEAR)
#error resize.glsl needs exactly one of NEAREST and LINEAR
#endif

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
uniform sampler2D u_coords;

vec4 at(int slice, float y, float x) {
    return fetch(u_input, u_input_shape, slice, int(y), int(x));
}

#ifdef UPSCALE_X
vec4 compute(int slice, int oy, int ox) {
    ivec2 source = tile_origin(u_input_shape, slice) + ivec2(ox / UPSCALE_X, oy / UPSCALE_Y);
    vec2 inv_size = 1.0 / vec2(textureSize(u_input, 0));
    return decode(sample_texel(u_input, inv_size, source), u_input_shape, slice);
}
#else
vec4 compute(int slice, int oy, int ox) {
    vec4 cx = texelFetch(u_coords, ivec2(ox, 0), 0);
    vec4 cy = texelFetch(u_coords, ivec2(oy, 1), 0);
#ifdef NEAREST
    return at(slice, cy.x, cx.x);
#else
    vec4 top = mix(at(slice, cy.x, cx.x), at(slice, cy.x, cx.y), cx.z);
    vec4 bottom = mix(at(slice, cy.y, cx.x), at(slice, cy.y, cx.y), cx.z);
    return mix(top, bottom, cy.z);
#endif
}
#endif
