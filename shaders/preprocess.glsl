// preprocess.glsl - camera/video frame -> model input tensor, entirely on the GPU
// (glcnn/viewer.py): bilinear resize (mipmapped, so large frames do not alias), channel
// order, value range and mean/std normalisation.
// y[c] = (frame(uv)[order[c]] * (hi - lo) + lo - mean[c]) / std[c],  uv at texel centres.
// Defines: GRAY (one-channel models: Rec. 601 luma).
// Uniforms: u_bgr (1 swaps R and B), u_range (lo, hi), u_mean, u_std.
// Samplers: u_frame (RGBA8 frame, row 0 = top of the image, linear + mipmaps).

uniform sampler2D u_frame;
uniform int u_bgr;
uniform vec2 u_range;
uniform vec4 u_mean;
uniform vec4 u_std;

vec4 compute(int slice, int y, int x) {
    vec2 uv = (vec2(x, y) + 0.5) / vec2(u_out.zy);
    vec3 rgb = texture(u_frame, uv).rgb;
    rgb = u_bgr == 1 ? rgb.bgr : rgb;
#ifdef GRAY
    vec4 v = vec4(dot(rgb, vec3(0.299, 0.587, 0.114)), 0.0, 0.0, 0.0);
#else
    vec4 v = vec4(rgb, 0.0);
#endif
    return (v * (u_range.y - u_range.x) + u_range.x - u_mean) / u_std;
}
