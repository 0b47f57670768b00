"""Shader source assembly: the final fragment source of a program from the shader files and
its `#define`s, and the source lines a driver message points at. GL-free.

A program is `#version 330 core`, its `#define`s, common.glsl, then the op shader. A whole
line `#include "name.glsl"` in any of these files is replaced by that file (resolved here,
not by the driver: GLSL 330 has no #include), once per program: a file already spliced is
skipped, so helpers may include what they use. Splicing ignores `#if`: a file included under
`#ifdef X` is there only, so a helper that several branches use is included before them.

Line numbers: each file of a program counts its own lines from k * LINES_PER_FILE + 1, the
op shader from 1, common.glsl from 10001 and the files spliced after it from 20001, 30001,
... in splice order. A `#line` starts each file and resumes its includer after it, and again
after an `#else`, `#elif` or `#endif` that ends a branch holding such added lines: a driver
skipping the branch skips their `#line`s but counts the lines. So a driver's line number
alone names the file and the line (the source-string number of `#line N S` is not used:
drivers differ in reporting it); a comment `// file NAME` before each file's first `#line`
lets `excerpt` name the file.

Unrolled loops: the lines between `#for NAME < BOUND unroll N` and `#endfor` are written out
N times, copy k as `{ const int NAME = k; ... }` under `#if k < (BOUND)`, then once as a
`for` loop from N to BOUND under `#if N < (BOUND)`. BOUND is a preprocessor expression of the
program's defines, so the driver's preprocessor drops the copies past it, and NAME is a
constant in every copy it keeps: arrays indexed by it stay in registers on every driver,
whatever its loop-unrolling heuristics (Mesa 25's llvmpipe kept a blocked conv's loops and
spilled its arrays to memory: 4-13x slower than Mesa 22.3). Each copy starts with the `#line`
of its first line. A body holds no #include, break or continue, and its #if groups are
balanced.

    #version 330 core
    #define CG 4
    ...
    // file common.glsl
    #line 10001
    ...common.glsl...
    // file conv.glsl
    #line 1
    ...conv.glsl, lines 1-14...
    // file conv_defines.glsl         (conv.glsl line 15: #include "conv_defines.glsl")
    #line 20001
    ...conv_defines.glsl...
    #line 16
    ...conv.glsl, from line 16...
"""

import functools
import itertools
import re

import numpy as np

from ..errors import GlcnnError
from ..resources import shader_text

LINES_PER_FILE = 10000  # file k of a program counts its lines from k * LINES_PER_FILE + 1
COMMON = "common.glsl"  # prepended to every op shader

_DEFINE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([A-Za-z0-9_.-]+)"[ \t]*$')
_INCLUDE_LIKE = re.compile(r"^[ \t]*#[ \t]*include\b")
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(\w+)")
_FOR = re.compile(r"^[ \t]*#[ \t]*for[ \t]+([A-Za-z_]\w*)[ \t]*<[ \t]*(.+?)[ \t]+unroll[ \t]+"
                  r"(\d+)[ \t]*$")
_FOR_LIKE = re.compile(r"^[ \t]*#[ \t]*(for|endfor)\b")
_JUMP = re.compile(r"\b(break|continue)\b")
_FILE_MARK = re.compile(r"^// file (\S+)$")
_LINE = re.compile(r"^#line (\d+)$")
# Where a driver message names a line: Mesa "0:49(22): error", NVIDIA "0(49) : error",
# AMD and most others "ERROR: 0:49: error".
_MESSAGE_LINES = (re.compile(r"\b\d+:(\d+)\(\d+\)"), re.compile(r"(?<![\d:])\d+\((\d+)\)\s*:"),
                  re.compile(r"ERROR: \d+:(\d+):"))


def build_source(shader: str, defines: dict) -> str:
    """Final fragment source: #version, the defines, then common.glsl and the op shader with
    their includes spliced in (see the module docstring for the `#line` numbering).

    Only identifiers and integers reach the source: no string from a model file can.

    Raises:
        GlcnnError: a define that is not an identifier with an integer value; an include
            that is missing, not a whole line `#include "name.glsl"`, or part of a cycle.
    """
    head = ["#version 330 core"] + [f"#define {k} {v}" for k, v in checked_defines(shader,
                                                                                defines)]
    return "\n".join(head + [spliced(shader)])


def checked_defines(shader: str, defines: dict) -> tuple[tuple[str, int], ...]:
    """`defines` as sorted (name, int) pairs: what a program's source depends on besides its
    files, so a key for the programs made from it.

    Raises:
        GlcnnError: a define that is not an identifier with an integer value.
    """
    for key, value in defines.items():
        if not (isinstance(key, str) and _DEFINE_NAME.match(key)) or \
                not isinstance(value, int | np.integer):
            raise GlcnnError(f"shader {shader}: refusing #define {key!r} = {value!r} "
                             "(defines must be identifiers with integer values)")
    return tuple(sorted((key, int(value)) for key, value in defines.items()))


