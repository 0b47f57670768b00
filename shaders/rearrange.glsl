// rearrange.glsl - Rearrange (glcnn/ops/rearrange.py): a general element gather. Output
// element o = (c*H' + y)*W' + x is unravelled row-major by the last RANK entries of u_dims
// into (i_0..i_k), giving f = u_offset + sum i_k * u_strides[k]; with RANK2 > 0, f is unravelled
// by the last RANK2 entries of u_dims2 the same way into g = sum j_k * u_strides2[k] (else
// g = f). The output element is input element (g div (H*W), (g div W) mod H, g mod W).
// Every operand is >= 0 and every value < 2^31 (checked by the op), so integer division and
// modulo are defined; dims are >= 1.
// Defines: RANK (1..6), RANK2 (0..6): the dims in use per stage (constant loop bounds: the
//          uniform ranks this replaced made the pass 2x slower on llvmpipe);
//          SMALL_INDICES (every index < 2^21: divide in float with common.glsl's div_floor,
//          exact there; llvmpipe runs integer division lane by lane, ~2x slower here).
// Uniforms: u_dims[6], u_strides[6] (right-aligned: the outermost in use is [6 - RANK]),
//           u_offset; u_dims2[6], u_strides2[6] (likewise); u_input_shape.
// Samplers: u_input.

#if !defined(RANK) || !defined(RANK2)
#error rearrange.glsl needs RANK and RANK2
#elif RANK < 1 || RANK > 6 || RANK2 < 0 || RANK2 > 6
#error rearrange.glsl needs RANK in 1..6 and RANK2 in 0..6
#endif

uniform sampler2D u_input;
uniform ivec4 u_input_shape;
uniform int u_dims[6];
uniform int u_strides[6];
uniform int u_offset;
uniform int u_dims2[6];
uniform int u_strides2[6];

int quotient(int a, int b) {
#ifdef SMALL_INDICES
    return div_floor(a, b);
#else
    return a / b;
#endif
}

// u_offset + sum_k i_k * u_strides[k], (i_k) = `index` unravelled by the last RANK dims.
int first_stage(int index) {
    int sum = u_offset;
    for (int k = 5; k > 6 - RANK; --k) {
        int q = quotient(index, u_dims[k]);
        sum += (index - q * u_dims[k]) * u_strides[k];
        index = q;
    }
    return sum + index * u_strides[6 - RANK];  // the outermost index is what is left
}

// Input flat index g of output element `o`.
int index_of(int o) {
#if RANK2 > 0
    int f = first_stage(o);
    int sum = 0;
    for (int k = 5; k > 6 - RANK2; --k) {
        int q = quotient(f, u_dims2[k]);
        sum += (f - q * u_dims2[k]) * u_strides2[k];
        f = q;
    }
    return sum + f * u_strides2[6 - RANK2];
#else
    return first_stage(o);
#endif
}

// Input element g as (channel, y, x).
ivec3 element(int g) {
    int plane = u_input_shape.y * u_input_shape.z;
    int c = quotient(g, plane);
    int r = g - c * plane;
    int y = quotient(r, u_input_shape.z);
    return ivec3(c, y, r - y * u_input_shape.z);
}

vec4 compute(int slice, int y, int x) {
    int lanes = min(u_out.x - 4 * slice, 4);
    int o = (4 * slice * u_out.y + y) * u_out.z + x;
    int in_plane = u_input_shape.y * u_input_shape.z;
    ivec4 g = ivec4(index_of(o)) + ivec4(0, 1, 2, 3) * in_plane;  // lanes past C' as if whole
    for (int lane = 1; lane < 4; ++lane) {
        if (lane < lanes) g[lane] = index_of(o + lane * u_out.y * u_out.z);
    }
    ivec3 at = element(g.x);
    if (at.x % 4 == 0 && g == g.x + ivec4(0, 1, 2, 3) * in_plane) {
        // 4 consecutive input channels at one (y, x), as when a move keeps channels together:
        // one texel (64x128x128 H/W swap on llvmpipe: 5.2 -> 4.3 ms).
        return fetch(u_input, u_input_shape, at.x / 4, at.y, at.z);
    }
    vec4 v = vec4(0.0);
    for (int lane = 0; lane < 4; ++lane) {
        if (lane < lanes) {
            ivec3 e = element(g[lane]);
            v[lane] = fetch_channel(u_input, u_input_shape, e.x, e.y, e.z);
        }
    }
    return v;
}
