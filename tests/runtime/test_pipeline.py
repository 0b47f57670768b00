"""Pipeline mechanics: texture reuse, keep, texture(), program cache, inputs, errors."""

import moderngl
import numpy as np
import pytest
from gl_census import census
from helpers import assert_close, atlas_texels, storable

import glcnn
from glcnn.graph import reference
from glcnn.graph.builder import Builder
from glcnn.layout import Atlas
from glcnn.resources import resource_path
from glcnn.runtime.gl import layer_framebuffer
from glcnn.runtime.shaders import excerpt
from glcnn.runtime.stats import ChannelMinMax


def _chain(depth=4, c=8, size=6):
    b = Builder(seed=3)
    h = b.input("x", (c, size, size))
    names = []
    for i in range(depth):
        h = b.conv(h, c, 3, padding=1, activation="Tanh", name=f"c{i}")
        names.append(h)
    return b.build([h]), names


def test_live_ranges_share_textures(ctx):
    graph, names = _chain()
    with glcnn.Pipeline(graph, ctx) as pipe:
        distinct = {id(pipe.textures[n]) for n in ["x", *names]}
        assert len(distinct) == 4  # x, c0 = c2 (c0 is dead once c1 ran), c1, c3 (output)
        assert pipe.textures["c0"] is pipe.textures["c2"]
        x = np.random.default_rng(0).standard_normal((8, 6, 6)).astype(np.float32)
        ref = reference.run(graph, {"x": x})
        np.testing.assert_allclose(pipe.run(x), ref[names[-1]], atol=1e-5)
        with pytest.raises(glcnn.GlcnnError, match="keep="):
            pipe.texture("c0")


def test_keep_all_exposes_every_intermediate(ctx):
    graph, names = _chain()
    x = np.random.default_rng(1).standard_normal((8, 6, 6)).astype(np.float32)
    ref = reference.run(graph, {"x": x})
    with glcnn.Pipeline(graph, ctx, keep="all") as pipe:
        pipe.run(x, readback=False)
        for name in names:
            assert isinstance(pipe.texture(name), type(pipe.texture("x")))
            np.testing.assert_allclose(pipe.read(name), ref[name], atol=1e-5)


def test_programs_compiled_once_and_shared(ctx):
    graph, _ = _chain(depth=5)
    before = ctx.compiles
    with glcnn.Pipeline(graph, ctx) as pipe:
        new = ctx.compiles - before
        assert new <= 2  # five identical conv layers -> one program (+ an unblock program)
        assert len({id(p.program) for p in pipe.passes}) == 1
        # Reading c0..c3 in place would need a second conv program: not done (pipeline.py).
        assert pipe.blocked_tensors == {}
        pipe.run(np.zeros((8, 6, 6), np.float32))
        assert ctx.compiles - before == new


