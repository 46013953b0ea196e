"""Step 6 of a decision: what grants each subject that steps 0–5 left open.

What belongs here: the grants — allow rules, the read-only set, the inert tools, the edit grant
shared by Accept edits and Auto, the Auto classifier's routine commands — the reason a subject
nobody granted asks with (`no-rule`, `auto-risky:<feature>`, `auto-unknown`), the reason an
allowed verdict names, and whether a command is read-only (which the gate and Plan read too).

Rules it keeps:
* a grant only ever turns an undecided subject into allow: a subject a deny rule, the gate or
  Plan refused, a deny-only subject and an opaque subject are never granted here;
* an exact allow rule for an outermost command covers the whole simple command (its wrapper
  layers, inner commands and redirect targets); any other allow rule covers what it matches;
* a subagent's own allow lists narrow the parent's allow rules (each list must cover the subject);
* the edit grant covers a write only inside the writable roots and off the protected list;
* in Auto a risky feature is named before "not recognised".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .index import index_of
from .match import allow_covers, command_allowed, covers
from .path_checks import inside_roots, is_protected
from .paths import PathError, canonical
from .reasons import CATALOGUE

if TYPE_CHECKING:
    from .calls import Call
    from .context import Context
    from .index import RuleIndex
    from .rules import Rule
    from .shell import Cmd, PathRef
    from .subjects import Subject

__all__ = ["grant_subjects", "grant_reason", "cmd_read_only", "adds_nothing", "classifier_module"]

_EDIT_MODES = ("accept-edits", "auto")
_classifier: Any = None  # bound by `classifier_module()` on first use


def classifier_module() -> Any:
    """The Auto classifier, imported on first use: it loads the shell analyser's tables, and a
    session opens (and answers `init`) before its first tool call."""
    global _classifier
    if _classifier is None:
        from . import classifier

        _classifier = classifier
    return _classifier


def _kept(cmd: "Cmd", key: tuple, work: Callable[[], Any]) -> Any:
    """What `work()` answers for `cmd`, kept on the command: each answer kept here depends only on
    the command's words (and what `key` names), and a memoised analysis (subjects.analysis_of)
    hands the same command to every decision of the same string."""
    memo = cmd.norm_cache
    if key in memo:
        return memo[key]
    answer = memo[key] = work()
    return answer


def _read_only(cmd: "Cmd", trusted: bool) -> bool:
    return _kept(cmd, ("read-only", trusted), lambda: classifier_module().is_read_only(cmd, trusted=trusted))


def _first_allow(index: "RuleIndex", cmd: "Cmd") -> "Rule | None":
    """The first allow rule of `index` that covers `cmd`, kept on the command for this index."""
    key = ("first-allow", id(index))
    kept = cmd.norm_cache.get(key)
    if kept is None or kept[0] is not index:  # not asked yet, or another index once had this id
        found = next((rule for rule in index.for_cmd_strict(cmd) if command_allowed(rule, cmd)), None)
        kept = cmd.norm_cache[key] = (index, found)
    return kept[1]


def cmd_read_only(subject: "Subject", ctx: "Context") -> bool:
    return subject.cmd is not None and _read_only(subject.cmd, ctx.trusted)


def adds_nothing(subject: "Subject") -> bool:
    """A transparent wrapper whose string was analysed recursively adds nothing itself."""
    cmd = subject.cmd
    return (cmd is not None and cmd.wrapper is not None and cmd.inner is None and cmd.transparent
            and not cmd.opaque and not cmd.program_unknown)


def _editable(ref: "PathRef", ctx: "Context") -> bool:
    """A path a command writes, for the edit grant: known, inside the roots, not protected."""
    value = ref.word.value
    if value is None or ref.cwd is None and not value.startswith("/"):
        return False
    try:
        canon = canonical(value, ref.cwd or "/", ctx.home)
    except PathError:
        return False
    return inside_roots(canon, ctx) and not is_protected(canon, ctx)


def _child_allows(subject: "Subject", call: "Call", ctx: "Context") -> bool:
    """A subagent's own allow list narrows the parent's grants by rule (intersection)."""
    return all(any(covers(rule, subject, call, ctx) for rule in allow_list) for allow_list in ctx.child_allow)


def grant_subjects(subjects: list["Subject"], call: "Call", ctx: "Context", only_display: bool = False) -> list["Subject"]:
    """Mark each subject granted or pending; returns the pending ones in call order.

    `only_display`: the verdict is already decided; fill in the subjects that have no result yet,
    so the verdict lists every subject with its own."""
    classifier = classifier_module()
    mode = ctx.mode
    pending: list[Subject] = []
    exact_groups: set[int] = set()  # simple commands an exact allow rule covers, by group
    exact_rule_of_group: dict[int, Rule] = {}
    rule_of_cmd: dict[int, Rule] = {}  # by id(cmd): the first allow rule that covers it
    index = index_of(ctx.rules.allow, ctx)
    for subject in subjects:
        if subject.kind == "cmd":
            cmd = subject.cmd
            assert cmd is not None  # a cmd subject carries its command
            rule = _first_allow(index, cmd)
            if rule is not None:
                rule_of_cmd[id(cmd)] = rule
                if rule.kind == "shell" and rule.shell is not None and rule.shell.exact and cmd.layer == 0:
                    exact_groups.add(cmd.group)
                    exact_rule_of_group[cmd.group] = rule
    for subject in subjects:
        shown = subject.shown
        assert shown is not None  # decision.py shows every subject before any grant
        if shown.result == "deny" or (only_display and shown.reason):
            continue
        if subject.deny_only or subject.kind == "opaque":
            continue
        grant: tuple[str, Rule | None] | None = None
        risky: str | None = None
        if subject.kind == "cmd":
            cmd = subject.cmd
            assert cmd is not None
            if cmd.group in exact_groups:
                grant = ("allow-rule", exact_rule_of_group[cmd.group])
            elif id(cmd) in rule_of_cmd:
                grant = ("allow-rule", rule_of_cmd[id(cmd)])
            elif (cmd.inner is not None and cmd.transparent) or adds_nothing(subject):
                grant = ("read-only", None)  # adds nothing; its inner commands are subjects of their own
            elif _read_only(cmd, ctx.trusted):
                grant = ("read-only", None)
            elif mode in _EDIT_MODES and _kept(cmd, ("edit",), lambda: classifier.is_edit_command(cmd)) and all(
                    ref.access == "read" or _editable(ref, ctx) for ref in cmd.paths):
                grant = ("edit-grant", None)
            elif mode == "auto":
                risky = _kept(cmd, ("risky",), lambda: classifier.risky_feature(cmd))
                if risky is None and _kept(cmd, ("routine",), lambda: classifier.is_routine(cmd)):
                    grant = ("auto-routine", None)
        elif subject.kind == "read":
            grant = ("read-only", None)
        elif subject.kind == "write":
            if subject.canon is None:
                rule = index.first_any("Write")  # an unknown target: only `Write` with no specifier covers it
            else:
                rule = next((rule for rule in index.for_subject(subject) if allow_covers(rule, subject, call, ctx)), None)
            owner = subject.ref.owner if subject.ref is not None else None
            if rule is not None:
                grant = ("allow-rule", rule)
            elif owner is not None and (owner.group in exact_groups or id(owner) in rule_of_cmd):
                grant = ("allow-rule", exact_rule_of_group.get(owner.group) or rule_of_cmd.get(id(owner)))
            elif (mode in _EDIT_MODES and subject.canon is not None and inside_roots(subject.canon, ctx)
                  and not is_protected(subject.canon, ctx)):
                grant = ("edit-grant", None)
            elif mode == "auto" and subject.canon is not None and not inside_roots(subject.canon, ctx):
                risky = "write-outside-roots"
        elif subject.kind in ("agent", "skill"):
            grant = ("inert", None)
        elif subject.kind == "tool" and call.inert:
            rule = next((rule for rule in ctx.rules.allow if allow_covers(rule, subject, call, ctx)), None)
            grant = ("allow-rule", rule) if rule else ("inert", None)
        else:
            rule = next((rule for rule in ctx.rules.allow if allow_covers(rule, subject, call, ctx)), None)
            if rule is not None:
                grant = ("allow-rule", rule)
        if grant is not None and ctx.child_allow and grant[0] == "allow-rule" and not _child_allows(subject, call, ctx):
            grant = None
        if grant is not None:
            subject.mark("allow", grant[0], grant[1])
            continue
        reason = "no-rule"
        if mode == "auto":
            reason = f"auto-risky:{risky}" if risky else "auto-unknown"
        subject.mark("ask", reason, None)
        pending.append(subject)
    return pending


def _rank(reason: str) -> int:
    rank = CATALOGUE[reason].rank
    assert rank is not None  # every grant reason is ranked (reasons.py)
    return rank


def grant_reason(subjects: list["Subject"]) -> tuple[str, tuple | None]:
    """The reason an allowed verdict names: the strongest grant among its subjects (by the
    catalogue's rank), and the rule that gave it as (text, scope, file)."""
    best: str | None = None
    rule_ref: tuple | None = None
    for subject in subjects:
        shown = subject.shown
        assert shown is not None  # decision.py shows every subject before any grant
        if shown.result != "allow" or subject.deny_only or not shown.reason:
            continue  # a deny-only subject (a link target, a possible path) grants nothing
        reason = shown.reason
        if best is None or _rank(reason) < _rank(best):
            best = reason
            rule_ref = (shown.rule, shown.scope, shown.file) if shown.rule is not None else None
    return (best or "read-only"), rule_ref
