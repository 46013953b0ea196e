"""The decision procedure, steps 0–5, and the verdict: `decide(call, ctx) -> Verdict`.

What belongs here: the steps in their normative order — 0 too large, 1 deny rules over
everything extracted, 2 the workspace gate, 3 Plan, 4 the external decider's deny, 5 Bypass and
the forced asks — the hand-over to step 6 (grants.py) and to "always allow" (remember.py), and
the assembly of the verdict. The reason codes and their precedence are reasons.py's.

Rules it keeps:
* `decide` is pure: it writes nothing, prompts nobody and never reads a settings file;
* deny rules are evaluated over every subject before anything else, limits and parse errors
  included, and nothing after step 1 can turn a deny match into anything but deny; among
  several, the earliest rule in list order is reported (built-in rules first);
* the external decider (the embedder) can never reopen what steps 0–3 denied, and its allow
  cannot skip a forced ask: it only grants what step 6 leaves pending;
* anything not understood asks; in Bypass nothing asks, and an unreadable call under a deny
  rule is denied;
* a replacement input is decided from step 0 again, the original discarded;
* a decision is kept (per context, `DECISION_MEMO_SIZE` of them) and handed out again for the
  same call in the same context only while everything it was made from is unchanged: the call
  (every field, and the input fields a parameter rule reads), the context's mode, roots and
  rule lists (each list the same object of the same length, as the rule indexes assume), and
  every filesystem answer it read (`paths.Witness`: each `canonical` is read again and must
  answer the same). A decision that read the disk otherwise (a walk), whose principal was cut
  or whose input is large is not kept. So a run's repeated `git status` is decided at the cost
  of a dictionary look-up and its paths' `lstat`s.
"""

from __future__ import annotations

import collections
from typing import Any, Mapping

from .calls import Call, replace_input
from .context import Context
from .grants import adds_nothing, cmd_read_only, grant_reason, grant_subjects
from .index import index_of, strongest_match
from .match import MATCH, MAYBE, NO, allow_covers, call_level_match, exact_path_allow, new_decision
from .path_checks import inside_roots, is_critical_removal, is_protected, is_secret
from .paths import Witness
from .reasons import CATALOGUE, POSSIBLE_ASK_RANK
from .remember import remember
from .rules import Rule
from .subjects import Subject, principal_of, subjects_of
from .verdict import Behavior, ExternalDecision, SubjectResult, Verdict

__all__ = ["decide", "forget_decisions", "DECISION_MEMO_SIZE", "KEPT_INPUT_LIMIT"]

#: How many decisions a context keeps (least recently used first out), and the most input text
#: (in characters, all string fields together) a kept call may have: the memo stays a few megabytes.
DECISION_MEMO_SIZE = 4096
KEPT_INPUT_LIMIT = 4096
_MEMO = "decisions"  # its key in the context's cache

_POSSIBLE_ASK = "ask-rule-maybe"  # a possible ask-rule match while forced asks are ranked (reasons.py)


def _gate_refuses(subject: Subject, ctx: Context) -> bool:
    """Step 2: the workspace gate refuses a write outside the writable roots, and in read-only
    every write and every command not shown to be read-only."""
    workspace_mode = ctx.workspace_mode
    if workspace_mode == "full-access" or subject.deny_only:
        return False
    if workspace_mode == "read-only":
        if subject.kind == "write":
            return True
        if subject.kind == "cmd":
            return not cmd_read_only(subject, ctx) and not adds_nothing(subject)
        return False
    if subject.kind == "write" and subject.canon is not None:
        return not inside_roots(subject.canon, ctx)
    return False


def _plan_admits(subject: Subject, call: Call, ctx: Context) -> bool:
    """Step 3: Plan admits reads, read-only commands, inert tools and web search, and an MCP
    tool that says it is read-only only when an allow rule covers it."""
    if subject.deny_only:
        return True
    kind = subject.kind
    if kind == "read" or kind in ("agent", "skill", "host", "opaque"):
        return True
    if kind == "write":
        return False
    if kind == "cmd":
        return cmd_read_only(subject, ctx) or adds_nothing(subject)
    if kind == "mcp":
        return call.read_only_hint and any(allow_covers(rule, subject, call, ctx) for rule in ctx.rules.allow)
    if kind == "tool":
        return call.inert or call.rule_tool == "WebSearch"
    return False


