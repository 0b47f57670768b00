"""Any number of pipelines in one process: on the thread's default context, on contexts of
their own, on a wrapped moderngl context, used in any order
(glcnn/runtime/context.py "Sharing rule").
Every result is checked against the numpy reference (glcnn.graph.reference), not against glcnn."""

import os

import moderngl
import numpy as np
import pytest
from helpers import assert_close

import glcnn
from glcnn.graph import models
from glcnn.graph.builder import Builder
from glcnn.graph.reference import run as reference
from glcnn.resources import shader_text

pytestmark = pytest.mark.gl  # makes its own GL contexts


def _graphs():
    """Two small models of different kinds: conv/convT autoencoder; conv, residual add and
    a strided transposed conv (more programs, other texture sizes)."""
    b = Builder(seed=3)
    x = b.input("x", (5, 9, 7))
    h = b.conv(x, 6, 3, padding=1, activation="Relu", name="c1")
    h = b.add(h, b.conv(h, 6, 1, name="c2"), name="sum")
    other = b.build([b.conv_transpose(h, 3, 4, stride=2, padding=1, name="up")])
    return {"autoencoder": models.autoencoder((12, 16)), "other": other}


def _feeds(graph, seed):
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(s).astype(np.float32) for n, s in graph.inputs.items()}


def _check(pipe, feeds, what):
    expected = reference(pipe.graph, feeds)[pipe.graph.outputs[0]]
    y = pipe.run(feeds)
    assert_close(y, expected.reshape(y.shape), "fp32", what)


def _interleave(pipes: dict, rounds=2):
    feeds = {name: _feeds(p.graph, i) for i, (name, p) in enumerate(pipes.items())}
    for r in range(rounds):
        for name, p in pipes.items():
            _check(p, feeds[name], f"{name}, round {r}")


@pytest.fixture
def graphs():
    return _graphs()


def test_pipelines_without_ctx_share_the_thread_default(ctx, graphs):
    pipes = {name: glcnn.Pipeline(g) for name, g in graphs.items()}
    try:
        assert len({id(p.ctx) for p in pipes.values()}) == 1
        assert next(iter(pipes.values())).ctx is glcnn.Context.default()
        _interleave(pipes)
    finally:
        for p in pipes.values():
            p.release()


def test_pipelines_on_separate_contexts_run_in_any_order(ctx, graphs):
    """The case that failed: each pipeline on its own context, the last one made current."""
    contexts, pipes = [], {}
    for name, g in graphs.items():  # each context made (hence current) after the one before
        contexts.append(glcnn.Context())
        pipes[name] = glcnn.Pipeline(g, contexts[-1])
    pipes["on the test context"] = glcnn.Pipeline(graphs["other"], ctx)
    try:
        _interleave(pipes, rounds=3)
        first = pipes["autoencoder"]
        tex = first.texture(first.graph.outputs[0])  # usable right away: its context is current
        assert tex.read() == first.texture(first.graph.outputs[0]).read()
    finally:
        for p in pipes.values():
            p.release()
        for c in contexts:
            c.gl.release()


def test_loading_the_same_file_twice_runs_both(ctx, tmp_path):
    """The README's API snippet: two `glcnn.load`s, then the first model runs."""
    glcnn.save(models.autoencoder((8, 12)), tmp_path / "a.npz")
    a = glcnn.load(tmp_path / "a.npz")
    b = glcnn.load(tmp_path / "a.npz", precision="fp16")
    x = _feeds(a.graph, 5)
    expected = reference(a.graph, x)[a.graph.outputs[0]]
    for _ in range(2):
        assert_close(a.run(x), expected, "fp32", "first load")
        assert_close(b.run(x), expected, "fp16", "second load")
    a.release()
    b.release()


def test_wrapped_moderngl_context_shares_one_program_cache(ctx, graphs):
    gl = moderngl.create_context(standalone=True, require=330, backend="egl")
    try:
        first = glcnn.Pipeline(graphs["other"], gl)
        compiles = first.ctx.compiles
        second = glcnn.Pipeline(graphs["other"], gl)
        assert second.ctx is first.ctx and first.ctx is glcnn.Context.wrap(gl)
        assert first.ctx.compiles == compiles  # the second compiled nothing
        _interleave({"default": glcnn.Pipeline(graphs["autoencoder"]), "wrapped": first,
                     "wrapped again": second})
        first.release()
        second.release()
    finally:
        gl.release()


def test_a_program_source_is_built_once_per_shader_and_defines(monkeypatch, graphs):
    """Layers with the same shader and defines share a program: its source is assembled and
    hashed at the first request only (a pipeline asks once per pass)."""
    from glcnn.runtime import shaders
    built = []
    real = shaders.build_source
    monkeypatch.setattr(shaders, "build_source", lambda s, d: built.append(s) or real(s, d))
    own = glcnn.Context()
    try:
        pipe = glcnn.Pipeline(graphs["autoencoder"], own)
        requests = len(built)
        glcnn.Pipeline(graphs["autoencoder"], own).release()
        assert len(built) == requests == len(own.programs)
        _check(pipe, _feeds(pipe.graph, 1), "autoencoder after cached program requests")
        pipe.release()
    finally:
        own.gl.release()


