"""Shader source assembly: the final fragment source of a program from the shader files and
its `#define`s, and the source lines a driver message points at. GL-free."""

import re

import numpy as np

from ..errors import GlcnnError
from ..resources import shader_text

_LINE = re.compile(r"(\d+):(\d+)\(\d+\)")
_DEFINE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

COMMON_LINE_OFFSET = 10000


def build_source(shader: str, defines: dict) -> str:
    """Final fragment source: #version, the defines, then common.glsl and the op shader.

    `#line` directives keep driver messages pointing at real lines: the op shader counts
    from 1, common.glsl from 10001 (drivers differ in reporting the source-string number
    of `#line N S`, so the line alone tells the two files apart).

    Only identifiers and integers reach the source: no string from a model file can.

    Raises:
        GlcnnError: a define that is not an identifier with an integer value.
    """
    for key, value in defines.items():
        if not (isinstance(key, str) and _DEFINE_NAME.match(key)) or \
                not isinstance(value, int | np.integer):
            raise GlcnnError(f"shader {shader}: refusing #define {key!r} = {value!r} "
                             "(defines must be identifiers with integer values)")
    head = ["#version 330 core"] + [f"#define {k} {int(v)}" for k, v in sorted(defines.items())]
    common, body = shader_text("common.glsl"), shader_text(shader)
    return "\n".join(head + [f"#line {COMMON_LINE_OFFSET + 1} 1", common, "#line 1 2", body])


def excerpt(source: str, message: str, around: int = 2) -> str:
    """The source lines a driver message ("0:49(22): error ...") points at, with file names."""
    files, current = {"common.glsl": [], "op shader": []}, None
    for text in source.split("\n"):
        if text.startswith("#line "):
            current = "common.glsl" if text.endswith(" 1") else "op shader"
        elif current is not None:
            files[current].append(text)
    out = []
    for line in sorted({int(n) for _, n in _LINE.findall(message)}):
        name = "common.glsl" if line > COMMON_LINE_OFFSET else "op shader"
        line -= COMMON_LINE_OFFSET if line > COMMON_LINE_OFFSET else 0
        lines = files[name]
        for n in range(max(1, line - around), min(len(lines), line + around) + 1):
            out.append(f"  {'>' if n == line else ' '} {name}:{n} | {lines[n - 1]}")
    return "\n".join(out)
