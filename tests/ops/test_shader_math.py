"""common.glsl's integer helpers, checked on the GL against GLSL's own integer division."""

import moderngl
import numpy as np

from glcnn.resources import resource_path
from glcnn.runtime.shaders import spliced

# Every a < 2^16 (a texel coordinate or slice of any texture glcnn makes) against every divisor
# up to 1024 and a few larger ones: the count of a where div_floor differs from a / b.
CHECK = """
uniform int u_b_last;
void main() {
    int a = int(gl_FragCoord.y) * 256 + int(gl_FragCoord.x);
    int wrong = 0;
    for (int b = 1; b <= u_b_last; ++b) {
        wrong += int(div_floor(a, b) != a / b);
        wrong += int(div_floor(ivec2(a, 65535 - a), ivec2(b)) != ivec2(a, 65535 - a) / b);
        ivec4 v = ivec4(a, 65535 - a, a / 2, a / 3);
        wrong += int(div_floor(v, b) != v / b);
    }
    for (int k = 0; k < 6; ++k) {
        int b = int[6](1999, 4096, 9999, 16384, 40000, 65535)[k];
        wrong += int(div_floor(a, b) != a / b);
    }
    frag_color = vec4(float(wrong), 0.0, 0.0, 1.0);
}
"""


def test_div_floor_is_integer_division_for_every_texel_coordinate(ctx):
    common = spliced("common.glsl")  # with its includes
    vertex = resource_path("shaders", "fullscreen.vert").read_text()
    program = ctx.gl.program(
        vertex_shader="#version 330 core\n" + vertex,
        fragment_shader="#version 330 core\n#define CUSTOM_MAIN 1\n" + common + CHECK)
    program["u_b_last"].value = 1024
    target = ctx.gl.texture((256, 256), 4, dtype="f4")
    fbo = ctx.gl.framebuffer(color_attachments=[target])
    vao = ctx.gl.vertex_array(program, [])
    try:
        fbo.use()
        vao.render(moderngl.TRIANGLES, vertices=3)
        wrong = np.frombuffer(fbo.read(components=4, dtype="f4"), np.float32)[::4]
        assert wrong.shape == (65536,)
        assert wrong.sum() == 0, f"{int((wrong > 0).sum())} values of a go wrong"
    finally:
        ctx.park()  # unbind the framebuffer before releasing it
        vao.release()
        fbo.release()
        target.release()
        program.release()
