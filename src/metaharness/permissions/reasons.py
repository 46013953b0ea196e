"""The reason codes: one catalogue {code → step, order, decided by, ask words, refusal words}.

What belongs here: every reason code the engine can give a verdict or a subject, the step of the
decision procedure that gives it, its precedence within that step, who the trail names as the
decider when it settles without a person, the words a person is shown when a subject asks for
it, the words the model reads when a call is refused for it, and why "always allow" is not
offered for it. The two renderers (`ask_words`, `refusal_words`) are lookups in this table.

Rules it keeps:
* a code is defined here once; the engine's modules give codes by name and the renderers never
  test a code themselves (a test checks that every code the engine gives is catalogued and that
  every catalogued code is given, unless it is marked reserved);
* a code with a parameter is spelled `family:parameter` (`auto-risky:sudo`) and catalogued under
  its family;
* the words are templates over a fixed set of fields (below); what a template may say about a
  call is only what those fields hold, so a verdict and its texts never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from .verdict import SubjectResult, Verdict

__all__ = ["Reason", "CATALOGUE", "reason_of", "ask_words", "refusal_words",
           "FORCED_ORDER", "GRANT_ORDER", "POSSIBLE_ASK_RANK", "trail_by"]


@dataclass(frozen=True, slots=True)
class Reason:
    """One reason code.

    `step` is the step of the decision procedure that gives it (0–6; None: a subject's own
    result, never a verdict's). `rank` orders codes within a step where several subjects
    qualify (lower wins; None: call order or control flow decides). `decided_by` is the trail's
    `by` when a verdict with this code settles without a person (None: a person or the embedder
    answers). `ask_words` is shown for a subject that asks for this reason; `refusal_words` is
    what the model reads when a call is denied for it, keyed by the decisive subject's kind
    (`*`: any kind). `not_remembered` says why "always allow" is not offered (forced asks).
    `reserved` marks a code that is named by the specification but not produced in this version.
    """

    code: str
    behaviors: tuple[str, ...]
    step: int | None
    rank: int | None = None
    decided_by: str | None = None
    ask_words: str | None = None
    refusal_words: Mapping[str, str] = field(default_factory=dict)
    not_remembered: str | None = None
    reserved: bool = False


def _refusal(text: str) -> dict[str, str]:
    return {"*": text}


_FROM_SCOPE = "{from_scope}"
_UNREADABLE_IN_BYPASS = ("`{principal}` cannot be read fully ({unreadable}), so {deny_rule} cannot be proven "
                         "not to apply; refused in bypass mode")

CATALOGUE: dict[str, Reason] = {reason.code: reason for reason in (
    # -- deny: steps 0–4, in this order -----------------------------------------------------
    Reason("too-large", ("deny",), 0, decided_by="engine",
           refusal_words=_refusal("the command is too large to analyse (over 100000 characters)")),
    Reason("deny-rule", ("deny",), 1, decided_by="rule",
           refusal_words=_refusal("denied by deny rule `{rule}` ({scope}): {matched} matches it; "
                                  "deny rules hold in every mode")),
    Reason("workspace-gate", ("deny",), 2, decided_by="gate", refusal_words={
        "write": ("workspaceMode {workspace_mode} does not admit a write to {subject} (outside the writable roots); "
                  "this is a policy gate on arguments"),
        "*": ("workspaceMode {workspace_mode} does not admit `{subject}` (not shown to be read-only); "
              "this is a policy gate on arguments")}),
    Reason("plan-mode", ("deny",), 3, decided_by="mode",
           refusal_words=_refusal("plan mode refuses changes: `{subject}` is not a read")),
    Reason("hook-deny", ("deny",), 4, decided_by="hook", refusal_words=_refusal("denied by the embedder")),
    # -- step 5: Bypass, and the forced asks by rank ----------------------------------------
    Reason("bypass", ("allow",), 5, decided_by="mode"),
    Reason("ask-rule", ("ask",), 5, rank=0, ask_words="`{what}` matches ask rule `{rule}`" + _FROM_SCOPE,
           not_remembered="explicit ask rule"),
    Reason("maybe-deny", ("deny", "ask"), 5, rank=1, decided_by="engine",
           ask_words="`{what}` may match deny rule `{rule}`" + _FROM_SCOPE + ": it cannot be read fully",
           refusal_words=_refusal(_UNREADABLE_IN_BYPASS), not_remembered="a deny rule may match"),
    Reason("protected-path", ("ask",), 5, rank=3, ask_words="writes to a protected path `{what}`",
           not_remembered="protected path"),
    Reason("secret-path", ("ask",), 5, rank=4, ask_words="reads a secret path `{what}`", not_remembered="secret path"),
    Reason("critical-removal", ("ask",), 5, rank=5, ask_words="`{what}` removes a critical path",
           not_remembered="critical removal"),
    # With the built-in deny rules in force, a write of unknown target may match `Write(/.oharness)`
    # and asks as `maybe-deny` (which outranks it); this code shows only without them.
    Reason("dynamic-write", ("ask",), 5, rank=6, ask_words="`{what}` writes to a target only known when it runs",
           not_remembered="unknown write target"),
    Reason("opaque", ("deny", "ask"), 5, rank=7, decided_by="engine",
           ask_words="the program cannot be determined before it runs ({why})",
           refusal_words=_refusal(_UNREADABLE_IN_BYPASS), not_remembered="the call cannot be read fully"),
    # -- step 6: grants by rank (the verdict names the strongest), then what is left pending --
    Reason("hook-allow", ("allow",), 6, decided_by="hook"),
    Reason("allow-rule", ("allow",), 6, rank=0, decided_by="rule"),
    Reason("auto-routine", ("allow",), 6, rank=1, decided_by="classifier"),
    Reason("edit-grant", ("allow",), 6, rank=2, decided_by="mode"),
    Reason("read-only", ("allow",), 6, rank=3, decided_by="read-only"),
    Reason("inert", ("allow",), 6, rank=4, decided_by="read-only"),
    Reason("auto-risky", ("ask",), 6, ask_words="`{what}` is risky ({parameter})"),
    Reason("auto-unknown", ("ask",), 6, ask_words="`{what}` is not recognised as routine"),
    Reason("no-rule", ("ask",), 6, ask_words="`{what}`: no rule allows it in this mode"),
    # -- a subject's own result ---------------------------------------------------------------
    # A deny-only subject (a link's target, a path a word may spell) is consulted by deny rules
    # only; when nothing denied it, it is listed with this code and grants nothing.
    Reason("deny-only", ("allow",), None),
    # -- settings-file hooks: not in this version ---------------------------------------------
    Reason("hook-ask", ("ask",), None, reserved=True),
    Reason("hook-error", ("ask",), None, reserved=True),
)}

#: A possible (not certain) ask-rule match ranks after `maybe-deny` among the forced asks — a
#: certain ask match outranks a possible deny, a possible ask match does not — and is reported
#: as `ask-rule`.
POSSIBLE_ASK_RANK = 2
#: The forced asks of step 5 and the grants of step 6, strongest first.
def _ranked(step: int) -> tuple[str, ...]:
    ranked = [reason for reason in CATALOGUE.values() if reason.step == step and reason.rank is not None]
    return tuple(reason.code for reason in sorted(ranked, key=lambda reason: reason.rank))


FORCED_ORDER = _ranked(5)
GRANT_ORDER = _ranked(6)

#: Said for a subject whose code has no words of its own, and for a refusal likewise.
_DEFAULT_ASK_WORDS = "`{what}` ({reason})"
_DEFAULT_REFUSAL_WORDS = "denied ({reason})"
#: Every ask that nobody can answer is refused with these words, whatever its code.
_UNAVAILABLE_WORDS = "`{principal}` needs approval ({reason}) and this run has nobody to ask; refused fail-closed"
#: When the verdict does not say why the call cannot be read fully.
_UNREADABLE_DEFAULT = "a word whose value is only known when it runs"


def reason_of(code: str) -> Reason | None:
    """The catalogue entry of `code` (`family:parameter` → the family's), or None."""
    return CATALOGUE.get(code.split(":", 1)[0])


def trail_by(code: str, fallback: str) -> str:
    """The trail's `by` for a verdict with `code` that settled without a person."""
    reason = reason_of(code)
    return reason.decided_by if reason is not None and reason.decided_by is not None else fallback


def ask_words(subject: "SubjectResult") -> str:
    """One subject's reason for asking, in words (the prompt's list of what needs approval).

    Fields: `what` (the command's words, or the path, or the label), `rule`, `from_scope`
    (" from <scope> scope (<file>)", or nothing), `why` (why the call cannot be read, else
    `what`), `parameter` (of a `family:parameter` code) and `reason` (the code)."""
    what = " ".join(subject.words) if subject.words else (subject.path or subject.label)
    from_scope = ""
    if subject.scope is not None:
        from_scope = f" from {subject.scope} scope" + (f" ({subject.file})" if subject.file else "")
    reason = reason_of(subject.reason)
    template = reason.ask_words if reason is not None and reason.ask_words is not None else _DEFAULT_ASK_WORDS
    return template.format(what=what, rule=subject.rule, from_scope=from_scope, why=subject.why or what,
                           parameter=subject.reason.partition(":")[2], reason=subject.reason)


def refusal_words(verdict: "Verdict", *, unavailable: bool = False) -> str:
    """The words the model reads when a call is refused: a deny, or an ask nobody could answer.

    Fields: `principal`, `reason` (the code), `rule`, `scope` ("<scope> scope, <file>"),
    `workspace_mode`, `matched` (the subject text the rule met, "in this call", or "this call"),
    `subject` (the path or label of the first subject refused for this reason, else the
    principal), `unreadable` (why the call cannot be read fully) and `deny_rule` (the deny rule
    that cannot be ruled out, with its scope, or "a deny rule")."""
    if unavailable or verdict.behavior == "ask":
        return _UNAVAILABLE_WORDS.format(principal=verdict.principal, reason=verdict.reason)
    reason = reason_of(verdict.reason)
    decisive = next((subject for subject in verdict.subjects if subject.reason == verdict.reason), None)
    templates = reason.refusal_words if reason is not None else {}
    template = templates.get(decisive.kind if decisive is not None else "*") or templates.get("*") or _DEFAULT_REFUSAL_WORDS
    scope = f"{verdict.scope} scope, {verdict.file}" if verdict.file else f"{verdict.scope} scope"
    fields: dict[str, Any] = {
        "principal": verdict.principal, "reason": verdict.reason, "rule": verdict.rule, "scope": scope,
        "workspace_mode": verdict.workspace_mode,
        "matched": f"`{verdict.matched}` in this call" if verdict.matched else "this call",
        "subject": (decisive.path or decisive.label) if decisive is not None else verdict.principal,
        "unreadable": ", ".join(dict.fromkeys(verdict.opaque_why)) or _UNREADABLE_DEFAULT,
        "deny_rule": f"deny rule `{verdict.rule}` ({scope})" if verdict.rule else "a deny rule",
    }
    return template.format(**fields)
