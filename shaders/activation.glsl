// activation.glsl - a standalone activation: reads x, and the shared epilogue in common.glsl
// applies the ACT_* function selected by define (the same code a fused conv uses). With a
// MATH_* define it first computes unary math (glcnn/ops/activation.py, Math), not fusable.
// Defines: at most one of MATH_SQRT, MATH_ERF, MATH_POW.
// Uniforms: u_input_shape, u_act; MATH_POW: u_exponent (p), u_pow (form, |p| up to 16, odd).
// Samplers: u_input.

#if defined(MATH_SQRT) + defined(MATH_ERF) + defined(MATH_POW) > 1
#error activation.glsl takes at most one of MATH_SQRT, MATH_ERF and MATH_POW
#endif

uniform sampler2D u_input;
uniform ivec4 u_input_shape;

const float FLT_MIN = 1.17549435e-38;  // smallest normal float: below it a driver may flush

#if defined(MATH_ERF)
// erf(x) to 1.7e-7 relative in float32 (fitted near-minimax, checked against math.erf):
// |x| < 1: x·P(x²); 1 ≤ |x| < 4: 1 − exp(Q(|x| − 2.5)), Q ≈ log erfc; beyond, erfc(4) = 1.5e-8
// is below half an ulp of 1.
vec4 erf(vec4 x) {
    vec4 a = abs(x), t = a * a;
    vec4 p = vec4(7.889108902e-05);
    p = p * t - 8.020838099e-04;
    p = p * t + 5.189534983e-03;
    p = p * t - 2.685444441e-02;
    p = p * t + 1.128360017e-01;
    p = p * t - 3.761262714e-01;
    p = p * t + 1.128379166e+00;
    vec4 u = clamp(a, 1.0, 4.0) - 2.5;
    vec4 q = vec4(1.599829706e-06);
    q = q * u - 1.330171626e-05;
    q = q * u + 7.745487605e-05;
    q = q * u - 4.201730975e-04;
    q = q * u + 2.165081576e-03;
    q = q * u - 1.085848738e-02;
    q = q * u - 9.438936084e-01;
    q = q * u - 5.352680689e+00;
    q = q * u - 7.806815279e+00;
    vec4 large = mix(1.0 - exp(q), vec4(1.0), greaterThanEqual(a, vec4(4.0)));
    vec4 y = mix(a * p, large, greaterThanEqual(a, vec4(1.0)));
    return mix(y, -y, lessThan(x, vec4(0.0)));
}
#endif

#if defined(MATH_POW)
uniform float u_exponent;
uniform ivec4 u_pow;  // (form, |p| for POW_MULTIPLY, p is an odd integer, 0)
#define POW_ONE 0
#define POW_SQRT 1
#define POW_MULTIPLY 2
#define POW_INTEGER 3
#define POW_REAL 4

// x^p without pow(): GLSL leaves pow(x, y) undefined for x < 0 and for x = 0, y <= 0, and
// need not produce Inf on overflow; the definitions are glcnn/ops/activation.py's.
vec4 power(vec4 x) {
    if (u_pow.x == POW_ONE) return vec4(1.0);
    vec4 a = u_pow.x == POW_REAL || u_pow.x == POW_SQRT ? max(x, 0.0) : abs(x);
    bvec4 zero = lessThan(a, vec4(FLT_MIN));
    a = max(a, FLT_MIN);  // zeros are answered below; no log2(0)
    vec4 l = u_exponent * log2(a);
    vec4 m;
    if (u_pow.x == POW_SQRT) {
        m = sqrt(a);
    } else if (u_pow.x == POW_MULTIPLY) {
        vec4 b = u_exponent < 0.0 ? 1.0 / a : a;
        m = b;
        for (int i = 1; i < 16; ++i) {
            if (i >= u_pow.y) break;
            m *= b;
        }
    } else {
        m = exp2(min(l, 127.0));
    }
    vec4 inf = vec4(uintBitsToFloat(0x7F800000u));
    m = mix(m, inf, greaterThanEqual(l, vec4(128.0)));
    m = mix(m, u_exponent < 0.0 ? inf : vec4(0.0), zero);
    // Odd p keeps the sign, except of the zeros: subnormal x, flushed or not, gives +0 or +Inf.
    bvec4 negative = equal(ivec4(lessThan(x, vec4(0.0))) - ivec4(zero), ivec4(1));
    return u_pow.z != 0 ? mix(m, -m, negative) : m;
}
#endif

vec4 compute(int slice, int y, int x) {
    vec4 v = fetch(u_input, u_input_shape, slice, y, x);
#if defined(MATH_SQRT)
    return sqrt(max(v, 0.0));
#elif defined(MATH_ERF)
    return erf(v);
#elif defined(MATH_POW)
    return power(v);
#else
    return v;
#endif
}
