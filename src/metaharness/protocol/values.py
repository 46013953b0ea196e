"""Shared value types of the wire (the user reference: docs/reference/wire.md).

Pure msgspec structs, no I/O. Field order is wire order: msgspec writes struct
fields in declaration order, so never reorder a field here without the spec.
`None` is written as an explicit `null` (the null rule); fields that
the spec says are *omitted* when empty use `msgspec.UNSET`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import Meta, Struct

U32 = Annotated[int, Meta(ge=0, le=4_294_967_295)]
U64 = Annotated[int, Meta(ge=0)]  # msgspec bounds stop at int64; the decoder checks the u64 ceiling itself
I32 = Annotated[int, Meta(ge=-2_147_483_648, le=2_147_483_647)]
I64 = Annotated[int, Meta(ge=-9_223_372_036_854_775_808, le=9_223_372_036_854_775_807)]
Digest = str  # bare lowercase hex SHA-256

Seam = Literal["registration", "hook", "control_request", "owned_tool", "none"]
DecidedBy = Literal["embedder", "frame", "deadline", "adapter", "observe", "policy"]
RefusalCode = Literal["UNSUPPORTED_CONTROL", "UNKNOWN_CALL", "TOO_LATE", "MALFORMED", "SHADOWED"]
CloseReason = Literal["completed", "budget", "killed", "error", "steer-halt"]


class StepRef(Struct, kw_only=True):
    workflow: str
    state: str
    index: U32
    attempt: U32


# --- decisions: an object tagged by its own `decision` key -----------------


class Allow(Struct, tag_field="decision", tag="allow"):
    pass


class Deny(Struct, tag_field="decision", tag="deny"):
    reason: str


class Replace(Struct, tag_field="decision", tag="replace"):
    input: Any


class Abstain(Struct, tag_field="decision", tag="abstain"):
    pass


Decision = Union[Allow, Deny, Replace, Abstain]


# --- step outcomes ---------------------------------------------------------------


class Completed(Struct, tag_field="outcome", tag="completed"):
    pass


class Failed(Struct, tag_field="outcome", tag="failed"):
    reason: str


class NoVerdict(Struct, tag_field="outcome", tag="no_verdict"):
    reason: str


StepOutcome = Union[Completed, Failed, NoVerdict]


# --- command outcomes --------------------------------------------------------------


class Refusal(Struct):
    code: RefusalCode
    reason: str


class Ok(Struct, tag_field="result", tag="ok"):
    applies_at: str | None = None


class Refused(Struct, tag_field="result", tag="refused"):
    refused: Refusal


CommandOutcome = Union[Ok, Refused]


def refused(code: str, reason: str) -> Refused:
    return Refused(refused=Refusal(code=code, reason=reason))  # type: ignore[arg-type]


# --- figures -----------------------------------------------------------------------


class Usage(Struct, kw_only=True):
    input_tokens: U64 | None = None
    output_tokens: U64 | None = None
    cache_read_input_tokens: U64 | None = None
    cache_creation_input_tokens: U64 | None = None
    service_tier: str | None = None
    thinking_tokens: U64 | None = None
    iterations: U64 | None = None
    speed: str | None = None
    cost_usd: float | None = None


class PermissionDenial(Struct, kw_only=True):
    tool_name: str | None = None
    tool_use_id: str | None = None
    tool_input: Any = None


class DecisionCensus(Struct, kw_only=True):
    allowed: U32 = 0
    denied: U32 = 0
    replaced: U32 = 0
    abstained: U32 = 0
    by_seam: dict[Seam, U32] = msgspec.field(default_factory=dict)
    by_decider: dict[DecidedBy, U32] = msgspec.field(default_factory=dict)


class RateLimitInfo(Struct, kw_only=True):
    status: str | None = None
    window: str | None = None
    resets_at: I64 | None = None
    utilization: float | None = None
    using_overage: bool | None = None


class TranscriptRef(Struct, kw_only=True):
    path: str | None = None
    digest: Digest | None = None
    bytes: U64 | None = None


class PluginRef(Struct, kw_only=True):
    name: str | None = None
    source: str | None = None
    version: str | None = None


class McpServerRef(Struct, kw_only=True):
    name: str | None = None
    status: str | None = None


class WithheldTool(Struct, kw_only=True):
    tool: str
    reason: str


class ImposedRow(Struct, kw_only=True):
    row: str
    how: str


class UnavailableRow(Struct, kw_only=True):
    row: str
    why: str


class InstalledPlugin(Struct, kw_only=True):
    name: str
    source: str
    installed_at: str
    digest: Digest
    loaded_by: str


class HermeticAttestation(Struct, kw_only=True):
    mode: Literal["off", "on", "strict"] = "off"
    decisions: Literal["frame", "ask", "observe", "policy"] = "frame"
    imposed: list[ImposedRow] = msgspec.field(default_factory=list)
    unavailable: list[UnavailableRow] = msgspec.field(default_factory=list)
    ambient_inputs: list[str] = msgspec.field(default_factory=list)
    installed_plugins: list[InstalledPlugin] = msgspec.field(default_factory=list)
    deny_only: bool = False


class Exited(Struct, tag_field="kind", tag="exited"):
    code: I32


class Signaled(Struct, tag_field="kind", tag="signaled"):
    signal: I32


class UnknownTermination(Struct, tag_field="kind", tag="unknown"):
    pass


ProcessTermination = Union[Exited, Signaled, UnknownTermination]


class FinalAnswer(Struct, kw_only=True):
    text: str
    turn_id: str | None = None


class ObservedModel(Struct, kw_only=True):
    turn: U32
    turn_id: str | None = None
    model: str | None = None
    scope: Literal["turn_selection"] = "turn_selection"


class PolicyAsk(Struct, kw_only=True):
    """Why the `policy` engine forwards a call to the embedder (docs/guides/policy.md)."""

    behavior: Literal["ask"] = "ask"
    reason: str
    rule: str | None = None
    scope: str | None = None
    principal: str
