"""From a call to its subjects: what the engine decides about, one subject at a time.

What belongs here: `Subject` (one command, path, host or name of a call, with the result the
engine gives it), `subjects_of` (every subject of a call: the shell analysis's commands and
paths, a file tool's paths, a fetch's host, an MCP or tool name), how a subject is shown in the
verdict, and the principal (the call in rule form, as the trail and the prompt name it).

Rules it keeps:
* every subject is listed, even past the analysis's limits and parse errors: deny rules are
  evaluated over all of them;
* a path whose target cannot be known before the call runs is `dynamic` (only a rule without a
  specifier can cover it); a path a word may only possibly spell is deny-only;
* what the analysis cannot read becomes an opaque subject, with why;
* a command string's analysis is memoised per (command, working directory, HOME): the analysis
  reads no rule, and nothing after it changes what it returns (the path subjects built from it
  resolve symlinks afresh on every call), so a repeated command — a run's `git status`, a
  redecide over a month of CI runs — is parsed once. The one analysis that reads the disk (a
  copy into a directory: what it writes depends on the directory and the source tree as they
  are now) marks its command `read_disk` and is never kept.
"""

from __future__ import annotations

import collections
import hashlib
import shlex
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .paths import CanonicalPath, PathError, canonical, escape_glob
from .verdict import Behavior, SubjectResult

if TYPE_CHECKING:
    from .calls import Call
    from .context import Context
    from .rules import Rule
    from .shell import Analysis, Cmd, PathRef

__all__ = ["Subject", "subjects_of", "principal_of", "PRINCIPAL_LIMIT"]

#: A principal longer than this is cut, and the trail records the input's hash instead.
PRINCIPAL_LIMIT = 4096
_BAD_URL = "URL does not parse or is not http(s)"


@dataclass(slots=True)
class Subject:
    """One subject of a call, and (in `shown`) the result the verdict lists for it."""

    kind: str  # cmd | read | write | host | mcp | tool | agent | skill | opaque
    label: str
    cmd: "Cmd | None" = None
    ref: "PathRef | None" = None
    canon: CanonicalPath | None = None
    dynamic: bool = False
    host: str | None = None
    opaque_why: str | None = None
    deny_only: bool = False
    recursive: bool = False
    reach: str = ""  # a git operation's reach over a recursive read (PathRef.reach)
    repo_wide: bool = False
    shown: SubjectResult | None = None

    def mark(self, result: Behavior, reason: str, rule: "Rule | None") -> None:
        """Give this subject its result and reason (and the rule that decided it)."""
        shown = self.shown
        assert shown is not None  # show() starts the entry before any result
        shown.result, shown.reason = result, reason
        if rule is not None:
            shown.rule, shown.scope, shown.file = rule.text, rule.scope, rule.file

    def show(self) -> None:
        """Start this subject's entry in the verdict: what it is, before any result."""
        shown = self.shown = SubjectResult(self.kind, self.label)
        if self.kind == "cmd":
            cmd = self.cmd
            assert cmd is not None  # a cmd subject carries its command
            shown.words = [word.deny_value if word.deny_value is not None else word.text for word in cmd.words]
            if not cmd.words:
                shown.label = cmd.display()  # the stand-in for a program that cannot be determined
            if cmd.opaque:
                shown.why = cmd.opaque
        elif self.kind in ("read", "write"):
            if self.canon is not None:
                shown.path, shown.real = self.canon.lexical, self.canon.real
            else:
                shown.path = self.label
                shown.why = "unknown target"
        elif self.kind == "opaque":
            shown.why = self.opaque_why


def _opaque(why: str) -> Subject:
    return Subject("opaque", why, opaque_why=why)


def _path_subject(access: str, ref: "PathRef", ctx: "Context") -> Subject:
    value = ref.word.deny_value
    subject = Subject(access, value if value is not None else ref.word.text, ref=ref, deny_only=ref.deny_only,
                      recursive=ref.recursive, reach=ref.reach, repo_wide=ref.repo_wide)
    if value is None or (ref.cwd is None and not value.startswith("/")):
        subject.dynamic = True
        return subject
    try:
        subject.canon = canonical(value, ref.cwd or "/", ctx.home)
    except PathError:
        subject.dynamic = True
    return subject


def _host_of(url: str) -> str | None:
    try:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            return None
        host = parts.hostname.rstrip(".").lower()
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
        return host
    except ValueError:
        return None


#: How many command strings' analyses are kept (least recently used first out). An analysis of a
#: typical command is a few kilobytes; 4,096 of them bound the memo to a few megabytes.
ANALYSIS_MEMO_SIZE = 4096


