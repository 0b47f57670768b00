// reduce.glsl - mean, sum or max over H, W or both per channel, or over the channels per
// pixel (glcnn/ops/reduce.py):
//   y[c] = mean_p t(x[c, p])  or  max_p t(x[c, p])  over the n reduced positions p, where
//   t(v) = v, or with SHIFT v - x[c, 0, 0], and with VARIANCE additionally (. - m[c])^2.
// The output keeps size 1 on reduced axes. With both axes one fragment walks the whole
// plane, summing each row on its own before adding it (a two-level sum keeps float32
// error small); glcnn.passes.expand_reductions splits large planes into a W and an H pass.
// OVER_C: one fragment per pixel walks its slices (blocks of 32 summed on their own) and
// writes the result to lane 0 of the (1, H, W) output.
// Defines: OVER_C alone, or OVER_H, OVER_W (one or both); REDUCE_MAX, REDUCE_SUM (else
//          mean); SHIFT (subtract the channel's first value); VARIANCE (square the deviation
//          from u_center).
// Uniforms: u_input_shape, u_center_shape (VARIANCE).
// Samplers: u_input, u_center (VARIANCE: the (C, 1, 1) mean m of the shifted values).

#if !defined(OVER_C) && !defined(OVER_H) && !defined(OVER_W)
#error reduce.glsl needs OVER_C, OVER_H, OVER_W or both of the last two
#endif
#if defined(OVER_C) && (defined(OVER_H) || defined(OVER_W) || defined(SHIFT))
#error reduce.glsl: OVER_C goes alone and without SHIFT
#endif

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
#ifdef VARIANCE
uniform sampler2D u_center;
uniform ivec4 u_center_shape;
#endif

// What one input texel contributes; `shift` and `center` are what SHIFT and VARIANCE subtract.
vec4 term(int slice, int y, int x, vec4 shift, vec4 center) {
    vec4 v = fetch(u_input, u_input_shape, slice, y, x);
#ifdef SHIFT
    v -= shift;  // exact when v and shift are within a factor 2 (Sterbenz)
#endif
#ifdef VARIANCE
    v -= center;
    v *= v;
#endif
    return v;
}

vec4 combine(vec4 acc, vec4 v) {
#ifdef REDUCE_MAX
    return max(acc, v);
#else
    return acc + v;
#endif
}

// Combine the n texels (y, x), (y, x) + step, ... of one row or column.
vec4 line(int slice, int y, int x, ivec2 step, int n, vec4 shift, vec4 center) {
    vec4 acc = term(slice, y, x, shift, center);
    for (int i = 1; i < n; ++i) {
        acc = combine(acc, term(slice, y + i * step.y, x + i * step.x, shift, center));
    }
    return acc;
}

#ifdef OVER_C
const int BLOCK = 32;  // slices combined on their own before adding
#  ifdef REDUCE_MAX
const float EMPTY = -3.4e38;  // what lanes past C contribute: never the max, nothing to a sum
#  else
const float EMPTY = 0.0;
#  endif

vec4 compute(int slice, int y, int x) {
    int c = u_input_shape.x;
    int slices = (c + 3) / 4;
    vec4 acc = vec4(EMPTY);
    for (int first = 0; first < slices; first += BLOCK) {
        vec4 part = vec4(EMPTY);
        for (int t = first; t < min(first + BLOCK, slices); ++t) {
            bvec4 real = lessThan(4 * t + ivec4(0, 1, 2, 3), ivec4(c));
            part = combine(part, mix(vec4(EMPTY), fetch(u_input, u_input_shape, t, y, x), real));
        }
        acc = combine(acc, part);
    }
#  if defined(REDUCE_MAX)
    return vec4(max(max(acc.x, acc.y), max(acc.z, acc.w)), 0.0, 0.0, 0.0);
#  elif defined(REDUCE_SUM)
    return vec4(dot(acc, vec4(1.0)), 0.0, 0.0, 0.0);
#  else
    return vec4(dot(acc, vec4(1.0)) / float(c), 0.0, 0.0, 0.0);
#  endif
}

#else
vec4 compute(int slice, int y, int x) {
    int h = u_input_shape.y;
    int w = u_input_shape.z;
    vec4 shift = fetch(u_input, u_input_shape, slice, 0, 0);
    vec4 center = vec4(0.0);
#ifdef VARIANCE
    center = fetch(u_center, u_center_shape, slice, 0, 0);
#endif
#if defined(OVER_H) && defined(OVER_W)
    vec4 acc = line(slice, 0, 0, ivec2(1, 0), w, shift, center);
    for (int iy = 1; iy < h; ++iy) {
        acc = combine(acc, line(slice, iy, 0, ivec2(1, 0), w, shift, center));
    }
    int n = h * w;
#elif defined(OVER_W)
    vec4 acc = line(slice, y, 0, ivec2(1, 0), w, shift, center);
    int n = w;
#else
    vec4 acc = line(slice, 0, x, ivec2(0, 1), h, shift, center);
    int n = h;
#endif
#if defined(REDUCE_MAX) || defined(REDUCE_SUM)
    return acc;
#else
    return acc / float(n);
#endif
}
#endif
