"""The `policy` decision mode: engine verdict → metaharness decision (docs/reference/permissions.md).

What belongs here: the verdict → decision table, the frame combination order, the embedder's
answers in the policy+ask combination, and the reason texts the model reads (always non-empty).
Nothing here talks to a wire; metaharness calls these functions at its per-call seam.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .engine import Context, ExternalDecision, Verdict, decide, replace_input

__all__ = ["PolicyDecision", "policy_decision", "policy_answer", "reason_text", "policy_object"]


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """What metaharness delivers for one call in policy mode.

    `decision` is `allow`, `deny`, `abstain`, or `forward` (send `tool.requested` with
    `decision_required: true` and the `policy` object, then call `policy_answer`). `outcome`/`by`
    are the trail's answer fields (None while forwarded).
    """

    decision: Literal["allow", "deny", "abstain", "forward"]
    decided_by: str | None
    reason: str | None = None
    outcome: str | None = None
    by: str | None = None
    policy: dict[str, Any] | None = None
    verdict: Verdict | None = None


def _scope_text(v: Verdict) -> str:
    return f"{v.scope} scope, {v.file}" if v.file else f"{v.scope} scope"


def reason_text(v: Verdict, *, unavailable: bool = False) -> str:
    """The reason text policy mode gives for a refusal (deny, or an ask nobody could answer)."""
    if unavailable or v.behavior == "ask":
        return f"`{v.principal}` needs approval ({v.reason}) and this run has nobody to ask; refused fail-closed"
    if v.reason == "deny-rule":
        what = f"`{v.matched}` in this call matches it" if v.matched else "this call matches it"
        return f"denied by deny rule `{v.rule}` ({_scope_text(v)}): {what}; deny rules hold in every mode"
    if v.reason == "workspace-gate":
        sub = next((s for s in v.subjects if s.reason == "workspace-gate"), None)
        if sub is not None and sub.kind == "write":
            return (f"workspaceMode {v.workspace_mode} does not admit a write to {sub.path} "
                    f"(outside the writable roots); this is a policy gate on arguments")
        label = sub.label if sub is not None else v.principal
        return (f"workspaceMode {v.workspace_mode} does not admit `{label}` (not shown to be read-only); "
                f"this is a policy gate on arguments")
    if v.reason == "plan-mode":
        sub = next((s for s in v.subjects if s.reason == "plan-mode"), None)
        label = (sub.path or sub.label) if sub is not None else v.principal
        return f"plan mode refuses changes: `{label}` is not a read"
    if v.reason == "too-large":
        return "the command is too large to analyse (over 100000 characters)"
    if v.reason in ("maybe-deny", "opaque"):
        why = ", ".join(dict.fromkeys(v.opaque_why)) or "a word whose value is only known when it runs"
        rule = f"deny rule `{v.rule}` ({_scope_text(v)})" if v.rule else "a deny rule"
        return f"`{v.principal}` cannot be read fully ({why}), so {rule} cannot be proven not to apply; refused in bypass mode"
    if v.reason == "hook-deny":
        return "denied by the embedder"
    return f"denied ({v.reason})"


def policy_object(v: Verdict) -> dict[str, Any]:
    """The additive `policy` key of a forwarded `tool.requested` (keys in this order)."""
    return {"behavior": "ask", "reason": v.reason, "rule": v.rule, "scope": v.scope, "principal": v.principal}


def policy_decision(v: Verdict, *, policy_ask: str = "none", deny_only: bool = False,
                    frame_deny_reason: str | None = None) -> PolicyDecision:
    """Verdict → decision, combined with a frame when one is in force."""
    if v.behavior == "deny":
        return PolicyDecision("deny", "policy", reason_text(v), "denied", _by(v), verdict=v)
    if frame_deny_reason is not None:
        return PolicyDecision("deny", "frame", frame_deny_reason, "denied", "frame", verdict=v)
    if v.behavior == "ask":
        if policy_ask == "embedder":
            return PolicyDecision("forward", None, policy=policy_object(v), verdict=v)
        return PolicyDecision("deny", "policy", reason_text(v, unavailable=True), "unavailable", "none", verdict=v)
    return PolicyDecision("abstain" if deny_only else "allow", "policy", None, "allowed", _by(v), verdict=v)


def policy_answer(v: Verdict, answer: ExternalDecision | None, ctx: Context, *, deny_only: bool = False) -> PolicyDecision:
    """Resolve a forwarded ask with the embedder's answer; `answer=None` means the deadline expired."""
    if answer is None:
        return PolicyDecision("deny", "deadline", "no answer before the deadline", "denied", "deadline", verdict=v)
    if answer.decision == "allow":
        return PolicyDecision("abstain" if deny_only else "allow", "embedder", None, "allowed", "embedder", verdict=v)
    if answer.decision == "deny":
        return PolicyDecision("deny", "embedder", answer.reason or "denied by the embedder", "denied", "embedder", verdict=v)
    if answer.decision == "replace" and answer.replacement is not None and v.call is not None:
        if deny_only:
            return PolicyDecision("deny", "embedder", "replace is refused under --deny-only", "denied", "embedder", verdict=v)
        again = decide(replace_input(v.call, answer.replacement), ctx)
        again.replaced = True
        if again.behavior == "allow":
            return PolicyDecision("allow", "embedder", None, "allowed", "embedder", verdict=again)
        return PolicyDecision("deny", "embedder", "a replacement must be allowed by policy on its own"
                              + (f": {reason_text(again)}" if again.behavior == "deny" else ""), "denied", "embedder", verdict=again)
    return PolicyDecision("deny", "embedder", "an abstention does not answer a policy question", "unavailable", "embedder", verdict=v)


def _by(v: Verdict) -> str:
    from .engine import _BY_REASON

    return _BY_REASON.get(v.reason, "engine")
