// sampler_prime.glsl - samples one texel on each of texture units 0-15, once per context
// (glcnn.runtime.context.Context._prime_samplers), so that llvmpipe's sampler state of every
// unit is glcnn's (NEAREST, clamped) before any glcnn program draws. llvmpipe keys a compiled
// fragment shader on the sampler state of the units it reads even where that state does not
// change the code, e.g. a unit read through a buffer texture, whose state is whatever an
// earlier draw left there (none, before any 2D texture was sampled on it). Without this, a
// blocked conv compiled once in a pipeline's first run and again in its second (rapid
// orientation: second run 0.8 s against 0.06 s steady).
// Defines: CUSTOM_MAIN. Samplers: u_units[16] (sampler2D), unit i on u_units[i].

#ifndef CUSTOM_MAIN
#error sampler_prime.glsl needs CUSTOM_MAIN (it has its own main())
#endif

uniform sampler2D u_units[16];

void main() {
    frag_color = vec4(0.0);
#for i < 16 unroll 16
    frag_color += textureLod(u_units[i], vec2(0.5), 0.0);
#endfor
}
