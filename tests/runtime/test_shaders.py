"""Shader source assembly (glcnn/runtime/shaders.py): #include splicing, `#line` numbering,
driver messages mapped back to file and line, and the #error on define combinations that
make no sense. GL tests take the `ctx` fixture."""

import re

import moderngl
import pytest

import glcnn
from glcnn.errors import GlcnnError
from glcnn.resources import resource_dir, shader_text
from glcnn.runtime import shaders
from glcnn.runtime.shaders import build_source, excerpt

MAX_SHADER_LINES = 300
COMMON = shader_text("common.glsl")  # the shipped one, for fake programs the driver compiles
COMMON_INCLUDES = {"activation_derivative.glsl": shader_text("activation_derivative.glsl")}


@pytest.fixture
def fake_files(monkeypatch):
    """Make build_source read shader files from a dict (name -> text) instead of shaders/."""
    files = {"common.glsl": "c1\nc2"}

    def text(name):
        if name not in files:
            raise GlcnnError(f"glcnn resource shaders/{name} not found")
        return files[name]
    monkeypatch.setattr(shaders, "shader_text", text)
    shaders.spliced.cache_clear()  # spliced once per process, as files are read once
    yield files
    shaders.spliced.cache_clear()


def _body(source: str) -> list[str]:
    """The lines of `source` after #version and the defines."""
    return source.split("\n")[source.split("\n").index("// file common.glsl"):]


def test_include_splices_the_file_with_line_directives(fake_files):
    fake_files |= {"a.glsl": 'a1\n#include "b.glsl"\na3', "b.glsl": "b1\nb2"}
    assert build_source("a.glsl", {"X": 1}).split("\n")[:2] == ["#version 330 core",
                                                                 "#define X 1"]
    assert _body(build_source("a.glsl", {})) == [
        "// file common.glsl", "#line 10001", "c1", "c2",
        "// file a.glsl", "#line 1", "a1",
        "// file b.glsl", "#line 20001", "b1", "b2",
        "#line 3", "a3"]


def test_a_file_is_spliced_once_per_program(fake_files):
    fake_files |= {"a.glsl": '#include "b.glsl"\n#include "c.glsl"\n#include "common.glsl"\na4',
                   "b.glsl": "b1", "c.glsl": '#include "b.glsl"\nc2'}
    body = _body(build_source("a.glsl", {}))
    assert body.count("b1") == 1 and body.count("c1") == 1
    assert body[body.index("// file c.glsl"):] == [
        "// file c.glsl", "#line 30001", '// include of "b.glsl": spliced above', "c2",
        "#line 3", '// include of "common.glsl": spliced above', "a4"]


def test_include_in_a_conditional_resumes_numbering_after_each_branch(fake_files):
    fake_files |= {"a.glsl": '#ifdef X\n#include "b.glsl"\n#else\nz\n#endif\nlast',
                   "b.glsl": "b1"}
    body = _body(build_source("a.glsl", {}))
    assert body[body.index("// file a.glsl"):] == [
        "// file a.glsl", "#line 1", "#ifdef X",
        "// file b.glsl", "#line 20001", "b1", "#line 3",
        "#else", "#line 4", "z", "#endif", "#line 6", "last"]


@pytest.mark.parametrize("files, chain", [
    ({"a.glsl": '#include "a.glsl"'}, "a.glsl -> a.glsl"),
    ({"a.glsl": 'x\n#include "b.glsl"', "b.glsl": '#include "a.glsl"'},
     "a.glsl -> b.glsl -> a.glsl"),
    ({"a.glsl": '#include "b.glsl"', "b.glsl": '#include "c.glsl"', "c.glsl": '#include "b.glsl"'},
     "a.glsl -> b.glsl -> c.glsl -> b.glsl"),
])
def test_an_include_cycle_is_refused_naming_the_chain(fake_files, files, chain):
    fake_files |= files
    with pytest.raises(GlcnnError, match=f"#include cycle {re.escape(chain)}$"):
        build_source("a.glsl", {})


