"""The shell tables' entries as the analysis reads them: an entry's option list as a set.

What belongs here: `entry_set`, the one way a step reads a list of a table entry (wrappers.toml,
filecommands.toml, options.toml) as a set. Every layer and command of every decision reads these
sets; each is built once per entry object and kept beside it (so the entry's id is not reused).

Rules it keeps: a table entry is never changed in place (a test replaces an entry, which is a new
object, and gets a new set); an entry made on the fly is not passed here (it would be kept).
Compiled with the steps that call it (setup.py): a call into a pure module costs more than the set.
"""

from __future__ import annotations

from typing import Any

__all__ = ["entry_set"]

_ENTRY_SETS: dict[tuple[int, str], tuple[Any, frozenset[str]]] = {}


def entry_set(entry: dict, key: str) -> frozenset[str]:
    """`frozenset(entry.get(key, ()))` (a list's items, a table's keys), built once per entry."""
    kept = _ENTRY_SETS.get((id(entry), key))
    if kept is None or kept[0] is not entry:
        kept = _ENTRY_SETS[(id(entry), key)] = (entry, frozenset(entry.get(key, ())))
    return kept[1]
