"""The permission gate: the one seam every tool call passes before it runs.

What belongs here: the small interface the loop calls (`Gate.check`), reading the external
decision metaharness delivers (`decision_from_wire`, into the engine's one `ExternalDecision`), and `ExternalOnlyGate`, a gate
that applies only the external decision (kept for tests of the loop). Sessions use the
permission engine's gate behind the same interface (`oharness.permission_gate`,
docs/reference/permissions.md); no rules are implemented here.

Rules it keeps: deny → refused with the decider's reason; replace → run with the
replaced input; allow / abstain / no decision → run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from metaharness.permissions import MODES, ExternalDecision

from .model import ToolCall

DEFAULT_MODE = "manual"
_KINDS = ("allow", "deny", "replace", "abstain")


def decision_from_wire(raw: Any, decided_by: Any = None) -> ExternalDecision:
    """Parse `{"decision": …}` of a stdio `decision` line; raises ValueError with one sentence when malformed."""
    if not isinstance(raw, dict) or raw.get("decision") not in _KINDS:
        raise ValueError("a decision must be an object whose `decision` is allow, deny, replace or abstain")
    kind = raw["decision"]
    if kind == "replace" and "input" not in raw:
        raise ValueError("a replace decision needs an `input`")
    reason = raw.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise ValueError("a decision's `reason` must be a string")
    return ExternalDecision(kind, decided_by=decided_by if isinstance(decided_by, str) else None, reason=reason,
                            replacement=raw.get("input"))


@dataclass(frozen=True)
class GateResult:
    allowed: bool
    reason: str | None
    input: Any  # what the tool runs with when allowed


class Gate(Protocol):
    mode: str

    async def check(self, call: ToolCall, external: ExternalDecision | None) -> GateResult: ...

    def set_mode(self, mode: str) -> None: ...


class ExternalOnlyGate:
    """Applies the external decision and nothing else (no rules of its own)."""

    def __init__(self, mode: str = DEFAULT_MODE) -> None:
        self.mode = mode

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown permission mode {mode!r} (one of {', '.join(MODES)})")
        self.mode = mode

    async def check(self, call: ToolCall, external: ExternalDecision | None) -> GateResult:
        if external is None or external.decision in ("allow", "abstain"):
            return GateResult(True, None, call.input)
        if external.decision == "deny":
            return GateResult(False, external.reason or "denied by the decider", call.input)
        return GateResult(True, None, external.replacement)