def test_a_missing_include_names_the_including_file_and_line(fake_files):
    fake_files |= {"a.glsl": '#include "b.glsl"', "b.glsl": 'b1\n  #include "gone.glsl"'}
    with pytest.raises(GlcnnError, match=r'^shader b\.glsl:2: #include "gone\.glsl": .*not found'):
        build_source("a.glsl", {})


@pytest.mark.parametrize("line", ['#include <b.glsl>', '#include "b.glsl" // why',
                                  '#include "sub/b.glsl"', "#include b.glsl"])
def test_an_include_must_be_a_whole_line_naming_a_file(fake_files, line):
    fake_files |= {"a.glsl": f"a1\n{line}", "b.glsl": "b1"}
    with pytest.raises(GlcnnError, match=r"^shader a\.glsl:2: .* is not a whole line #include"):
        build_source("a.glsl", {})


@pytest.mark.parametrize("message", ["0:20002(5): error: syntax error",  # Mesa
                                     "0(20002) : error C0000: syntax error",  # NVIDIA
                                     "ERROR: 0:20002: syntax error"])  # AMD
def test_excerpt_names_the_included_file_and_line(fake_files, message):
    fake_files |= {"a.glsl": 'a1\n#include "b.glsl"\na3', "b.glsl": "b1\noops\nb3"}
    text = excerpt(build_source("a.glsl", {}), message, around=1)
    assert text.split("\n") == ["    b.glsl:1 | b1", "  > b.glsl:2 | oops", "    b.glsl:3 | b3"]
    assert "> a.glsl:3 | a3" in excerpt(build_source("a.glsl", {}), "0:3(1): error: x")


def _driver_message(ctx, source: str) -> str:
    """The driver's log for fragment `source`, which must fail to compile."""
    vertex = "#version 330 core\n" + shader_text("fullscreen.vert")
    with pytest.raises(moderngl.Error) as info:
        ctx.gl.program(vertex_shader=vertex, fragment_shader=source)
    return str(info.value)


def test_driver_errors_in_an_included_file_point_at_it(ctx, fake_files):
    fake_files |= COMMON_INCLUDES | {"common.glsl": COMMON,
                   "a.glsl": 'vec4 compute(int slice, int y, int x) {\n#include "b.glsl"\n'
                             "    return v;\n}",
                   "b.glsl": "    vec4 v = vec4(0.0);\n    v += undeclared_here;"}
    source = build_source("a.glsl", {})
    assert "> b.glsl:2 |     v += undeclared_here;" in excerpt(source, _driver_message(ctx, source))


@pytest.mark.parametrize("defines", [{}, {"X": 1}])
def test_driver_lines_stay_right_after_a_conditional_include(ctx, fake_files, defines):
    fake_files |= COMMON_INCLUDES | {"common.glsl": COMMON,
                   "a.glsl": "vec4 compute(int slice, int y, int x) {\n#ifdef X\n"
                             '#include "b.glsl"\n#else\n    vec4 v = vec4(1.0);\n#endif\n'
                             "    return v + undeclared_here;\n}",
                   "b.glsl": "    vec4 v = vec4(0.0);\n    v *= 2.0;"}
    source = build_source("a.glsl", defines)
    assert "> a.glsl:7 |     return v + undeclared_here;" in \
        excerpt(source, _driver_message(ctx, source))


def test_for_is_written_out_as_constant_copies_then_a_loop(fake_files):
    fake_files |= {"a.glsl": "x\n#for j < N unroll 2\n  b(j);\n#endfor\ny"}
    body = _body(build_source("a.glsl", {"N": 3}))
    assert body[body.index("// file a.glsl"):] == [
        "// file a.glsl", "#line 1", "x",
        "// #for j < N unroll 2: 2 copies, then a loop",
        "#if 0 < (N)", "{ const int j = 0;", "#line 3", "  b(j);", "}", "#endif",
        "#if 1 < (N)", "{ const int j = 1;", "#line 3", "  b(j);", "}", "#endif",
        "#if 2 < (N)", "for (int j = 2; j < (N); ++j) {", "#line 3", "  b(j);", "}", "#endif",
        "#line 5", "y"]


