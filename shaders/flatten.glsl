// flatten.glsl - Flatten / Reshape to a vector (glcnn/ops/flatten.py): output feature
// f = c*H*W + h*W + w of the (C*H*W, 1, 1) result is x[c, h, w] (C order, as ONNX/numpy).
// Each output texel gathers its 4 features one channel at a time.
// Defines: IDENTITY (output shape = input shape: copy each texel).
// Uniforms: u_input_shape.
// Samplers: u_input.

uniform sampler2D u_input;
uniform ivec4 u_input_shape;

// Feature f of the flattened input.
float feature(int f) {
    int plane = u_input_shape.y * u_input_shape.z;
    int r = f % plane;
    return fetch_channel(u_input, u_input_shape, f / plane, r / u_input_shape.z,
                         r % u_input_shape.z);
}

vec4 compute(int slice, int y, int x) {
#ifdef IDENTITY
    return fetch(u_input, u_input_shape, slice, y, x);
#else
    int f = 4 * slice;
    return vec4(feature(f), feature(f + 1), feature(f + 2), feature(f + 3));
#endif
}