@pytest.mark.parametrize("strategy", ["direct", "blocked"])
def test_pipelines_sharing_programs_alternate_correctly(ctx, strategy, monkeypatch):
    """Two pipelines whose layers share programs but differ in shapes, weights and padding,
    run alternately: uniforms skipped as unchanged must never be another layer's."""
    def net(size, seed, pad):
        b = Builder(seed=seed)
        h = b.input("x", (8, size, size))
        for i in range(3):
            h = b.conv(h, 8, 3, padding=pad, activation="Relu", name=f"c{i}")
        return b.build([h])
    graphs = [net(9, 1, 1), net(13, 2, 0)]
    writes = []
    real = glcnn.Context.set_uniforms

    def counting(self, program, values):
        before = dict(self._held.get(program, {}))
        real(self, program, values)
        writes.append(sum(before.get(k) != v for k, v in values.items()))
    monkeypatch.setattr(glcnn.Context, "set_uniforms", counting)
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((8, g.inputs["x"][1], g.inputs["x"][2])).astype(np.float32)
          for g in graphs]
    refs = [reference.run(g, {"x": x})["c2"] for g, x in zip(graphs, xs)]
    pipes = [glcnn.Pipeline(g, ctx, strategy=strategy) for g in graphs]
    try:
        assert pipes[0].passes[1].program is pipes[1].passes[1].program
        for _ in range(3):
            for pipe, x, ref in zip(pipes, xs, refs):
                np.testing.assert_allclose(pipe.run(x), ref, atol=1e-4)
        writes.clear()
        pipes[0].run(xs[0])
        pipes[0].run(xs[0])  # the same pipeline twice: only what differs between its layers
        assert sum(writes[len(writes) // 2:]) < sum(len(p.uniforms) for p in pipes[0].passes)
    finally:
        for pipe in pipes:
            pipe.release()


def test_batch_axis_round_trip_and_shape_errors(ctx):
    graph, _ = _chain(depth=1)
    with glcnn.Pipeline(graph, ctx) as pipe:
        assert pipe.run(np.zeros((1, 8, 6, 6), np.float32)).shape == (1, 8, 6, 6)
        assert pipe.run(np.zeros((8, 6, 6))).shape == (8, 6, 6)
        with pytest.raises(glcnn.ShapeError, match=r"input 'x' has shape \(8, 6, 7\)"):
            pipe.run(np.zeros((8, 6, 7), np.float32))
        with pytest.raises(glcnn.ShapeError, match="unknown"):
            pipe.run(y=np.zeros((8, 6, 6)))


def test_texture_size_limit_names_the_layer(ctx):
    b = Builder()
    x = b.input("x", (4, 1, ctx.max_texture_size + 1))
    graph = b.build([b.activation(x, "Relu", name="wide")])
    with pytest.raises(glcnn.TextureSizeError, match="'x'"):
        glcnn.Pipeline(graph, ctx)


def test_shader_compile_error_names_file_layer_and_line(ctx):
    with pytest.raises(glcnn.ShaderCompileError) as info:
        ctx.program("conv.glsl", {"KH": 1, "KW": 1, "DENSE": 1}, layer="broken")  # no CG
    err = info.value
    assert err.path.endswith("conv.glsl") and err.layer == "broken"
    lines = resource_path("shaders", "conv_defines.glsl").read_text().splitlines()
    check = next(i for i, text in enumerate(lines, 1) if "exactly one of CG and WIDE_INPUT" in text)
    assert "CG" in err.message and f"> conv_defines.glsl:{check} | #error" in str(err)


def test_excerpt_points_at_file_and_line():
    source = ("#version 330 core\n// file common.glsl\n#line 10001\na\nb\n// file op.glsl\n"
              "#line 1\nfirst\nsecond\nthird")
    text = excerpt(source, "0:2(5): error: something", around=1)
    assert "> op.glsl:2 | second" in text and "first" in text and "third" in text
    assert "> common.glsl:2 | b" in excerpt(source, "0:10002(1): error: x", around=0)
    assert "> op.glsl:3 | third" in excerpt(source, "0(3) : error C0000: x", around=0)


def test_precision_name_is_checked(ctx):
    graph, _ = _chain(depth=1)
    with pytest.raises(glcnn.GlcnnError, match="precision 'int8'"):
        glcnn.Pipeline(graph, ctx, precision="int8")


def test_wrapping_an_existing_moderngl_context(ctx):
    wrapped = glcnn.Context(ctx.gl)
    assert wrapped.gl is ctx.gl and wrapped.max_texture_size >= 4096
    assert "llvmpipe" in wrapped.renderer or wrapped.renderer


LAYER_WRITER = """#version 330 core
layout(location = 0) out vec4 target[{n}];
void main() {{
    for (int j = 0; j < {n}; ++j) target[j] = vec4(j, gl_FragCoord.xy, 0.25 * float(j));
}}
"""


@pytest.mark.parametrize("size", [(5, 3), (70, 130)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("dtype", ["f4", "f2", "f1"])
@pytest.mark.parametrize("layers", [1, 3, 8])
def test_layer_framebuffer_writes_render_target_j_into_layer_j(ctx, dtype, layers, size):
    """Blocked passes write their render targets into the layers of one texture array
    (glcnn.runtime.gl.layer_framebuffer); every layer must receive its own target, at every storage
    precision, and the stand-in attachments must not be left behind."""
    gl = ctx.gl
    vertex = "#version 330 core\n" + resource_path("shaders", "fullscreen.vert").read_text()
    program = gl.program(vertex_shader=vertex, fragment_shader=LAYER_WRITER.format(n=layers))
    vao = gl.vertex_array(program, [])
    # Programs are left out: a deleted one lives on while it is current (an earlier test's).
    before = {k: v for k, v in census().items() if k != "Program"}
    array = gl.texture_array((*size, 8), 4, dtype=dtype)
    fbo = layer_framebuffer(ctx, array, layers)
    fbo.use()
    vao.render(vertices=3)
    stored = np.frombuffer(array.read(), {"f4": np.float32, "f2": np.float16,
                                          "f1": np.uint8}[dtype]).reshape(8, size[1], size[0], 4)
    y, x = np.mgrid[0:size[1], 0:size[0]] + 0.5
    for j in range(layers):
        want = np.stack([np.full_like(x, j), x, y, np.full_like(x, 0.25 * j)], -1)
        if dtype == "f1":  # unsigned normalised: values clamp to [0, 1]
            want = np.round(np.clip(want, 0, 1) * 255)
        np.testing.assert_array_equal(stored[j].astype(np.float64), want, err_msg=f"layer {j}")
    assert not stored[layers:].any(), "layers past the attached ones were written"
    ctx.park()
    fbo.release()
    array.release()
    assert {k: v for k, v in census().items() if k != "Program"} == before
    vao.release()
    program.release()


def test_other_thread_is_refused(ctx):
    import threading
    graph, _ = _chain(depth=1)
    pipe = glcnn.Pipeline(graph, ctx)
    errors = []
    thread = threading.Thread(target=lambda: _capture(errors, pipe.run, np.zeros((8, 6, 6))))
    thread.start()
    thread.join()
    pipe.release()
    assert errors and isinstance(errors[0], glcnn.ContextError)


def _capture(errors, fn, *args):
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        errors.append(exc)


def _w(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


# (op, attrs, input shapes, weights): every form of conv weight texture, and other textures.
TEXTURED = {
    "conv-dense-c6": ("Conv", {}, [(6, 5, 5)], {"W": _w(7, 6, 3, 3), "B": _w(7)}),
    "conv-generic-g2": ("Conv", {"group": 2}, [(6, 5, 5)], {"W": _w(4, 3, 3, 2)}),
    "conv-depthwise": ("Conv", {"group": 5}, [(5, 5, 5)], {"W": _w(5, 1, 5, 5)}),
    "convT-g2": ("ConvTranspose", {"group": 2, "strides": [2, 2]}, [(8, 3, 3)],
                 {"W": _w(8, 3, 4, 4)}),
    "conv-prelu": ("Conv", {"activation": {"op": "PRelu"}}, [(4, 3, 3)],
                   {"W": _w(9, 4, 1, 1), "slope": _w(9)}),
    "prelu": ("PRelu", {}, [(6, 2, 2)], {"slope": _w(6)}),
    "gemm": ("Gemm", {"transB": 1}, [(10, 1, 1)], {"B": _w(3, 10), "C": _w(3)}),
    "batchnorm": ("BatchNormalization", {}, [(5, 2, 2)],
                  {"scale": _w(5), "B": _w(5), "mean": _w(5), "var": np.ones(5, np.float32)}),
}


@pytest.mark.parametrize("case", TEXTURED)
def test_texture_shapes_are_those_of_the_textures(case):
    """Pipeline checks sizes with all_texture_shapes() before laying any texture out."""
    op, attrs, shapes, weights = TEXTURED[case]
    layer = glcnn.ops.make_op(glcnn.graph.Node(op, "y", [f"x{i}" for i in range(len(shapes))],
                                                attrs, weights), shapes)
    assert layer.all_texture_shapes() == {k: v.shape for k, v in layer.all_textures().items()}


def _is_pow2(n: int) -> bool:
    return n & (n - 1) == 0


@pytest.mark.parametrize("precision", ["fp32", "fp16", "u8"])
@pytest.mark.parametrize("strategy", ["direct", "blocked"])
def test_no_texture_side_is_a_power_of_two(ctx, precision, strategy):
    """llvmpipe compiles a program once more for each pattern of power-of-two sizes among
    the textures bound to it (MobileNetV2: 1.6 s of a cold first run), so the pipeline's
    textures never have such sides: atlases, blocked arrays and weights sit in the corner of
    a texture up to two texels larger, with a zero margin, and every result is unchanged."""
    b = Builder(seed=5)
    h = b.input("x", (16, 8, 8))  # a 2x2 grid of 8x8 tiles: a 16x16 atlas
    h = b.conv(h, 16, 3, padding=1, activation="Relu", name="a")  # weights 48 x 12
    h = b.conv(h, 32, 1, name="b")  # 8 slices: 3x3 grid, 24x24; weights 16 x 8
    h = b.conv(h, 4, 3, padding=1, activation="Tanh", name="c")  # one slice: 8x8
    graph = b.build([h])
    rng = np.random.default_rng(2)
    feeds = [{"x": rng.standard_normal((16, 8, 8)).astype(np.float32)} for _ in range(3)]
    if precision == "u8":
        glcnn.calibrate(graph, feeds, ctx)
    x = storable(feeds[0]["x"], precision)
    with glcnn.Pipeline(graph, ctx, precision=precision, strategy=strategy, keep="all") as pipe:
        y = pipe.run(x)
        textures = list(pipe.textures.values()) + list(pipe._scratch.values())
        textures += [t for p in pipe.passes for _, t in p.weights]
        assert any(_is_pow2(n) for s in pipe.shapes.values() for n in Atlas.of(s).size)
        for tex in textures:
            if isinstance(tex, glcnn.runtime.gl.BufferTexture):  # filters: a 1D length
                assert not _is_pow2(tex.texels), tex.texels
            else:
                assert not _is_pow2(tex.width) and not _is_pow2(tex.height), tex.size
        for name, shape in pipe.shapes.items():
            atlas_texels(pipe.texture(name), shape)  # asserts a zero margin
            assert pipe.read(name).shape == shape
    ref = reference.run(graph, {"x": x})["c"]
    assert_close(y, ref, precision, f"{strategy} {precision}")
    if strategy == "blocked":
        assert pipe.blocking, "the blocked strategy blocked nothing: the test lost its point"


@pytest.mark.parametrize("precision", ["fp32", "u8"])
def test_every_texture_a_pipeline_samples_is_nearest_and_clamped(ctx, precision):
    """Context._prime_samplers sets this state on every unit once, so that llvmpipe compiles
    each program once: a texture with other filters or wraps would make it compile again."""
    graph, _ = _chain(depth=3, c=8, size=40)  # 40 wide: blocked, input buffers
    x = np.random.default_rng(2).standard_normal((8, 40, 40)).astype(np.float32)
    if precision == "u8":
        glcnn.calibrate(graph, [x], ctx)  # min/max on the GPU: stats.py's textures too
    with glcnn.Pipeline(graph, ctx, precision=precision, strategy="blocked") as pipe:
        pipe.run(x)
        sampled = [*pipe.textures.values(), *pipe._scratch.values(),
                   *(t for p in pipe.passes for _, t in p.weights
                     if not isinstance(t, glcnn.runtime.gl.BufferTexture))]
        assert pipe.blocking and len(sampled) > 5
        stats = ChannelMinMax(ctx)
        stats.read(pipe.textures["x"], (8, 40, 40))
        sampled += [t for b in stats.buffers.values() for t in (b.rows, b.result)]
        for tex in sampled:
            assert tex.filter == (moderngl.NEAREST, moderngl.NEAREST), tex
            assert (tex.repeat_x, tex.repeat_y) == (False, False), tex
        stats.release()
