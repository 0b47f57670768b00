"""The package layout the README's "Architecture" section draws, checked from the source
(GL-free, nothing imported): at most 14 modules at glcnn's top level, no module over 450
lines, and imports only in the allowed directions:

    leaves (every top-level module but cli)  <-  ops, graph  <-  importers
    leaves, ops, graph  <-  runtime  <-  viewer, commands  <-  cli

graph, ops and importers know no GL; runtime knows no model file format, window or tooling;
nothing but the CLI imports commands.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "glcnn"
TOP_LEVEL_MAX = 14
LINES_MAX = 450
GL = {"moderngl", "glfw", "glcontext"}
# area -> the glcnn areas and third-party GL modules it may import (its own area always)
ALLOWED = {
    "leaf": {"leaf"},
    "ops": {"leaf", "graph"},
    "graph": {"leaf", "ops"},
    "importers": {"leaf", "ops", "graph"},
    "runtime": {"leaf", "ops", "graph", "moderngl", "glcontext"},
    "viewer": {"leaf", "ops", "graph", "importers", "runtime", "train", "moderngl", "glfw",
               "glcontext"},  # train: the live training window
    "commands": {"leaf", "ops", "graph", "importers", "runtime", "moderngl", "glcontext"},
    "train": {"leaf", "ops", "graph", "importers", "runtime", "moderngl", "glcontext"},
    "cli": {"leaf", "ops", "graph", "importers", "runtime", "viewer", "commands"},
    "package": {"leaf", "ops", "graph", "importers", "runtime", "train"},  # glcnn/__init__.py
}


def area(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if len(parts) > 1:
        return parts[0]
    return {"__init__": "package", "cli": "cli"}.get(parts[0], "leaf")


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, target) for every import in `path`, functions included: a glcnn area, or the
    top-level name of a third-party module."""
    rel = path.relative_to(PACKAGE).with_suffix("").parts
    package = list(rel[:-1]) if rel[-1] != "__init__" else list(rel[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                found.append((node.lineno, node.module))
                continue
            base = package[:len(package) - node.level + 1] + \
                (node.module.split(".") if node.module else [])
            names = [base + [a.name] for a in node.names] if not base else [base]
            found += [(node.lineno, "glcnn." + ".".join(n)) for n in names]
    return [(line, _target(name)) for line, name in found]


def _target(name: str) -> str:
    parts = name.split(".")
    if parts[0] != "glcnn":
        return parts[0]
    if len(parts) == 1:
        return "package"
    head = parts[1]
    if (PACKAGE / head).is_dir():
        return head
    return {"cli": "cli", "__init__": "package"}.get(head, "leaf")


def violations(paths) -> list[str]:
    out = []
    for path in paths:
        own = area(path)
        for line, target in imports(path):
            third_party = target not in ALLOWED and target not in {"leaf", "package"}
            if target == own or (third_party and target not in GL):
                continue
            if target not in ALLOWED[own]:
                out.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({own}) imports {target}")
    return out


def test_imports_go_only_in_the_allowed_directions():
    found = violations(sorted(PACKAGE.rglob("*.py")))
    assert not found, "imports against the layout (README 'Architecture'):\n" + "\n".join(found)


def test_a_wrong_direction_is_named(tmp_path, monkeypatch):
    fake = tmp_path / "glcnn"
    (fake / "graph").mkdir(parents=True)
    (fake / "runtime").mkdir()
    (fake / "graph" / "passes.py").write_text("def f():\n    from ..runtime import plan\n")
    (fake / "runtime" / "plan.py").write_text("import moderngl\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    assert violations(sorted(fake.rglob("*.py"))) == [
        "glcnn/graph/passes.py:2 (graph) imports runtime"]


def test_at_most_14_modules_at_the_top_level():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= TOP_LEVEL_MAX, f"{len(top)} modules at glcnn's top level: {top}"


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_over_450_lines(path):
    lines = len(path.read_text().splitlines())
    assert lines <= LINES_MAX, f"{path.relative_to(PACKAGE.parent)} has {lines} lines"
