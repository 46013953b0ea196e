"""What "always allow" would write for an ask, per scope, or why it is not offered.

What belongs here: the rule an approval may be remembered as — the most specific rule that
covers what was approved, exactly one — and the reasons it is not offered. Writing it to a
settings file is persist.py's; a forced ask is never rememberable (its reason's
`not_remembered` words, reasons.py, say why).

Rules it keeps:
* never widen: a command is remembered as its full static word list, each word quoted
  (`shlex.join`), so no pattern is ever generated and a `*` stays literal; a write as its exact
  path (relative to the project root for `local` and `project` inside it, absolute otherwise),
  glob characters escaped; a fetch as its exact host; an MCP or other tool as its exact name;
* only one simple command (with its wrapper layers and inner commands), or one path, host or
  tool, may be pending; a command in a loop, `case` or function body, with a dynamic word, or
  with an assignment that can change what runs is not rememberable; nor is a symlinked path.
"""

from __future__ import annotations

import os
import shlex
from typing import TYPE_CHECKING

from .paths import escape_glob, is_inside

if TYPE_CHECKING:
    from .calls import Call
    from .context import Context
    from .subjects import Subject
    from .verdict import Verdict

__all__ = ["remember", "DANGEROUS_ASSIGNMENTS", "DANGEROUS_ASSIGNMENT_PREFIXES", "SAFE_ASSIGNMENTS"]

DANGEROUS_ASSIGNMENT_PREFIXES = ("LD_", "DYLD_", "GIT_")
DANGEROUS_ASSIGNMENTS = {"PATH", "PYTHONPATH", "PYTHONSTARTUP", "NODE_OPTIONS", "NODE_PATH", "BASH_ENV", "ENV",
                         "IFS", "PS4", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "PERL5OPT", "PERL5LIB",
                         "RUBYOPT", "RUBYLIB", "JAVA_TOOL_OPTIONS", "HOME"}
#: Assignments left out of a remembered command (they change how it looks, not what it does);
#: so is every `LC_*`.
SAFE_ASSIGNMENTS = ("LANG", "TZ", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "TERM", "CI", "COLUMNS")


def _dangerous(name: str) -> bool:
    return name in DANGEROUS_ASSIGNMENTS or name.startswith(DANGEROUS_ASSIGNMENT_PREFIXES)


def _every_scope(rule: str) -> dict[str, str]:
    return {"local": rule, "project": rule, "user": rule}


def remember(verdict: "Verdict", pending: list["Subject"], subjects: list["Subject"], call: "Call",
             ctx: "Context") -> None:
    """Set `verdict.remember` (scope → rule) for an ask left by step 6, or `remember_why_not`."""
    def not_offered(why: str) -> None:
        verdict.remember, verdict.remember_why_not = None, why

    kinds = {subject.kind for subject in pending}
    if kinds <= {"cmd", "write", "read"} and "cmd" in kinds:
        groups = {subject.cmd.group for subject in pending if subject.kind == "cmd"}
        owners_in_groups = all(
            subject.kind == "cmd" or (subject.ref is not None and subject.ref.owner is not None
                                      and subject.ref.owner.group in groups)
            for subject in pending)
        if len(groups) != 1 or not owners_in_groups:
            return not_offered("more than one pending subject")
        group = groups.pop()
        cmds = [subject.cmd for subject in subjects if subject.kind == "cmd" and subject.cmd.group == group]
        outer = next((cmd for cmd in cmds if cmd.layer == 0), None)
        if outer is None or any(cmd.in_body for cmd in cmds):
            return not_offered("inside a loop, case or function")
        if (any(word.value is None for cmd in cmds for word in cmd.words)
                or any(not word.static for cmd in cmds for _, word in cmd.assigns)):
            return not_offered("a dynamic word")
        if any(_dangerous(name) for cmd in cmds for name, _ in cmd.assigns):
            return not_offered("an assignment that can change what runs")
        words = [f"{name}={word.value}" for name, word in outer.assigns
                 if not (name in SAFE_ASSIGNMENTS or name.startswith("LC_"))]
        verdict.remember = _every_scope("Bash(" + shlex.join(words + [word.value for word in outer.words]) + ")")
        return
    if len(pending) != 1:
        return not_offered("more than one pending subject")
    subject = pending[0]
    if subject.kind == "write":
        if subject.canon is None:
            return not_offered("unknown write target")
        if subject.canon.lexical != subject.canon.real:
            return not_offered("a symlinked path")
        path = subject.canon.lexical
        absolute = f"Write(//{escape_glob(path.lstrip('/'))})"
        if is_inside(path, ctx.project_root) and path != ctx.project_root:
            relative = f"Write(/{escape_glob(os.path.relpath(path, ctx.project_root))})"
            verdict.remember = {"local": relative, "project": relative, "user": absolute}
        else:
            verdict.remember = _every_scope(absolute)
        return
    if subject.kind == "host":
        verdict.remember = _every_scope(f"WebFetch(domain:{subject.host})")
        return
    if subject.kind in ("mcp", "tool"):
        verdict.remember = _every_scope(call.rule_tool)
        return
    return not_offered("not rememberable")