@functools.cache
def spliced(shader: str) -> str:
    """common.glsl and op shader `shader` with their includes spliced in and `#line`s added:
    a program's source but for #version and the defines, made once per process per shader
    (a pipeline builds a source per pass; a conv's takes 0.8 ms to splice).

    Raises:
        GlcnnError: an include that is missing, not a whole line, or part of a cycle.
    """
    splicer = _Splicer(shader)
    splicer.splice(COMMON, ())
    splicer.splice(shader, ())
    return "\n".join(splicer.out)


class _Splicer:
    """Splices the files of one program into `out`, numbering them (module docstring)."""

    def __init__(self, shader: str):
        self.shader = shader
        self.numbers: dict[str, int] = {}  # file -> k: its lines count from k * LINES_PER_FILE
        self.counter = itertools.count(1)
        self.out: list[str] = []

    def splice(self, name: str, chain: tuple[str, ...]) -> bool:
        """Append file `name` (included through `chain`), unless already spliced."""
        if name in chain:
            raise GlcnnError(f"shader {self.shader}: #include cycle "
                             f"{' -> '.join(chain + (name,))}")
        if name in self.numbers:
            return False
        lines = shader_text(name).split("\n")
        if len(lines) >= LINES_PER_FILE:
            raise GlcnnError(f"shader {name} has {len(lines)} lines: line numbers of a program "
                             f"tell files apart only below {LINES_PER_FILE}")
        self.numbers[name] = 0 if name == self.shader else next(self.counter)
        self._append(name, lines, chain + (name,))
        return True

    def _append(self, name: str, lines: list[str], chain: tuple[str, ...]) -> None:
        base = self.numbers[name] * LINES_PER_FILE
        self.out += [f"// file {name}", f"#line {base + 1}"]
        groups: list[bool] = []  # per open #if: whether its current branch holds added lines
        skip_to = 0  # lines before it belong to a #for already written out
        for n, text in enumerate(lines, 1):
            if n < skip_to:
                continue
            if _FOR_LIKE.match(text):
                end = _Unroller(name, base, lines).write(n, self.out)
                skip_to = end + 1
                self.out.append(f"#line {base + end + 1}")
                groups[:] = [True] * len(groups)
                continue
            included = self._include(name, n, text)
            if included is None:
                self.out.append(text)
                if not self._ends_branch(text, groups):
                    continue
            elif not self._splice_included(included, chain, n):
                # One line for one; no "#include" in it, which moderngl would try to resolve.
                self.out.append(f'// include of "{included}": spliced above')
                continue
            # Resume this file's numbering after lines that were not its own.
            self.out.append(f"#line {base + n + 1}")
            groups[:] = [True] * len(groups)

    def _splice_included(self, name: str, chain: tuple[str, ...], line: int) -> bool:
        try:
            shader_text(name)
        except GlcnnError as exc:
            raise GlcnnError(f"shader {chain[-1]}:{line}: #include \"{name}\": {exc}") from None
        return self.splice(name, chain)

    @staticmethod
    def _include(name: str, line: int, text: str) -> str | None:
        """The file a line includes, or None for any other line."""
        if not _INCLUDE_LIKE.match(text):
            return None
        match = _INCLUDE.match(text)
        if match is None:
            raise GlcnnError(f"shader {name}:{line}: {text.strip()!r} is not a whole line "
                             '#include "name.glsl"')
        return match[1]

    @staticmethod
    def _ends_branch(text: str, groups: list[bool]) -> bool:
        """Track #if nesting in `groups`; True for an #else, #elif or #endif ending a branch
        that holds lines added here (a spliced file, a #line): a driver that skips the branch
        counts those lines too, as it skips their #line directives."""
        match = _DIRECTIVE.match(text)
        word = match[1] if match else ""
        if word in ("if", "ifdef", "ifndef"):
            groups.append(False)
        elif word in ("else", "elif") and groups:
            spliced, groups[-1] = groups[-1], False
            return spliced
        elif word == "endif" and groups:
            return groups.pop()
        return False


