"""Every public name the README shows resolves (GL-free: names are imported, nothing runs):
`glcnn.x.y` in its text and tables, and `from glcnn... import ...` / `import glcnn...` in its
code blocks; and everything in `glcnn.__all__`. A module moved or a name renamed without the
README following fails here, naming the README line."""

import importlib
import re
from pathlib import Path

import pytest

import glcnn

README = Path(__file__).resolve().parents[1] / "README.md"
DOTTED = re.compile(r"(?<![\w/.])glcnn(?:\.[A-Za-z_]\w*)+")
FROM_IMPORT = re.compile(r"^\s*from (glcnn(?:\.\w+)*) import ([\w, ()]+)", re.M)
IMPORT = re.compile(r"^\s*import (glcnn(?:\.\w+)*)", re.M)


def resolve(dotted: str):
    """The object `dotted` names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def readme_names() -> list[tuple[int, str]]:
    """(line, dotted name) for every glcnn name the README shows."""
    found = []
    for number, line in enumerate(README.read_text().splitlines(), 1):
        found += [(number, m.group(0)) for m in DOTTED.finditer(line)]
        for module, names in FROM_IMPORT.findall(line):
            found += [(number, f"{module}.{name.strip()}") for name in
                      names.strip("()").split(",") if name.strip()]
        found += [(number, module) for module in IMPORT.findall(line)]
    return found


def test_the_readme_shows_public_names():
    names = {name for _, name in readme_names()}
    assert {"glcnn.load", "glcnn.Pipeline", "glcnn.Builder", "glcnn.save"} <= names


@pytest.mark.parametrize("line,name", readme_names(), ids=lambda v: str(v))
def test_every_name_the_readme_shows_imports(line, name):
    try:
        resolve(name)
    except (ImportError, AttributeError) as exc:
        pytest.fail(f"README.md:{line} shows {name}, which does not resolve: {exc}")


@pytest.mark.parametrize("name", glcnn.__all__)
def test_every_exported_name_exists(name):
    assert getattr(glcnn, name) is not None


def test_a_name_that_is_gone_does_not_resolve():
    with pytest.raises(AttributeError):
        resolve("glcnn.graph.passes.no_such_pass")
    with pytest.raises(ModuleNotFoundError):
        resolve("glcnx.load")