class _AnalysisMemo:
    """`analysis_of`: least recently used first out, and an analysis that read the disk never kept."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: "collections.OrderedDict[tuple[str, str | None, str | None], Analysis]" = collections.OrderedDict()

    def __call__(self, text: str, cwd: "str | None", home: "str | None") -> "Analysis":
        """The shell analysis of `text`, memoised (the module's rules say why that is safe)."""
        key = (text, cwd, home)
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            return kept
        from .shell import analyse

        analysis = analyse(text, cwd, home)
        if not any(cmd.read_disk for cmd in analysis.cmds):
            self._kept[key] = analysis
            if len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return analysis

    def cache_clear(self) -> None:
        self._kept.clear()


analysis_of = _AnalysisMemo(ANALYSIS_MEMO_SIZE)


def subjects_of(call: "Call", ctx: "Context") -> tuple[list[Subject], "Analysis | None"]:
    """Every subject of `call` in call order, and the shell analysis when the call is a command."""
    from .shell import Cmd, PathRef, Word, static_word

    cwd = call.cwd or ctx.cwd
    subjects: list[Subject] = []
    analysis: Analysis | None = None
    if call.opaque:
        subjects.append(_opaque(call.opaque))
    if call.rule_tool == "Bash" and (call.command is not None or call.argv is not None):
        text = call.command if call.command is not None else shlex.join(call.argv or ())
        analysis = analysis_of(text, cwd, ctx.home)
        if analysis.too_large:
            return subjects, analysis
        for cmd in analysis.cmds:
            subjects.append(Subject("cmd", cmd.display(), cmd=cmd, deny_only=cmd.deny_only))
            for ref in cmd.paths:
                subjects.append(_path_subject(ref.access, ref, ctx))
        for ref in analysis.paths:
            subjects.append(_path_subject(ref.access, ref, ctx))
        carried = {cmd.opaque for cmd in analysis.cmds if cmd.program_unknown}
        for why in dict.fromkeys(analysis.program_unknown):
            if why not in carried:
                # A parse error: the program that will run cannot be determined.
                subjects.append(Subject("cmd", why, cmd=Cmd(words=[], program_unknown=True, opaque=why)))
        for why in dict.fromkeys(analysis.opaque):
            subjects.append(_opaque(why))
        return subjects, analysis
    for path in call.writes:
        word = static_word(path) if "\x00" not in path else Word(path, None, None, ".*", False)
        subjects.append(_path_subject("write", PathRef("write", word, cwd, "tool"), ctx))
    for path in call.reads:
        ref = PathRef("read", static_word(path), cwd, "tool", recursive=call.recursive_read)
        subjects.append(_path_subject("read", ref, ctx))
    if call.rule_tool == "WebFetch":
        host = _host_of(call.url or "")
        subjects.append(_opaque(_BAD_URL) if host is None else Subject("host", host, host=host))
    elif call.rule_tool.startswith("mcp__"):
        subjects.append(Subject("mcp", call.rule_tool))
    elif call.rule_tool == "Agent":
        subjects.append(Subject("agent", call.name or ""))
    elif call.rule_tool == "Skill":
        subjects.append(Subject("skill", call.name or ""))
    elif call.rule_tool not in ("Read", "Write", "Bash"):
        subjects.append(Subject("tool", call.rule_tool))
    return subjects, analysis


def principal_of(call: "Call", subjects: list[Subject]) -> tuple[str, bool, str | None]:
    """The call in rule form: (principal, whether it was cut, the input's sha256 when it was)."""
    if call.rule_tool == "Bash":
        text = call.command.strip() if call.command is not None else shlex.join(call.argv or ())
        principal = f"Bash({text})"
    elif call.rule_tool in ("Read", "Write"):
        first = next((subject for subject in subjects if subject.kind in ("write", "read")), None)
        if first is not None and first.canon is not None:
            tool = "Write" if first.kind == "write" else "Read"
            principal = f"{tool}(//{escape_glob(first.canon.lexical.lstrip('/'))})"
        else:
            principal = call.rule_tool
    elif call.rule_tool == "WebFetch":
        host = next((subject.host for subject in subjects if subject.kind == "host"), None)
        principal = f"WebFetch(domain:{host})" if host else "WebFetch"
    elif call.rule_tool in ("Agent", "Skill"):
        principal = f"{call.rule_tool}({call.name})"
    else:
        principal = call.rule_tool
    if len(principal) > PRINCIPAL_LIMIT:
        import json

        digest = hashlib.sha256(json.dumps(dict(call.input), sort_keys=True, default=str).encode()).hexdigest()
        return principal[:PRINCIPAL_LIMIT], True, digest
    return principal, False, None
