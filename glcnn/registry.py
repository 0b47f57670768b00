"""Filling the tables glcnn keys by op type or layer class (the op registry, the reference
evaluators, the importers' converters, the torch runner's builders): one rule for all of them,
so that a second entry under a name fails loudly instead of silently replacing the first."""

from .errors import GlcnnError


def enter(table: dict, entries: dict, where: str) -> None:
    """Add `entries` (name -> value) to `table`, all or none.

    Raises:
        GlcnnError: a name `table` already holds, naming it and `where` (the table's name).
    """
    taken = [name for name in entries if name in table]
    if taken:
        raise GlcnnError(f"{', '.join(map(repr, taken))} already in {where}")
    table.update(entries)
