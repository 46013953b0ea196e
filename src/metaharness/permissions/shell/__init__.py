"""Shell analysis: from a command string to simple commands and path subjects (docs/reference/permissions.md).

The analysis runs in steps, one module each, and this package's `analyse` is the only entry:

* `lexical`  — the pre-pass bash's lexer does before parsing, and lexical scans for code the
  grammar leaves as text;
* `walk`     — the tree-sitter-bash walk, one dispatch table over every node type of the grammar;
* `wrappers` — programs that run other commands (`data/wrappers.toml`), one handler per kind;
* `fileops`  — read/write operands of known file commands, and code-running marks;
* `words`, `model` — the values passed between them (`Word`, `Cmd`, `PathRef`, `Analysis`).
* `entries`  — the tables' entries as the steps read them (an option list as a set, built once).

Rules the package keeps (each module states its own):
* every `command` node at any depth becomes a simple command, and nothing stops the walk early:
  limits and parse errors mark the call opaque, deny is still evaluated over everything;
* what cannot be read is marked (opaque, program unknown, unprovable), never guessed;
* no knowledge of rules or modes: the analysis only describes the command.
"""

from __future__ import annotations

import re
from typing import Any

from ..tables import lazy_attributes, load_table

__all__ = [
    "Word", "Cmd", "PathRef", "Analysis", "analyse", "static_word", "parse_word", "SAFE_ASSIGNMENTS",
    "MAX_COMMAND_CHARS", "DYNAMIC_ITEM",
]

MAX_COMMAND_CHARS = 100_000


def _language() -> Any:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Language(tree_sitter_bash.language())


# Built on first use, not at import (see tables.py): the wrapper, option and file-command tables
# and the tree-sitter language. They stay attributes of this package (`shell.WRAPPERS`, `from
# .shell import OPTIONS`); its modules read them through `_lazy`.
__getattr__, _lazy = lazy_attributes(globals(), {
    "WRAPPERS": lambda: load_table("wrappers.toml"),
    "OPTIONS": lambda: load_table("options.toml"),
    "FILECOMMANDS": lambda: load_table("filecommands.toml"),
    "DATAOPERANDS": lambda: load_table("dataoperands.toml"),
    "_LANGUAGE": _language,
})

from .words import DYNAMIC_ITEM, SAFE_ASSIGNMENTS, Word, parse_word, static_word  # noqa: E402
from .model import Analysis, Cmd, PathRef  # noqa: E402
from .walk import Env, State, analyse_text, git_env_named  # noqa: E402
from . import wrappers as _wrappers, fileops as _fileops  # noqa: E402,F401  (bound before the first call)


def analyse(command: str, cwd: str | None, home: str | None = None) -> Analysis:
    """Analyse one shell command string."""
    result = Analysis()
    if len(command) > MAX_COMMAND_CHARS:
        result.too_large = True
        return result
    # `~` is the session's HOME unless the call assigns HOME anywhere.
    home_assigned = re.search(r"(?<![$\w{])HOME\b", command) is not None
    state = State(home=home, cwd=cwd, result=result, home_assigned=home_assigned, git_env=git_env_named(command))
    analyse_text(command, state, Env())
    if state.limit_hit:
        result.opaque.append("analysis limit reached")
    return result
