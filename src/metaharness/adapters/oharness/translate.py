"""oharness stdio records → metaharness events (docs/internals/oharness-stdio.md).

Pure: one record in, the events (and context calls) it stands for out. A record
that cannot be read or has an unknown type becomes `opaque` — never dropped.
"""

from __future__ import annotations

from typing import Any

import msgspec

from metaharness.protocol.failures import ModelFailure, model_failure_warning
from metaharness.protocol.events import (
    Injection,
    SessionEnded,
    SessionStarted,
    Text,
    Thinking,
    ToolResult,
    UsageReport,
    WarningEvent,
)
from metaharness.protocol.values import (
    DecisionCensus,
    FinalAnswer,
    HermeticAttestation,
    McpServerRef,
    TranscriptRef,
    Usage,
)

_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def _u64(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def usage_of(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    return Usage(**{k: _u64(raw.get(k)) for k in _USAGE_KEYS},
                 cost_usd=raw.get("cost_usd") if isinstance(raw.get("cost_usd"), float) else None)


def session_started(record: dict) -> SessionStarted:
    return SessionStarted(
        adapter="oharness",
        harness_version=record.get("version"),
        session_id=record.get("session_id"),
        model=record.get("model"),
        permission_mode=record.get("permission_mode"),
        cwd=record.get("cwd"),
        offered_tools=list(record.get("tools") or []),
        withheld=[],
        skills=record.get("skills"),
        mcp_servers=[McpServerRef(name=s.get("name"), status=s.get("status"))
                     for s in record.get("mcp_servers") or [] if isinstance(s, dict)],
        transcript=TranscriptRef(path=record.get("transcript")),
        hermetic=HermeticAttestation(),  # the loop fills in what this run imposed
    )


def session_ended(record: dict) -> SessionEnded:
    final = record.get("final_text")
    return SessionEnded(
        final_answer=FinalAnswer(text=final) if isinstance(final, str) else None,
        is_error=record.get("is_error") if isinstance(record.get("is_error"), bool) else None,
        subtype=record.get("subtype"),
        stop_reason=record.get("stop_reason"),
        num_turns=_u64(record.get("num_turns")),
        duration_ms=_u64(record.get("duration_ms")),
        total_cost_usd=record.get("total_cost_usd") if isinstance(record.get("total_cost_usd"), float) else None,
        usage=usage_of(record.get("usage")),
        census=DecisionCensus(),  # the loop writes its own count
        api_error_status=record.get("api_error_status") if isinstance(record.get("api_error_status"), str) else None,
    )


def model_failure(record: dict) -> WarningEvent:
    """oharness's `model_error` record: a failed model request, in the run's own words."""
    failure = msgspec.convert(record["failure"], ModelFailure)
    return model_failure_warning(failure)


def simple_event(record: dict):
    """Events that map one to one; None for records that need the context."""
    kind = record.get("type")
    if kind == "text":
        return Text(text=record["text"], request_id=record.get("request_id"))
    if kind == "thinking":
        return Thinking(text=record["text"], request_id=record.get("request_id"))
    if kind == "injection":
        return Injection(text=record["text"], origin=record.get("origin"))
    if kind == "tool_result":
        exit_code = record.get("exit_code")
        return ToolResult(
            exit_code=exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
            outcome_source="oharness.tool_result",
            call_id=record["call_id"],
            is_error=record.get("is_error"),
            content=record.get("content"),
            bytes=_u64(record.get("bytes")),
            tool_use_result=None,
        )
    if kind == "usage":
        return UsageReport(request_id=record.get("request_id"), model=record.get("model"),
                           usage=usage_of(record.get("usage")) or Usage())
    return None
