"""What the engine answers: the verdict, each subject's result, and how a verdict settles.

What belongs here: `Verdict` and `SubjectResult` (and their JSON for `permissions explain`),
`ExternalDecision` (a metaharness decision given to the engine as an external decider) and
`settle` (what finally happened when nobody has to be asked: the trail's `outcome` and `by`).

Rules it keeps:
* a verdict lists every subject with its own result, whatever decided the call;
* an allow or a deny settles at once; an ask settles only by an answer: the embedder's allow or
  deny answers it (once, writing nothing), otherwise a person when someone can answer, and
  with nobody to answer it is `unavailable` — refused, fail-closed.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .reasons import trail_by

if TYPE_CHECKING:
    from .calls import Call

__all__ = ["Behavior", "SubjectResult", "Verdict", "ExternalDecision", "Settlement", "settle"]

Behavior = Literal["allow", "ask", "deny"]


@dataclass(slots=True)
class SubjectResult:
    kind: str  # cmd | read | write | host | mcp | tool | agent | skill | opaque
    label: str
    result: Behavior = "allow"
    reason: str = ""
    rule: str | None = None
    scope: str | None = None
    file: str | None = None
    words: list[str] | None = None
    path: str | None = None
    real: str | None = None
    why: str | None = None  # opaque: why

    def to_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"kind": self.kind}
        if self.words is not None:
            shown["words"] = self.words
        if self.path is not None:
            shown["path"] = self.path
        if self.real is not None:
            shown["real"] = self.real
        if self.kind in ("host",):
            shown["host"] = self.label
        if self.kind in ("mcp", "tool", "agent", "skill"):
            shown["name"] = self.label
        if self.why is not None:
            shown["why"] = self.why
        shown.update({"result": self.result, "reason": self.reason})
        if self.rule is not None:
            shown["rule"] = self.rule
            shown["scope"] = self.scope
        return shown


@dataclass(slots=True)
class Verdict:
    behavior: Behavior
    reason: str
    principal: str
    subjects: list[SubjectResult]
    rule: str | None = None
    scope: str | None = None
    file: str | None = None
    mode: str = "manual"
    workspace_mode: str = "workspace-write"
    tool: str = ""
    matched: str | None = None  # for deny/maybe-deny: the subject text that matched
    remember: dict[str, str] | None = None  # scope -> rule "always allow" would write
    remember_why_not: str | None = None
    replaced: bool = False  # decided on an embedder's replacement input
    call: "Call | None" = None
    principal_truncated: bool = False
    input_sha256: str | None = None
    opaque_why: list[str] = field(default_factory=list)

    @property
    def rememberable(self) -> bool:
        return self.remember is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.behavior, "reason": self.reason, "rule": self.rule, "scope": self.scope,
            "file": self.file, "mode": self.mode, "workspace_mode": self.workspace_mode,
            "principal": self.principal, "subjects": [subject.to_json() for subject in self.subjects],
            "remember": (self.remember or {}).get("local"),
        }


@dataclass(frozen=True, slots=True)
class ExternalDecision:
    """A metaharness decision for this call, given to the engine as an external decider.

    The one class for it: oharness's stdio reads a `decision` line into it and its gates pass it on.
    """

    decision: Literal["allow", "deny", "abstain", "replace"]
    _: KW_ONLY  # the rest by name: two classes of this name once took them in two orders
    decided_by: str | None = None  # frame | observe | policy | embedder | ask | deadline; None: not named
    reason: str | None = None
    replacement: Any = None  # the input a `replace` runs with, as delivered (the engine re-decides a mapping)


@dataclass(frozen=True, slots=True)
class Settlement:
    """What finally happened when the verdict did not need a person: trail `outcome` and `by`."""

    outcome: Literal["allowed", "denied", "unavailable"]
    by: str
    note: str | None = None


def settle(verdict: Verdict, *, can_ask: bool, external: ExternalDecision | None = None) -> Settlement | None:
    """Settle a verdict without a prompt; None means "ask a person now"."""
    if verdict.behavior == "allow":
        return Settlement("allowed", trail_by(verdict.reason, "rule"))
    if verdict.behavior == "deny":
        return Settlement("denied", trail_by(verdict.reason, "engine"))
    answered_by_embedder = external is not None and external.decided_by == "embedder"
    if answered_by_embedder and external.decision == "allow":
        return Settlement("allowed", "embedder")  # the embedder's allow answers the ask, once
    if answered_by_embedder and external.decision == "deny":
        return Settlement("denied", "embedder", external.reason)
    if can_ask:
        return None
    return Settlement("unavailable", "none")