def test_driver_is_the_one_asked_for(ctx):
    """Under the driver matrix (tests/runtime/test_drivers.py), the context really is that driver,
    at the GL version and limits asked for: a matrix run on the wrong driver proves nothing."""
    expected = os.environ.get("GLCNN_EXPECT_DRIVER")
    gallium = os.environ.get("GALLIUM_DRIVER")
    if gallium:
        assert gallium in ctx.renderer.lower(), (gallium, ctx.renderer)
    if os.environ.get("MESA_GL_VERSION_OVERRIDE"):
        assert ctx.version.startswith(os.environ["MESA_GL_VERSION_OVERRIDE"]), ctx.version
    if os.environ.get("GLCNN_EXPECT_MESA"):
        assert f"Mesa {os.environ['GLCNN_EXPECT_MESA']}" in ctx.version, ctx.version
    if os.environ.get("GLCNN_EXPECT_ZINK"):
        assert ctx.renderer.startswith("zink") and "llvmpipe" in ctx.renderer, ctx.renderer
    for item in filter(None, os.environ.get("GLCNN_GL_LIMITS", "").split(",")):
        name, value = item.split("=")
        assert ctx.limit(name) <= int(value), (name, ctx.limit(name))
    if expected is None:  # the ordinary run: llvmpipe unless the machine says otherwise
        assert ctx.renderer


def test_gl_limits_cut_by_environment_and_refused_below_gl33(monkeypatch):
    monkeypatch.setenv("GLCNN_GL_LIMITS", "texture=4096,buffer=70000")
    small = glcnn.Context()
    assert small.max_texture_size == min(4096, int(small.gl.info["GL_MAX_TEXTURE_SIZE"]))
    assert small.max_buffer_texels <= 70000
    assert not small.buffer_fits(70001) and small.buffer_fits(1024)
    small.gl.release()
    for bad, message in [("texture=512", "below GL 3.3's minimum"), ("colours=8", "NAME=INTEGER"),
                         ("buffer=lots", "NAME=INTEGER")]:
        monkeypatch.setenv("GLCNN_GL_LIMITS", bad)
        with pytest.raises(glcnn.GlcnnError, match=message):
            glcnn.Context()


def test_buffer_texture_reads_back_at_every_size_glcnn_uses(ctx):
    """An index in every texel of a buffer texture as large as buffer_fits allows (up to
    2^18 texels), read back through texelFetch: the softpipe wrap (texel i came back as
    i mod 32768) fails this on any driver that has it and is not caught by the probe."""
    texels = 1 << 18
    while not ctx.buffer_fits(texels):
        texels //= 2
    width = 512
    data = np.zeros((texels // width, width, 4), np.float32)
    data[..., 0] = np.arange(texels).reshape(-1, width) % 4096
    data[..., 1] = np.arange(texels).reshape(-1, width) // 4096
    buffer = ctx.buffer_texture(data)
    program = ctx.gl.program(
        vertex_shader="#version 330 core\n" + shader_text("fullscreen.vert"),
        fragment_shader="#version 330 core\nuniform samplerBuffer u_b; out vec4 frag;\n"
                        "void main() { ivec2 p = ivec2(gl_FragCoord.xy);\n"
                        f"  frag = texelFetch(u_b, p.y * {width} + p.x); }}")
    target = ctx.gl.texture((width, texels // width), 4, dtype="f4")
    fbo = ctx.gl.framebuffer(color_attachments=[target])
    try:
        ctx.set_uniforms(program, {"u_b": 0})
        buffer.use(0)
        fbo.use()
        vao = ctx.gl.vertex_array(program, [])
        vao.render(moderngl.TRIANGLES, vertices=3)
        vao.release()
        got = np.frombuffer(target.read(), np.float32).reshape(data.shape)
        assert np.array_equal(got, data), f"{texels} texels on {ctx.renderer}"
    finally:
        ctx.park()
        for obj in (fbo, target, program, buffer):
            obj.release()


def test_set_uniforms_writes_an_array_of_one_element(ctx):
    """glcnn gives array uniforms as sequences; moderngl reports an array of one as a plain
    value (Concat of one input: u_end[1], which zink keeps and llvmpipe drops as unused)."""
    program = ctx.gl.program(
        vertex_shader="#version 330 core\nvoid main() { gl_Position = vec4(0.0); }",
        fragment_shader="#version 330 core\nuniform int u_end[1];\nuniform vec2 u_pair[1];\n"
                        "out vec4 c;\nvoid main() { c = vec4(u_end[0]) + u_pair[0].xyxy; }")
    try:
        ctx.set_uniforms(program, {"u_end": (4,), "u_pair": [(0.5, 2.0)]})
        assert program["u_end"].value == 4 and program["u_pair"].value == (0.5, 2.0)
    finally:
        program.release()
