"""Where a path lies: inside the writable roots, on the protected or secret lists, critical.

What belongs here: containment in the writable set (the workspace gate and the edit grant),
the protected paths (writes never auto-approved) and secret paths (reads never auto-approved)
of data/protected.toml, compiled into a set that answers "does any of them match?", and the
critical removals.

Rules it keeps:
* containment is component-wise (`/w/proj-evil` is not under `/w/proj`) and must hold for both
  spellings of a path, lexical and real (a symlink cannot carry a write out of the roots);
* a list matches when it matches either spelling;
* a removal is critical when it takes `/`, a top-level directory, or an ancestor of the home
  directory, the project root or the call's working directory (those included).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Sequence

from .paths import CanonicalPath, PathPattern, compile_path_pattern
from .tables import lazy_attributes, load_table

if TYPE_CHECKING:
    from .context import Context

__all__ = ["under", "inside_roots", "is_protected", "is_secret", "is_critical_removal", "PatternSet", "PROTECTED"]


def _load_protected() -> dict:
    return load_table("protected.toml")


# `PROTECTED` (data/protected.toml) is built on first use, not at import (see tables.py); it stays
# a module attribute; read it here through `_lazy`.
__getattr__, _lazy = lazy_attributes(globals(), {"PROTECTED": _load_protected})


def under(path: str, root: str) -> bool:
    """Component-wise containment of normalised absolute paths (`/w/proj-evil` is not under `/w/proj`)."""
    return path == root or root == "/" or path.startswith(root + "/")


def inside_roots(canon: CanonicalPath, ctx: "Context") -> bool:
    return all(any(under(path, root) for root in ctx.roots) for path in (canon.lexical, canon.real))


class PatternSet:
    """Broad path patterns (the protected and secret lists) compiled to answer "does any of them
    match?" with few regex calls: the any-depth names are one alternation over the path's
    components; an anchored pattern with a literal first component is tried only on paths under
    its anchor with that component (the same necessary condition `PathPattern.matches` checks
    first); the rest are tried one by one."""

    def __init__(self, patterns: Sequence[str], ctx: "Context") -> None:
        compiled = [compile_path_pattern(text, project_root=ctx.project_root, home=ctx.home, broad=True)
                    for text in patterns]
        names = [pattern.regex.pattern for pattern in compiled if pattern.anchor is None]
        self.names = re.compile("|".join(f"(?:{name})" for name in names), re.IGNORECASE) if names else None
        self.by_first: dict[str, dict[str, list[PathPattern]]] = {}
        self.rest: list[PathPattern] = []
        for pattern in compiled:
            if pattern.anchor is None:
                continue
            if pattern.first is not None and pattern.anchor != "/":
                self.by_first.setdefault(pattern.anchor + "/", {}).setdefault(pattern.first, []).append(pattern)
            else:
                self.rest.append(pattern)

    def matches(self, path: str) -> bool:
        if self.names is not None and any(self.names.fullmatch(part) for part in path.split("/") if part):
            return True
        for prefix, by_first in self.by_first.items():
            if path.startswith(prefix):
                head = path[len(prefix):].split("/", 1)[0].casefold()
                if any(pattern.matches(path) for pattern in by_first.get(head, ())):
                    return True
        return any(pattern.matches(path) for pattern in self.rest)


def _matches_list(name: str, canon: CanonicalPath, ctx: "Context") -> bool:
    patterns = _lazy("PROTECTED")[name]
    key = ("patterns", id(patterns))
    compiled = ctx._cache.get(key)
    if compiled is None:
        compiled = ctx._cache[key] = PatternSet(patterns, ctx)
    return compiled.matches(canon.lexical) or (canon.real != canon.lexical and compiled.matches(canon.real))


def is_protected(canon: CanonicalPath, ctx: "Context") -> bool:
    """On the protected list: a write there is never auto-approved."""
    return _matches_list("paths", canon, ctx)


def is_secret(canon: CanonicalPath, ctx: "Context") -> bool:
    """On the secret list: a read there is never auto-approved."""
    return _matches_list("secret", canon, ctx)


def is_critical_removal(canon: CanonicalPath, ctx: "Context", cwd: str | None) -> bool:
    anchors = {os.path.normpath(ctx.home), ctx.project_root}
    if cwd:
        anchors.add(os.path.normpath(cwd))
    for path in (canon.lexical, canon.real):
        if path == "/" or os.path.dirname(path) == "/":
            return True
        if any(under(anchor, path) for anchor in anchors):
            return True
    return False