def _deny_rules_for(call: Call, ctx: Context) -> Rule | None:
    """A deny rule that could apply to this call's subjects (`deny_rules_for`): for a shell call
    any Bash, Read or Write rule; for a file tool any Read or Write rule; else one naming the tool."""
    for rule in ctx.rules.deny:
        if call.rule_tool == "Bash" and rule.tool in ("Bash", "Read", "Write"):
            return rule
        if call.rule_tool in ("Read", "Write") and rule.tool in ("Read", "Write"):
            return rule
        if rule.tool_matches(call.rule_tool):
            return rule
    return None


def _position(rules: list[Rule], rule: Rule) -> int:
    for place, candidate in enumerate(rules):
        if candidate is rule:
            return place
    return len(rules)


def _shown(subject: Subject) -> SubjectResult:
    shown = subject.shown
    assert shown is not None  # `_decide` shows every subject before it decides any
    return shown


def _forced_rank(ask: tuple[str, Subject | None, Rule | None]) -> int:
    if ask[0] == _POSSIBLE_ASK:
        return POSSIBLE_ASK_RANK
    rank = CATALOGUE[ask[0]].rank
    assert rank is not None  # every forced ask is ranked (reasons.FORCED_ORDER)
    return rank


def _forced_asks(subjects: list[Subject], maybe_deny: list[tuple[Subject | None, Rule | None]], opaque: list[Subject], call: Call,
                 ctx: Context) -> list[tuple[str, Subject | None, Rule | None]]:
    """Step 5 outside Bypass: every forced ask, strongest first (reasons.FORCED_ORDER)."""
    forced: list[tuple[str, Subject | None, Rule | None]] = []
    ask_index = index_of(ctx.rules.ask, ctx)
    for subject in subjects:
        result, matched = strongest_match(ctx.rules.ask, subject, call, ctx, ask_index)
        if result != NO:
            # A certain ask match outranks a possible deny; a possible ask match does not.
            forced.append(("ask-rule" if result == MATCH else _POSSIBLE_ASK, subject, matched))
    for rule in ask_index.call_level:
        if call_level_match(rule, call) != NO:
            forced.append(("ask-rule", None, rule))
            break
    for maybe_subject, maybe_rule in maybe_deny:
        forced.append(("maybe-deny", maybe_subject, maybe_rule))
    for subject in subjects:
        if subject.deny_only:
            continue
        canon = subject.canon
        if subject.kind == "write" and canon is not None and is_protected(canon, ctx):
            forced.append(("protected-path", subject, None))
        if subject.kind == "read" and canon is not None and is_secret(canon, ctx):
            if not exact_path_allow(subject, ctx):
                forced.append(("secret-path", subject, None))
        if subject.kind == "write" and subject.ref is not None and subject.ref.removal:
            if subject.dynamic or (canon is not None and is_critical_removal(canon, ctx, subject.ref.cwd)):
                forced.append(("critical-removal", subject, None))
        if subject.kind == "write" and subject.dynamic:
            forced.append(("dynamic-write", subject, None))
    for subject in opaque:
        forced.append(("opaque", subject, None))
    forced.sort(key=_forced_rank)
    return [("ask-rule" if reason == _POSSIBLE_ASK else reason, subject, rule) for reason, subject, rule in forced]


def _call_key(call: Call, ctx: Context, external: ExternalDecision | None) -> tuple | None:
    """Everything of the call (and the external decision) a verdict can depend on, or None when
    some of it is not hashable or its text is over `KEPT_INPUT_LIMIT` (then the decision is not
    kept). Of the input that is every field the mapper read (the call's own fields) and the
    fields a parameter rule of the context reads (`match._param_match`): nothing else of it is
    read (a cut principal's digest is, but such a decision is not kept), so a Bash call's
    `description` or a Write's content is no part of the key. A value carries its type: `1`,
    `1.0` and `True` are equal keys but not equal inputs."""
    fields: Mapping[str, Any] = call.input if isinstance(call.input, Mapping) else {}
    named = index_of(ctx.rules.deny, ctx).param_names + index_of(ctx.rules.ask, ctx).param_names
    try:
        items = tuple((name, type(value), value) for name in named for value in (fields.get(name),))
        size = len(call.command or "")
        for _, kind, value in items:
            if kind is str and value is not None:  # (a str is never None: for the type checker)
                size += len(value)
        if size > KEPT_INPUT_LIMIT:
            return None  # a large input: not worth keeping, nor its memory
        key = (call.tool, call.rule_tool, items, call.command, call.argv, call.reads, call.writes,
               call.recursive_read, call.url, call.name, call.cwd, call.opaque, call.inert, call.read_only_hint,
               call.origin, external)
        hash(key)
    except TypeError:
        return None
    return key