class _Unroller:
    """Writes out the `#for` loops of one file (module docstring, "Unrolled loops")."""

    def __init__(self, name: str, base: int, lines: list[str]):
        self.name, self.base, self.lines = name, base, lines

    def write(self, first: int, out: list[str]) -> int:
        """Append the expansion of the `#for` on line `first` (1-based) to `out`; returns the
        line of its `#endfor`."""
        var, bound, copies = self._header(first)
        last = self._end(first)
        body = self._body(first, last, plain=False)  # the same text in every copy
        out.append(f"// {self.lines[first - 1].strip()}: {copies} copies, then a loop")
        for k in range(copies):
            out += [f"#if {k} < ({bound})", f"{{ const int {var} = {k};", *body, "}", "#endif"]
        out += [f"#if {copies} < ({bound})", *self._loop(first, last, copies), "#endif"]
        return last

    def _loop(self, first: int, last: int, start: int) -> list[str]:
        """The `#for` on line `first` as a plain loop from `start`, nested ones too: the rare
        iterations past the copies need no copies of their own."""
        var, bound, _ = self._header(first)
        return [f"for (int {var} = {start}; {var} < ({bound}); ++{var}) {{",
                *self._body(first, last, plain=True), "}"]

    def _body(self, first: int, last: int, plain: bool) -> list[str]:
        """Lines first+1 .. last-1, starting with their #line; nested #for written out, or
        as plain loops."""
        out = [f"#line {self.base + first + 1}"]
        n = first + 1
        while n < last:
            if _FOR_LIKE.match(self.lines[n - 1]):
                end = self._end(n)
                if plain:
                    out += self._loop(n, end, 0)
                else:
                    self.write(n, out)
                n = end + 1
                out.append(f"#line {self.base + n}")
            else:
                out.append(self.lines[n - 1])
                n += 1
        return out

    def _header(self, line: int) -> tuple[str, str, int]:
        """(NAME, BOUND, N) of the `#for NAME < BOUND unroll N` on `line`."""
        text = self.lines[line - 1]
        if _FOR_LIKE.match(text)[1] == "endfor":
            self._refuse(line, "#endfor without #for")
        match = _FOR.match(text)
        if match is None:
            self._refuse(line, "expected '#for NAME < BOUND unroll N' (N copies, then a loop)")
        return match[1], match[2], int(match[3])

    def _end(self, first: int) -> int:
        """The line of the `#endfor` closing the `#for` on line `first`, after checking the
        body (no #include, break or continue; balanced #if groups)."""
        depth, ifs = 0, 0
        for n in range(first + 1, len(self.lines) + 1):
            text = self.lines[n - 1]
            loop, directive = _FOR_LIKE.match(text), _DIRECTIVE.match(text)
            word = directive[1] if directive else ""
            if loop and loop[1] == "endfor" and depth == 0:
                if ifs:
                    self._refuse(first, "#if groups in its body are not closed")
                return n
            depth += 1 if loop and loop[1] == "for" else -1 if loop else 0
            ifs += 1 if word in ("if", "ifdef", "ifndef") else -1 if word == "endif" else 0
            if ifs < 0 or _INCLUDE_LIKE.match(text) or _JUMP.search(text.split("//")[0]):
                self._refuse(n, "a #for body holds no #include, break, continue or unopened "
                                "#endif")
        self._refuse(first, "#for without #endfor")

    def _refuse(self, line: int, why: str):
        raise GlcnnError(f"shader {self.name}:{line}: {self.lines[line - 1].strip()!r}: {why}")


def excerpt(source: str, message: str, around: int = 2) -> str:
    """The source lines a driver message points at ("0:49(22): error ..." from Mesa,
    "0(49) : error ..." from NVIDIA, "ERROR: 0:49: ..." from AMD), each as
    `file.glsl:line | text`, with `around` lines of the same file either side."""
    names, text_at = _numbered_lines(source)
    out = []
    for line in sorted({int(n) for pattern in _MESSAGE_LINES for n in pattern.findall(message)}):
        if line not in text_at:
            continue
        file = (line - 1) // LINES_PER_FILE
        for n in range(line - around, line + around + 1):
            if n in text_at and (n - 1) // LINES_PER_FILE == file:
                local = (n - 1) % LINES_PER_FILE + 1
                out.append(f"  {'>' if n == line else ' '} {names.get(file, '?')}:{local} | "
                           f"{text_at[n]}")
    return "\n".join(out)


def _numbered_lines(source: str) -> tuple[dict[int, str], dict[int, str]]:
    """The file names of a build_source result by number k, and its lines by the line number
    its `#line`s give them."""
    names, text_at, number, previous = {}, {}, None, ""
    for text in source.split("\n"):
        line = _LINE.match(text)
        if line:
            number = int(line[1])
            mark = _FILE_MARK.match(previous)
            if mark:
                names[(number - 1) // LINES_PER_FILE] = mark[1]
        elif number is not None:
            text_at[number] = text
            number += 1
        previous = text
    return names, text_at
