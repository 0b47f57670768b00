// binary.glsl - elementwise Add / Sub / Mul / Div / Max / Min of the input and a second operand.
// Defines: OP_ARITH (Add, Sub, Mul, Max or Min, chosen by u_op) | OP_DIV;
//          OTHER_TENSOR (same shape), OTHER_CHANNEL ((C,1,1) tensor),
//          OTHER_CONSTANT (per-channel constant in u_params row 0),
//          OTHER_BROADCAST (two tensors, each axis the output's size or 1 on either side),
//          OTHER_ATLAS (a constant glcnn-shaped tensor u_const, broadcast likewise),
//          OTHER_UPSAMPLE (a tensor read at (y / u_upsample.y, x / u_upsample.x));
//          SWAP (OP_DIV: b / a instead of a / b, a constant divided by the input);
//          FIRST_GATE (the input times its (C, 1, 1) gate u_gate: an SE gate's Mul fused).
// Uniforms: u_input_shape, u_other_shape, u_const_shape (OTHER_ATLAS), u_upsample
//           (OTHER_UPSAMPLE: the whole factors (kx, ky)); u_op (OP_ARITH:
//           glcnn/ops/binary.py ARITH, b - a for a Sub with swap).
// Samplers: u_input, u_other | u_params | u_const; u_gate (FIRST_GATE, shape u_gate_shape).

#if defined(OP_ARITH) + defined(OP_DIV) != 1
#error binary.glsl needs exactly one of OP_ARITH and OP_DIV
#endif
#if defined(FIRST_GATE) && !defined(OTHER_TENSOR) && !defined(OTHER_UPSAMPLE)
#error FIRST_GATE reads the input at the output's shape: OTHER_TENSOR or OTHER_UPSAMPLE
#endif
#if defined(SWAP) && !defined(OP_DIV)
#error SWAP is OP_DIV's (OP_ARITH subtracts the other way by u_op)
#endif
#if defined(OTHER_TENSOR) + defined(OTHER_CHANNEL) + defined(OTHER_CONSTANT) + defined(OTHER_BROADCAST) + defined(OTHER_ATLAS) + defined(OTHER_UPSAMPLE) != 1
#error binary.glsl needs exactly one of OTHER_TENSOR, OTHER_CHANNEL, OTHER_CONSTANT, OTHER_BROADCAST, OTHER_ATLAS and OTHER_UPSAMPLE
#endif

#include "broadcast.glsl"

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
#if defined(OTHER_CONSTANT)
uniform sampler2D u_params;
#elif defined(OTHER_ATLAS)
uniform sampler2D u_const;
uniform ivec4 u_const_shape;
#else
uniform sampler2D u_other;
uniform ivec4 u_other_shape;
#endif
#ifdef OTHER_UPSAMPLE
uniform ivec2 u_upsample;
#endif
#ifdef FIRST_GATE
uniform sampler2D u_gate;
uniform ivec4 u_gate_shape;
#endif

vec4 first(int slice, int y, int x) {
#if defined(OTHER_BROADCAST) || defined(OTHER_ATLAS)
    return fetch_broadcast(u_input, u_input_shape, slice, y, x);
#elif defined(FIRST_GATE)
    return fetch(u_input, u_input_shape, slice, y, x) * fetch(u_gate, u_gate_shape, slice, 0, 0);
#else
    return fetch(u_input, u_input_shape, slice, y, x);
#endif
}

vec4 other(int slice, int y, int x) {
#if defined(OTHER_TENSOR)
    return fetch(u_other, u_other_shape, slice, y, x);
#elif defined(OTHER_UPSAMPLE)  // y, x >= 0: integer division is the floor
    return fetch(u_other, u_other_shape, slice, y / u_upsample.y, x / u_upsample.x);
#elif defined(OTHER_CHANNEL)
    return fetch(u_other, u_other_shape, slice, 0, 0);
#elif defined(OTHER_BROADCAST)
    return fetch_broadcast(u_other, u_other_shape, slice, y, x);
#elif defined(OTHER_ATLAS)
    return fetch_broadcast(u_const, u_const_shape, slice, y, x);
#else
    return channel_params(u_params, slice, 0);
#endif
}

#ifdef OP_ARITH
// The ops whose programs differ in one instruction share one (fewer programs to JIT: YOLOv8n's
// Add, Sub and Mul were 6 programs); u_op picks, the same value for every fragment.
uniform int u_op;  // 0 a + b, 1 a - b, 2 b - a, 3 a * b, 4 max(a, b), 5 min(a, b)

vec4 arith(vec4 a, vec4 b) {
    return u_op == 0 ? a + b : u_op == 1 ? a - b : u_op == 2 ? b - a
         : u_op == 3 ? a * b : u_op == 4 ? max(a, b) : min(a, b);
}
#else
const float FLT_MIN = 1.17549435e-38;  // smallest normal float: below it a driver may flush
const float FLT_MAX = 3.40282347e38;

// a / b defined for all finite a, b (glcnn/ops/binary.py): GLSL 3.30 leaves division by zero
// undefined and need not produce Inf, so zero (and subnormal) divisors and overflowing
// quotients never reach the division. uintBitsToFloat of the Inf pattern is Inf on every GL,
// and mix() with a bvec selects, so the Infs of lanes not chosen never meet arithmetic.
vec4 divide(vec4 a, vec4 b) {
    vec4 inf = vec4(uintBitsToFloat(0x7F800000u));
    vec4 inf_a = mix(inf, -inf, lessThan(a, vec4(0.0)));  // Inf with the sign of a
    bvec4 zero_a = lessThan(abs(a), vec4(FLT_MIN));
    bvec4 zero_b = lessThan(abs(b), vec4(FLT_MIN));
    // |a / b| > FLT_MAX, tested without overflowing: only possible when |b| < 1.
    bvec4 huge = greaterThan(abs(a), FLT_MAX * min(abs(b), vec4(1.0)));
    bvec4 special = greaterThan(ivec4(zero_b) + ivec4(huge), ivec4(0));
    vec4 q = a / mix(b, vec4(1.0), special);
    q = mix(q, mix(inf_a, -inf_a, lessThan(b, vec4(0.0))), huge);
    return mix(q, mix(inf_a, vec4(0.0), zero_a), zero_b);
}
#endif

vec4 compute(int slice, int y, int x) {
#ifdef SWAP
    vec4 a = other(slice, y, x);
    vec4 b = first(slice, y, x);
#else
    vec4 a = first(slice, y, x);
    vec4 b = other(slice, y, x);
#endif
#ifdef OP_ARITH
    return arith(a, b);
#else
    return divide(a, b);
#endif
}