def _stamp(ctx: Context) -> tuple:
    """Everything of the context a verdict can depend on. The rule lists are compared by
    identity and length (index.index_of assumes the same: lists grow, they are not rewritten)."""
    rules = ctx.rules
    return (ctx.mode, ctx.workspace_mode, ctx.cwd, ctx.project_root, ctx.home, ctx.roots, ctx.writable_roots,
            ctx.tmp_roots, ctx.trusted, ctx.can_ask, ctx.child_allow, rules.deny, len(rules.deny), rules.ask,
            len(rules.ask), rules.allow, len(rules.allow))


def _handed_out(kept: Verdict, call: Call | None) -> Verdict:
    """A kept verdict as a new value for `call` (its subjects' results are shared: nothing
    changes a result once the verdict is made)."""
    return Verdict(kept.behavior, kept.reason, kept.principal, list(kept.subjects), kept.rule, kept.scope, kept.file,
                   kept.mode, kept.workspace_mode, kept.tool, kept.matched,
                   dict(kept.remember) if kept.remember is not None else None, kept.remember_why_not, kept.replaced,
                   call, kept.principal_truncated, kept.input_sha256, list(kept.opaque_why))


def forget_decisions(ctx: Context) -> None:
    """Drop the decisions `ctx` keeps (the next decision of each call is made from its analysis)."""
    ctx._cache.pop(_MEMO, None)


def decide(call: Call, ctx: Context, external: ExternalDecision | None = None) -> Verdict:
    """Decide one call. Pure: writes nothing, prompts nobody."""
    if external is not None and external.decision == "replace":
        verdict = decide(replace_input(call, external.replacement), ctx, None)
        verdict.replaced = True
        return verdict
    key = _call_key(call, ctx, external)
    if key is None:
        return _decide(call, ctx, external)
    memo: "collections.OrderedDict[tuple, tuple[tuple, Witness, Verdict]] | None" = ctx._cache.get(_MEMO)
    if memo is None:
        memo = ctx._cache[_MEMO] = collections.OrderedDict()
    stamp = _stamp(ctx)
    kept: Any = memo.get(key)
    if kept is not None:
        if kept[0] == stamp and kept[1].still_holds():
            memo.move_to_end(key)
            return _handed_out(kept[2], call)
        memo.pop(key, None)
    with Witness() as witness:
        verdict = _decide(call, ctx, external)
    if witness.replayable and not verdict.principal_truncated:
        memo[key] = (stamp, witness, _handed_out(verdict, None))  # not the call: its input may be large
        if len(memo) > DECISION_MEMO_SIZE:
            memo.popitem(last=False)
    return verdict


