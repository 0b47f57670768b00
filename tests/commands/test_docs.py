"""The README stays true: its ops table is the registry's, its commands exist."""

from pathlib import Path

from glcnn.commands.docs import ops_table, with_ops_table

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_ops_table_matches_registry():
    text = README.read_text()
    assert with_ops_table(text) == text, \
        "README ops table is stale: python -m glcnn.commands.docs README.md"
    assert ops_table() in text


def test_quick_start_files_exist():
    text = README.read_text()
    root = README.parent
    for path in ("weights/autoencoder.npz", "demos/data/coffee_128.png", ".ci/run"):
        assert path in text or path == ".ci/run"
        assert (root / path).exists(), path
