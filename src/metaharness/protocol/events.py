"""The twenty events of `metaharness.event/1` (the user reference: docs/reference/wire.md).

Each event is a msgspec struct tagged by `event`; its fields are the payload in
wire order. The envelope (`format`, `seq`, `run`, `at`) is not part of these
structs: the stream writer (`stream.py`) owns it, and it alone assigns `seq`.
Optional fields default to `None` and are written as `null`; the four fields the
spec omits when empty default to `UNSET` (and `warning.model_failure`, written only on
MODEL_REQUEST_FAILED).
"""

from __future__ import annotations

from typing import Any, Literal, Union

import msgspec
from msgspec import UNSET, Struct, UnsetType

from .failures import ModelFailure
from .harnesses import Kind
from .values import (
    U32,
    U64,
    I32,
    I64,
    DecidedBy,
    Decision,
    DecisionCensus,
    Digest,
    FinalAnswer,
    HermeticAttestation,
    McpServerRef,
    ObservedModel,
    PermissionDenial,
    PluginRef,
    PolicyAsk,
    ProcessTermination,
    RateLimitInfo,
    Seam,
    StepOutcome,
    StepRef,
    TranscriptRef,
    UnknownTermination,
    Usage,
    WithheldTool,
    CommandOutcome,
    CloseReason,
)

EVENT_FORMAT = "metaharness.event/1"


class _Event(Struct, tag_field="event", kw_only=True):
    pass


class SessionStarted(_Event, tag="session.started", kw_only=True):
    adapter: Kind  # a kind of the registry (protocol/harnesses.py)
    adapter_class: Literal["harness", "direct_provider"] = "harness"
    harness_version: str | None = None
    session_id: str | None = None
    model: str | None = None
    permission_mode: str | None = None
    credential_source: str | None = None
    output_style: str | None = None
    cwd: str | None = None
    offered_tools: list[str] | None = None
    available_operations: list[str] | UnsetType = UNSET
    withheld: list[WithheldTool] | None = None
    slash_commands: list[str] | None = None
    skills: list[str] | None = None
    agents: list[str] | None = None
    plugins: list[PluginRef] | None = None
    mcp_servers: list[McpServerRef] | None = None
    inputs_digest: Digest | None = None
    # req: always written, and a line without them is malformed
    transcript: TranscriptRef
    hermetic: HermeticAttestation


class SessionEnded(_Event, tag="session.ended", kw_only=True):
    final_answer: FinalAnswer | None = None
    observed_models: list[ObservedModel] | None = None
    is_error: bool | None = None
    subtype: str | None = None
    stop_reason: str | None = None
    terminal_reason: str | None = None
    api_error_status: str | None = None
    num_turns: U64 | None = None
    duration_ms: U64 | None = None
    duration_api_ms: U64 | None = None
    ttft_ms: U64 | None = None
    time_to_request_ms: U64 | None = None
    total_cost_usd: float | None = None
    metered_cost_usd: float | None = None
    permission_denials: list[PermissionDenial] | None = None
    subagents_spawned: U64 | None = None
    usage: Usage | None = None
    model_usage: dict[str, Usage] | None = None
    census: DecisionCensus  # req


class StepEntered(_Event, tag="step.entered", kw_only=True):
    step: StepRef
    frame_digest: Digest | None = None


class StepLeft(_Event, tag="step.left", kw_only=True):
    step: StepRef
    outcome: StepOutcome


class TurnStarted(_Event, tag="turn.started", kw_only=True):
    turn: U32
    frame_digest: Digest | None = None


class TurnEnded(_Event, tag="turn.ended", kw_only=True):
    turn: U32
    stop_reason: str | None = None


class Text(_Event, tag="text", kw_only=True):
    text: str
    request_id: str | None = None


class Thinking(_Event, tag="thinking", kw_only=True):
    text: str
    request_id: str | None = None


class ThinkingEstimate(_Event, tag="thinking.estimate", kw_only=True):
    estimate: U64
    delta: I64 | None = None


class Injection(_Event, tag="injection", kw_only=True):
    text: str
    origin: str | None = None


class ToolRequested(_Event, tag="tool.requested", kw_only=True):
    call_id: str
    name: str
    input: Any
    operations: list[str] | UnsetType = UNSET
    subjects: list[str] | UnsetType = UNSET
    decision_required: bool
    deadline_ms: U64 | None = None
    seam: Seam
    policy: PolicyAsk | UnsetType = UNSET


class ToolDecided(_Event, tag="tool.decided", kw_only=True):
    call_id: str
    decision: Decision
    decided_by: DecidedBy
    seam: Seam
    latency_ms: U64 | None = None


class ToolResult(_Event, tag="tool.result", kw_only=True):
    exit_code: I32 | None = None
    outcome_source: str | None = None
    call_id: str
    is_error: bool | None = None
    content: Any = None
    bytes: U64 | None = None
    tool_use_result: Any = None


class UsageReport(_Event, tag="usage", kw_only=True):
    request_id: str | None = None
    model: str | None = None
    usage: Usage


class RateLimit(_Event, tag="rate_limit", kw_only=True):
    info: RateLimitInfo


class CommandResult(_Event, tag="command.result", kw_only=True):
    id: str
    outcome: CommandOutcome


class WarningEvent(_Event, tag="warning", kw_only=True):
    code: str
    message: str
    # Only on MODEL_REQUEST_FAILED: the failure as a value (protocol/failures.py); omitted otherwise.
    model_failure: ModelFailure | UnsetType = UNSET
    # Only on BUDGET_REACHED: what metaharness priced when the run stopped, in US dollars; omitted otherwise.
    metered_cost_usd: float | UnsetType = UNSET


class Opaque(_Event, tag="opaque", kw_only=True):
    vendor_type: str | None = None
    vendor_subtype: str | None = None
    digest: Digest
    source_line: U64 | None = None


class AuthExpired(_Event, tag="auth.expired", kw_only=True):
    credential_source: str | None = None
    detail: str | None = None
    source_line: U64 | None = None


class StreamClosed(_Event, tag="stream.closed", kw_only=True):
    process: ProcessTermination = msgspec.field(default_factory=UnknownTermination)
    events: U64
    reason: CloseReason
    run_id: str


Event = Union[
    SessionStarted,
    SessionEnded,
    StepEntered,
    StepLeft,
    TurnStarted,
    TurnEnded,
    Text,
    Thinking,
    ThinkingEstimate,
    Injection,
    ToolRequested,
    ToolDecided,
    ToolResult,
    UsageReport,
    RateLimit,
    CommandResult,
    WarningEvent,
    Opaque,
    AuthExpired,
    StreamClosed,
]

EVENT_TYPES: tuple[type, ...] = Event.__args__  # type: ignore[attr-defined]
# The twenty names in canonical order.
EVENT_NAMES: tuple[str, ...] = tuple(t.__struct_config__.tag for t in EVENT_TYPES)
EVENT_BY_NAME: dict[str, type] = dict(zip(EVENT_NAMES, EVENT_TYPES))


def event_name(event: Any) -> str:
    return type(event).__struct_config__.tag
