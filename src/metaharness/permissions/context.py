"""The engine's input for a session: the merged rules and the context a call is decided in.

What belongs here: `RuleSet` (the merged allow/ask/deny lists), `Context` (mode, workspaceMode,
roots, trust, whether anyone can answer), the built-in deny rules, and a subagent's context.
Settings files are read in `settings.py`, which builds a `Context` with `Settings.context`.

Rules it keeps:
* the lists are sets for precedence (deny > ask > allow, no specificity contest); their order is
  only the order a matching rule is reported in: built-in rules first, then user, project,
  local and file scopes;
* the writable roots are the project root, the extra roots and the temporary roots, each in its
  lexical and its real spelling;
* a subagent never gets more than its parent: deny and ask lists are united, allow lists
  intersected, the less permissive mode and the more restrictive workspaceMode taken.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Sequence

from .modes import MODES, WORKSPACE_MODES
from .rules import Rule, parse_rule

__all__ = ["RuleSet", "Context", "builtin_rules", "subagent_context"]


@dataclass(slots=True)
class RuleSet:
    """The merged rules of a session: builtin first, then user, project, local, file."""

    deny: list[Rule] = field(default_factory=list)
    ask: list[Rule] = field(default_factory=list)
    allow: list[Rule] = field(default_factory=list)

    def add(self, rule: Rule) -> None:
        getattr(self, rule.behavior).append(rule)

    def all(self) -> list[Rule]:
        return self.deny + self.ask + self.allow

    def copy_with(self, *more: Rule) -> "RuleSet":
        copied = RuleSet(list(self.deny), list(self.ask), list(self.allow))
        for rule in more:
            copied.add(rule)
        return copied


@dataclass(slots=True)
class Context:
    rules: RuleSet
    project_root: str
    home: str
    cwd: str | None = None
    mode: str = "manual"
    workspace_mode: str = "workspace-write"
    writable_roots: tuple[str, ...] = ()  # extra roots; the project root and tmp are always added
    tmp_roots: tuple[str, ...] = ("/tmp",)
    trusted: bool = True
    can_ask: bool = True
    child_allow: tuple[tuple[Rule, ...], ...] = ()  # subagent definitions' own allow lists, each must hold
    _roots: tuple[str, ...] = ()
    _cache: dict = field(default_factory=dict)  # rule indexes and compiled pattern sets (index.py, path_checks.py)

    def __post_init__(self) -> None:
        self.project_root = os.path.realpath(self.project_root)
        if self.cwd is None:
            self.cwd = self.project_root
        seen: list[str] = []
        for root in (self.project_root, *self.writable_roots, *self.tmp_roots):
            for spelled in (os.path.normpath(root), os.path.realpath(root)):
                if spelled not in seen:
                    seen.append(spelled)
        self._roots = tuple(seen)

    @property
    def roots(self) -> tuple[str, ...]:
        return self._roots


def builtin_rules(project_root: str, home: str) -> list[Rule]:
    """The built-in deny rules, in the order `permissions list` shows them."""
    root = os.path.realpath(project_root)
    home = os.path.normpath(home)
    rules = [parse_rule("Write(/.oharness)", "deny", "builtin"), parse_rule("Write(~/.oharness)", "deny", "builtin")]
    paths = {"/", home, root}
    for start in (home, root):
        current = start
        while current != "/":
            current = os.path.dirname(current)
            paths.add(current)
    for path in sorted(paths, key=lambda text: text.encode()):
        for flag in ("-r", "-f"):
            rules.append(Rule(f"Bash(rm {flag} {path})", "deny", "builtin", None, "Bash", "builtin-rm",
                              rm_flag=flag, rm_path=path))
    return rules


def subagent_context(parent: Context, *, child_mode: str | None = None, child_allow: Sequence[Rule] | None = None,
                     child_deny: Sequence[Rule] = (), child_ask: Sequence[Rule] = (),
                     child_workspace_mode: str | None = None) -> Context:
    """The effective context of a subagent: deny/ask united, allow intersected, the less
    permissive mode and the more restrictive workspaceMode."""
    mode_rank = {mode: rank for rank, mode in enumerate(MODES)}
    mode = parent.mode if child_mode is None else min(parent.mode, child_mode, key=mode_rank.__getitem__)
    workspace_rank = {mode: rank for rank, mode in enumerate(WORKSPACE_MODES)}
    workspace_mode = parent.workspace_mode if child_workspace_mode is None else min(
        parent.workspace_mode, child_workspace_mode, key=workspace_rank.__getitem__)
    rules = RuleSet(parent.rules.deny + list(child_deny), parent.rules.ask + list(child_ask), list(parent.rules.allow))
    child = parent.child_allow + ((tuple(child_allow),) if child_allow is not None else ())
    return Context(rules=rules, project_root=parent.project_root, home=parent.home, cwd=parent.cwd, mode=mode,
                   workspace_mode=workspace_mode, writable_roots=parent.writable_roots, tmp_roots=parent.tmp_roots,
                   trusted=parent.trusted, can_ask=parent.can_ask, child_allow=child)
