"""The `policy` decision mode: engine verdict → metaharness decision (docs/reference/permissions.md).

What belongs here: the verdict → decision table, the frame combination order, the embedder's
answers in the policy+ask combination, and the reason texts the model reads (always non-empty).
Nothing here talks to a wire; metaharness calls these functions at its per-call seam.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .calls import replace_input
from .context import Context
from .decision import decide
from .reasons import refusal_words, trail_by
from .verdict import ExternalDecision, Verdict

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


def reason_text(verdict: Verdict, *, unavailable: bool = False) -> str:
    """The reason text policy mode gives for a refusal (deny, or an ask nobody could answer):
    the catalogue's refusal words (reasons.py)."""
    return refusal_words(verdict, unavailable=unavailable)


def policy_object(verdict: Verdict) -> dict[str, Any]:
    """The additive `policy` key of a forwarded `tool.requested` (keys in this order)."""
    return {"behavior": "ask", "reason": verdict.reason, "rule": verdict.rule, "scope": verdict.scope,
            "principal": verdict.principal}


def policy_decision(verdict: Verdict, *, policy_ask: str = "none", deny_only: bool = False,
                    frame_deny_reason: str | None = None) -> PolicyDecision:
    """Verdict → decision, combined with a frame when one is in force."""
    if verdict.behavior == "deny":
        return PolicyDecision("deny", "policy", reason_text(verdict), "denied", trail_by(verdict.reason, "engine"),
                              verdict=verdict)
    if frame_deny_reason is not None:
        return PolicyDecision("deny", "frame", frame_deny_reason, "denied", "frame", verdict=verdict)
    if verdict.behavior == "ask":
        if policy_ask == "embedder":
            return PolicyDecision("forward", None, policy=policy_object(verdict), verdict=verdict)
        return PolicyDecision("deny", "policy", reason_text(verdict, unavailable=True), "unavailable", "none",
                              verdict=verdict)
    return PolicyDecision("abstain" if deny_only else "allow", "policy", None, "allowed",
                          trail_by(verdict.reason, "engine"), verdict=verdict)


def policy_answer(verdict: Verdict, answer: ExternalDecision | None, ctx: Context, *, deny_only: bool = False) -> PolicyDecision:
    """Resolve a forwarded ask with the embedder's answer; `answer=None` means the deadline expired."""
    if answer is None:
        return PolicyDecision("deny", "deadline", "no answer before the deadline", "denied", "deadline", verdict=verdict)
    if answer.decision == "allow":
        return PolicyDecision("abstain" if deny_only else "allow", "embedder", None, "allowed", "embedder", verdict=verdict)
    if answer.decision == "deny":
        return PolicyDecision("deny", "embedder", answer.reason or "denied by the embedder", "denied", "embedder", verdict=verdict)
    if answer.decision == "replace" and answer.replacement is not None and verdict.call is not None:
        if deny_only:
            return PolicyDecision("deny", "embedder", "replace is refused under --deny-only", "denied", "embedder", verdict=verdict)
        again = decide(replace_input(verdict.call, answer.replacement), ctx)
        again.replaced = True
        if again.behavior == "allow":
            return PolicyDecision("allow", "embedder", None, "allowed", "embedder", verdict=again)
        return PolicyDecision("deny", "embedder", "a replacement must be allowed by policy on its own"
                              + (f": {reason_text(again)}" if again.behavior == "deny" else ""), "denied", "embedder", verdict=again)
    return PolicyDecision("deny", "embedder", "an abstention does not answer a policy question", "unavailable", "embedder", verdict=verdict)