def _decide(call: Call, ctx: Context, external: ExternalDecision | None) -> Verdict:
    """`decide` from the call's analysis: steps 0–6."""
    new_decision()
    subjects, analysis = subjects_of(call, ctx)
    principal, truncated, digest = principal_of(call, subjects)
    for subject in subjects:
        subject.show()
    results = [_shown(subject) for subject in subjects]
    opaque_why = [subject.opaque_why for subject in subjects if subject.opaque_why]

    def verdict_of(behavior: Behavior, reason: str, rule: "Rule | tuple | None" = None,
                   matched: str | None = None) -> Verdict:
        text: str | None
        scope: str | None
        file: str | None
        if isinstance(rule, Rule):
            text, scope, file = rule.text, rule.scope, rule.file
        else:
            text, scope, file = rule or (None, None, None)
        if any(not _shown(subject).reason for subject in subjects if not subject.deny_only and subject.kind != "opaque"):
            grant_subjects(subjects, call, ctx, only_display=True)  # every subject is listed with its own result
        for subject in subjects:
            shown = _shown(subject)
            if not shown.reason:
                if subject.kind == "opaque":
                    subject.mark("ask", "opaque", None)
                else:
                    subject.mark(shown.result, "deny-only", None)
        return Verdict(behavior, reason, principal, results, text, scope, file, mode=ctx.mode,
                       workspace_mode=ctx.workspace_mode, tool=call.tool, matched=matched, call=call,
                       principal_truncated=truncated, input_sha256=digest, opaque_why=opaque_why)

    # 0 — too large
    if analysis is not None and analysis.too_large:
        return verdict_of("deny", "too-large")

    # 1 — deny rules over everything extracted
    deny_results: list[tuple[int, Rule | None]] = []
    first_deny: tuple[Rule, Subject | None] | None = None
    deny_index = index_of(ctx.rules.deny, ctx)
    call_level_deny = deny_index.call_level
    for rule in call_level_deny:
        if call_level_match(rule, call) == MATCH and first_deny is None:
            first_deny = (rule, None)
    for subject in subjects:
        result, matched = strongest_match(ctx.rules.deny, subject, call, ctx, deny_index)
        deny_results.append((result, matched))
        if result == MATCH:
            assert matched is not None  # a match names its rule
            subject.mark("deny", "deny-rule", matched)
            # Report the earliest rule in list order (built-in rules first), whatever the subject.
            if first_deny is None or _position(ctx.rules.deny, matched) < _position(ctx.rules.deny, first_deny[0]):
                first_deny = (matched, subject)
    if first_deny is not None:
        deny_rule, deny_subject = first_deny
        return verdict_of("deny", "deny-rule", deny_rule, deny_subject.label if deny_subject else None)
    call_maybe = next((rule for rule in call_level_deny if call_level_match(rule, call) == MAYBE), None)

    # 2 — the workspace gate
    for subject in subjects:
        if _gate_refuses(subject, ctx):
            subject.mark("deny", "workspace-gate", None)
            return verdict_of("deny", "workspace-gate", matched=subject.label)

    # 3 — plan mode
    if ctx.mode == "plan":
        for subject in subjects:
            if not _plan_admits(subject, call, ctx):
                subject.mark("deny", "plan-mode", None)
                return verdict_of("deny", "plan-mode", matched=subject.label)

    # 4 — the external decider's deny
    external_answer = external.decision if external is not None else "abstain"
    if external_answer == "deny":
        return verdict_of("deny", "hook-deny")

    # 5 — Bypass; the forced asks
    maybe_deny: list[tuple[Subject | None, Rule | None]] = [
        (subject, rule) for subject, (result, rule) in zip(subjects, deny_results) if result == MAYBE]
    if call_maybe is not None:
        maybe_deny.insert(0, (None, call_maybe))
    opaque = [subject for subject in subjects
              if subject.kind == "opaque" or (subject.cmd is not None and subject.cmd.opaque)]
    if ctx.mode == "bypass":
        if maybe_deny:
            maybe_subject, maybe_rule = maybe_deny[0]
            if maybe_subject is not None:
                maybe_subject.mark("deny", "maybe-deny", maybe_rule)
            return verdict_of("deny", "maybe-deny", maybe_rule, maybe_subject.label if maybe_subject else None)
        opaque_rule = _deny_rules_for(call, ctx) if opaque else None
        if opaque_rule is not None:
            for subject in opaque:
                subject.mark("deny", "opaque", None)
            return verdict_of("deny", "opaque", opaque_rule, opaque[0].label)
        for subject in subjects:
            if not subject.deny_only:
                subject.mark("allow", "bypass", None)
        return verdict_of("allow", "bypass")

    forced = _forced_asks(subjects, maybe_deny, opaque, call, ctx)
    if forced:
        reason, first_forced, forced_first_rule = forced[0]
        for forced_reason, forced_subject, forced_rule in forced:
            if forced_subject is not None and _shown(forced_subject).result != "ask":
                forced_subject.mark("ask", forced_reason, forced_rule)
        verdict = verdict_of("ask", reason, forced_first_rule, first_forced.label if first_forced else None)
        verdict.remember_why_not = CATALOGUE[reason].not_remembered
        return verdict

    # 6 — grants (grants.py); an external allow grants only what is still pending
    pending = grant_subjects(subjects, call, ctx)
    if external_answer == "allow" and pending:
        for subject in pending:
            subject.mark("allow", "hook-allow", None)
        return verdict_of("allow", "hook-allow")
    if not pending:
        grant, rule_ref = grant_reason(subjects)
        return verdict_of("allow", grant, rule_ref)
    # Among pending subjects, call order — except that a risky feature is reported before
    # "not recognised" (the cmd of `cp x /usr/bin/x` is unknown only because its target is risky).
    first = next((subject for subject in pending if _shown(subject).reason.startswith("auto-risky:")), pending[0])
    verdict = verdict_of("ask", _shown(first).reason)
    remember(verdict, pending, subjects, call, ctx)
    return verdict
