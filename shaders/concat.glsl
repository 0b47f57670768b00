// concat.glsl - ONNX Concat along C, H or W: y[c] = x_i[c - u_end[i - 1]] for the input i
// with u_end[i - 1] <= c < u_end[i] (u_end[-1] taken as 0), along H and W alike. Any sizes.
// Defines: INPUTS (1..8); ALONG_H or ALONG_W (concatenate rows or columns: each output texel
//          is one whole texel of one input); else the channel axis, with ALIGNED (every input
//          but the last has a multiple of 4 channels, so an output slice is one whole input
//          slice; otherwise each lane is looked up alone).
// Uniforms: u_end[INPUTS] (running totals along the axis), u_input<i>_shape.
// Samplers: u_input0 .. u_input<INPUTS-1> (GLSL 330 cannot index samplers by a variable,
//           hence one sampler each and the switch below).

#ifndef INPUTS
#error concat.glsl needs INPUTS
#elif INPUTS < 1 || INPUTS > 8
#error concat.glsl needs INPUTS in 1..8
#elif defined(ALONG_H) + defined(ALONG_W) + defined(ALIGNED) > 1
#error concat.glsl takes at most one of ALONG_H, ALONG_W, ALIGNED
#endif

uniform int u_end[INPUTS];
uniform sampler2D u_input0;
uniform ivec4 u_input0_shape;
#if INPUTS > 1
uniform sampler2D u_input1;
uniform ivec4 u_input1_shape;
#endif
#if INPUTS > 2
uniform sampler2D u_input2;
uniform ivec4 u_input2_shape;
#endif
#if INPUTS > 3
uniform sampler2D u_input3;
uniform ivec4 u_input3_shape;
#endif
#if INPUTS > 4
uniform sampler2D u_input4;
uniform ivec4 u_input4_shape;
#endif
#if INPUTS > 5
uniform sampler2D u_input5;
uniform ivec4 u_input5_shape;
#endif
#if INPUTS > 6
uniform sampler2D u_input6;
uniform ivec4 u_input6_shape;
#endif
#if INPUTS > 7
uniform sampler2D u_input7;
uniform ivec4 u_input7_shape;
#endif

vec4 input_slice(int i, int slice, int y, int x) {
    switch (i) {
#if INPUTS > 1
        case 1: return fetch(u_input1, u_input1_shape, slice, y, x);
#endif
#if INPUTS > 2
        case 2: return fetch(u_input2, u_input2_shape, slice, y, x);
#endif
#if INPUTS > 3
        case 3: return fetch(u_input3, u_input3_shape, slice, y, x);
#endif
#if INPUTS > 4
        case 4: return fetch(u_input4, u_input4_shape, slice, y, x);
#endif
#if INPUTS > 5
        case 5: return fetch(u_input5, u_input5_shape, slice, y, x);
#endif
#if INPUTS > 6
        case 6: return fetch(u_input6, u_input6_shape, slice, y, x);
#endif
#if INPUTS > 7
        case 7: return fetch(u_input7, u_input7_shape, slice, y, x);
#endif
        default: return fetch(u_input0, u_input0_shape, slice, y, x);
    }
}

// (input, index within it) of output index c < u_end[INPUTS - 1] along the axis.
ivec2 locate(int c) {
    int i = 0;
    while (i < INPUTS - 1 && c >= u_end[i]) {
        ++i;
    }
    return ivec2(i, i > 0 ? c - u_end[i - 1] : c);
}

vec4 compute(int slice, int y, int x) {
#if defined(ALONG_H)
    ivec2 at = locate(y);
    return input_slice(at.x, slice, at.y, x);
#elif defined(ALONG_W)
    ivec2 at = locate(x);
    return input_slice(at.x, slice, y, at.y);
#elif defined(ALIGNED)
    ivec2 at = locate(4 * slice);
    return input_slice(at.x, at.y / 4, y, x);
#else
    vec4 v = vec4(0.0);
    for (int lane = 0; lane < 4; ++lane) {
        int c = 4 * slice + lane;
        if (c < u_end[INPUTS - 1]) {
            ivec2 at = locate(c);
            v[lane] = input_slice(at.x, at.y / 4, y, x)[at.y % 4];
        }
    }
    return v;
#endif
}