def test_a_nested_for_is_copied_in_each_copy_and_a_plain_loop_in_the_rest(fake_files):
    fake_files |= {"a.glsl": "#for i < A unroll 1\n#for j < B unroll 1\nb(i, j);\n#endfor\n"
                             "#endfor"}
    body = _body(build_source("a.glsl", {}))
    copy = body[body.index("{ const int i = 0;"):body.index("#if 1 < (A)")]
    assert "{ const int j = 0;" in copy and "for (int j = 1; j < (B); ++j) {" in copy
    rest = body[body.index("for (int i = 1; i < (A); ++i) {"):]
    assert "for (int j = 0; j < (B); ++j) {" in rest and "{ const int j = 0;" not in rest


@pytest.mark.parametrize("text, line, why", [
    ("a\n#for j < N unroll 2\nb", 2, "#for without #endfor"),
    ("a\n#endfor", 2, "#endfor without #for"),
    ("#for j < N\nb\n#endfor", 1, "expected '#for NAME < BOUND unroll N'"),
    ("#for j < N unroll 0\n#for i < M\nb\n#endfor\n#endfor", 2, "expected '#for NAME < BOUND"),
    ("#for j < N unroll 2\n  if (j > 1) break;\n#endfor", 2, "no #include, break, continue"),
    ("#for j < N unroll 2\n#include \"b.glsl\"\n#endfor", 2, "no #include"),
    ("#for j < N unroll 2\n#endif\n#endfor", 2, "unopened #endif"),
    ("#for j < N unroll 2\n#ifdef X\nb\n#endfor", 1, "#if groups in its body are not closed"),
])
def test_a_malformed_for_names_the_file_and_line(fake_files, text, line, why):
    fake_files |= {"a.glsl": text, "b.glsl": "b1"}
    with pytest.raises(GlcnnError, match=rf"^shader a\.glsl:{line}: .*{re.escape(why)}"):
        build_source("a.glsl", {})


@pytest.mark.parametrize("error_in, line", [("body", 4), ("after", 6)])
def test_driver_lines_stay_right_in_and_after_a_for(ctx, fake_files, error_in, line):
    body, after = ("v[j] += undeclared_here;", "return v;") if error_in == "body" else \
        ("v[j] += 1.0;", "return v + undeclared_here;")
    fake_files |= COMMON_INCLUDES | {"common.glsl": COMMON,
                   "a.glsl": "vec4 compute(int slice, int y, int x) {\n    vec4 v = vec4(0.0);\n"
                             f"#for j < 3 unroll 2\n    {body}\n#endfor\n    {after}\n}}"}
    source = build_source("a.glsl", {})
    assert f"> a.glsl:{line} |     {body if error_in == 'body' else after}" in \
        excerpt(source, _driver_message(ctx, source))


CONV = {"KH": 3, "KW": 3, "DENSE": 1, "CG": 4}
BLOCKED = {"BLOCKED_OUTPUT": 1, "BLOCK_X": 2, "BLOCK_Y": 2, "BLOCK_STEP": 1, "STRIDE_X": 1,
           "DILATION_X": 1}
IN_BLOCK = {"BLOCKED_INPUT": 1, "IN_BLOCK_X": 2, "IN_BLOCK_Y": 2, "IN_BLOCK_STEP": 1}
GENERIC = {"KH": 3, "KW": 3, "CG": 3}
DEPTHWISE = {"KH": 3, "KW": 3, "DEPTHWISE": 1, "CG": 1}
# (shader, defines, names the #error must say): every combination a shader refuses.
INVALID = [
    ("conv.glsl", {"KW": 3, "DENSE": 1, "CG": 4}, ["KH", "KW"]),
    ("conv.glsl", {"KH": 3, "KW": 3, "DENSE": 1}, ["CG", "WIDE_INPUT"]),
    ("conv.glsl", CONV | {"WIDE_INPUT": 1}, ["CG", "WIDE_INPUT"]),
    ("conv.glsl", {"KH": 3, "KW": 3, "DEPTHWISE": 1, "WIDE_INPUT": 1}, ["WIDE_INPUT", "DENSE"]),
    ("conv.glsl", CONV | {"DEPTHWISE": 1}, ["DENSE", "DEPTHWISE"]),
    ("conv.glsl", CONV | {"IN_ACT_RELU": 1, "IN_ACT_LEAKYRELU": 1},
     ["IN_ACT_RELU", "IN_ACT_LEAKYRELU"]),
    ("conv.glsl", GENERIC | {"IN_ACT_LEAKYRELU": 1},
     ["IN_ACT_RELU", "IN_ACT_LEAKYRELU", "DENSE", "DEPTHWISE"]),
    ("conv.glsl", GENERIC | BLOCKED, ["BLOCKED_OUTPUT", "DENSE", "DEPTHWISE"]),
    ("conv.glsl", CONV | {k: v for k, v in BLOCKED.items() if k != "STRIDE_X"},
     ["BLOCKED_OUTPUT", "STRIDE_X", "DILATION_X"]),
    ("conv.glsl", CONV | {"DILATION_X": 1}, ["STRIDE_X", "DILATION_X", "BLOCKED_OUTPUT"]),
    ("conv.glsl", CONV | IN_BLOCK, ["BLOCKED_INPUT", "DENSE", "BLOCKED_OUTPUT"]),
    ("conv.glsl", GENERIC | IN_BLOCK, ["BLOCKED_INPUT", "DENSE", "BLOCKED_OUTPUT", "DEPTHWISE"]),
    ("conv.glsl", CONV | BLOCKED | {"BLOCKED_INPUT": 1, "IN_BLOCK_X": 2},
     ["BLOCKED_INPUT", "IN_BLOCK_X", "IN_BLOCK_Y", "IN_BLOCK_STEP"]),
    ("conv.glsl", CONV | {"INPUT_BUFFER": 1}, ["INPUT_BUFFER", "BLOCKED_OUTPUT", "BLOCKED_INPUT"]),
    ("conv.glsl", CONV | {"RESIDUAL_AFTER": 1}, ["RESIDUAL_AFTER", "RESIDUAL", "OUTPUT_GRAD"]),
    ("conv.glsl", CONV | {"RESIDUAL": 1, "RESIDUAL_AFTER": 1, "OUTPUT_GRAD": 1, "GRAD_RELU": 1},
     ["RESIDUAL_AFTER", "RESIDUAL", "OUTPUT_GRAD"]),
    ("conv.glsl", CONV | {"TRANSPOSED": 1, "UNIT_DILATION": 1},
     ["TRANSPOSED", "UNIT_DILATION", "conv_transpose.glsl"]),
    ("conv_transpose.glsl", CONV | BLOCKED | {"TRANSPOSED": 1},
     ["BLOCKED_OUTPUT", "TRANSPOSED", "UNIT_DILATION"]),
    ("conv_transpose.glsl", {"KH": 3, "KW": 3, "TRANSPOSED": 1, "UNIT_DILATION": 1},
     ["CG", "WIDE_INPUT"]),
    ("activation.glsl", {"ACT_RELU": 1, "ACT_CLAMP": 1}, ["ACT_RELU", "ACT_CLAMP"]),
    ("activation.glsl", {"ACT_SIGMOID": 1, "ACT_SILU": 1}, ["ACT_SIGMOID", "ACT_SILU"]),
    ("activation.glsl", {"BLOCKED_OUTPUT": 1, "BLOCK_X": 2, "BLOCK_Y": 2},
     ["BLOCKED_OUTPUT", "BLOCK_X", "BLOCK_Y", "BLOCK_STEP"]),
    ("conv.glsl", CONV | BLOCKED | {"BLOCK_X": 3, "BLOCK_Y": 3},
     ["BLOCKED_OUTPUT", "BLOCK_X", "BLOCK_Y"]),
    ("binary.glsl", {"OP_ARITH": 1, "OP_DIV": 1, "OTHER_TENSOR": 1}, ["OP_ARITH", "OP_DIV"]),
    ("binary.glsl", {"OTHER_TENSOR": 1}, ["OP_ARITH", "OP_DIV"]),
    ("binary.glsl", {"OP_ARITH": 1, "SWAP": 1, "OTHER_TENSOR": 1}, ["SWAP", "OP_DIV"]),
    ("binary.glsl", {"OP_ARITH": 1}, ["OTHER_TENSOR", "OTHER_CHANNEL", "OTHER_CONSTANT"]),
    ("binary.glsl", {"OP_DIV": 1, "OTHER_CHANNEL": 1, "OTHER_CONSTANT": 1},
     ["OTHER_TENSOR", "OTHER_CHANNEL", "OTHER_CONSTANT"]),
    ("concat.glsl", {}, ["INPUTS"]),
    ("concat.glsl", {"INPUTS": 9}, ["INPUTS", "1..8"]),
    ("depth_to_space.glsl", {"DCR": 1, "CRD": 1}, ["DCR", "CRD"]),
    ("minmax.glsl", {}, ["ROWS", "COLS"]),
    ("pad.glsl", {"EDGE": 1, "WRAP": 1}, ["CONSTANT", "EDGE", "REFLECT", "WRAP"]),
    ("pool.glsl", {"MAX": 1, "AVERAGE": 1, "KH": 2, "KW": 2}, ["MAX", "AVERAGE"]),
    ("pool.glsl", {"MAX": 1, "KH": 2}, ["KH", "KW"]),
    ("reduce.glsl", {"SHIFT": 1}, ["OVER_H", "OVER_W"]),
    ("resize.glsl", {}, ["NEAREST", "LINEAR"]),
    ("softmax.glsl", {"STATS": 1, "STATS_INPUT": 1}, ["STATS", "STATS_INPUT"]),
    ("unblock.glsl", {"BLOCK_X": 2, "BLOCK_Y": 2, "BLOCK_STEP": 1}, ["CUSTOM_MAIN"]),
    ("unblock.glsl", {"CUSTOM_MAIN": 1, "BLOCK_X": 2}, ["BLOCK_X", "BLOCK_Y", "BLOCK_STEP"]),
    ("display.glsl", {}, ["CUSTOM_MAIN"]),
    ("buffer_probe.glsl", {}, ["CUSTOM_MAIN"]),
]


@pytest.mark.parametrize("shader, defines, names", INVALID,
                         ids=[f"{s}-{'-'.join(d)}" for s, d, _ in INVALID])
def test_invalid_define_combinations_stop_at_an_error_naming_them(ctx, shader, defines, names):
    with pytest.raises(glcnn.ShaderCompileError) as info:
        ctx.program(shader, defines, layer="combination")
    err = info.value
    error_line = next(line for line in err.message.split("\n") if "#error" in line)
    assert all(name in error_line for name in names), error_line
    assert re.search(r"\n  > \w+\.glsl:\d+ \| #error ", str(err)), str(err)  # the user sees it


def test_every_shader_file_is_at_most_300_lines():
    lengths = {path.name: len(path.read_text().splitlines())
               for path in resource_dir("shaders").iterdir() if path.suffix in (".glsl", ".vert")}
    assert len(lengths) > 20
    assert not {name: n for name, n in lengths.items() if n > MAX_SHADER_LINES}


def test_every_shader_file_resolves_its_includes():
    names = [path.name for path in resource_dir("shaders").glob("*.glsl")]
    for name in names:
        source = build_source(name, {})
        assert not re.search(r"^\s*#\s*include", source, re.MULTILINE), name
