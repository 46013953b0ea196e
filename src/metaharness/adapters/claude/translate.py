"""Claude Code stream-json records → metaharness items (docs/guides/claude-and-codex.md).

Pure and synchronous: `Translator.feed(raw_line, line_no)` returns the items one
stdout line yields; nothing here does I/O or reads a clock. An item is one of

* `("session_started", SessionStarted, at)`, `("turn_started", at)`,
  `("turn_ended", stop_reason, at)`, `("emit", event, at)`,
* `("call", call_id, name, input, at)` — a `tool_use` block, presented by the seam,
* `("result", SessionEnded, at)` — a `result`; the last one is the session's end,
* `("control", obj)` — control traffic, the seam's own (yields no event),
* `("opaque", vendor_type, vendor_subtype, line_no, raw_line)` — a record it cannot map.

Rules kept: every non-blank line yields its events or exactly one opaque, never a
crash (a known record that cannot be read is opaque too); `at` is the record's own
`timestamp`; usage and cost are copied as the vendor reported them, never summed;
lines read before the first `system/init` are held and released right after
`session_started`, before `turn_started`.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from typing import Any

import msgspec

from metaharness.protocol.events import (
    AuthExpired,
    Injection,
    RateLimit,
    SessionEnded,
    SessionStarted,
    Text,
    Thinking,
    ThinkingEstimate,
    ToolResult,
    UsageReport,
    WarningEvent,
)
from metaharness.protocol.refusals import WarningCode
from metaharness.protocol.values import (
    DecisionCensus,
    FinalAnswer,
    HermeticAttestation,
    McpServerRef,
    PermissionDenial,
    PluginRef,
    RateLimitInfo,
    TranscriptRef,
    Usage,
)

Item = tuple
EXPIRED_LOGIN_PHRASES = ("session has expired", "please run /login", "failed to refresh access token")
CONTROL_TYPES = ("control_request", "control_response", "control_cancel_request")
U64_MAX = 18_446_744_073_709_551_615


class Unreadable(Exception):
    """A known record whose shape cannot be read; it becomes opaque."""


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _u64(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > U64_MAX:
        return None
    return value


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if value == value and value not in (float("inf"), float("-inf")) else None


def _strings(value: Any) -> list[str] | None:
    if not isinstance(value, list):
        return None
    out = []
    for entry in value:
        if isinstance(entry, str):
            out.append(entry)
        elif isinstance(entry, dict) and isinstance(entry.get("name"), str):
            out.append(entry["name"])
    return out


def usage_from(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    details = raw.get("output_tokens_details")
    iterations = raw.get("iterations")
    return Usage(
        input_tokens=_u64(raw.get("input_tokens")),
        output_tokens=_u64(raw.get("output_tokens")),
        cache_read_input_tokens=_u64(raw.get("cache_read_input_tokens")),
        cache_creation_input_tokens=_u64(raw.get("cache_creation_input_tokens")),
        service_tier=_str(raw.get("service_tier")),
        thinking_tokens=_u64(details.get("thinking_tokens")) if isinstance(details, dict) else None,
        iterations=len(iterations) if isinstance(iterations, list) else None,
        speed=_str(raw.get("speed")),
        cost_usd=None,
    )


def model_usage_from(raw: Any) -> dict[str, Usage] | None:
    if not isinstance(raw, dict):
        return None
    out: dict[str, Usage] = {}
    for model in sorted(raw):
        entry = raw[model]
        if not isinstance(entry, dict):
            continue
        out[model] = Usage(
            input_tokens=_u64(entry.get("inputTokens")),
            output_tokens=_u64(entry.get("outputTokens")),
            cache_read_input_tokens=_u64(entry.get("cacheReadInputTokens")),
            cache_creation_input_tokens=_u64(entry.get("cacheCreationInputTokens")),
            cost_usd=_float(entry.get("costUSD")),
        )
    return out


def content_bytes(content: Any) -> int | None:
    """Size of a tool result's content: UTF-8 bytes of its text."""
    if isinstance(content, str):
        return len(content.encode("utf-8"))
    if isinstance(content, list):
        total = 0
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                total += len(block["text"].encode("utf-8"))
        return total
    return None


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]
    return []


class Translator:
    """One run's record → item translation. `expect_replay` registers each user line
    the adapter wrote (kind `prompt`, `boundary` or `steer`) so its replay maps right."""

    def __init__(
        self,
        *,
        transcript_path: str | None = None,
        hermetic: HermeticAttestation | None = None,
        credential_source: str | None = None,
    ) -> None:
        self.transcript_path = transcript_path
        self.hermetic = hermetic or HermeticAttestation()
        self.credential_source = credential_source
        self.started = False
        self.turn = 0
        self.held: list[Item] = []
        self.usage_seen: set[str] = set()
        self.pending_replays: deque[tuple[str, str]] = deque()  # (kind, joined text)
        self.last_result: SessionEnded | None = None
        self.last_result_at: str | None = None
        self.in_turn = False

    # --- the adapter's side -------------------------------------------------------
    def expect_replay(self, kind: str, blocks: list[str]) -> None:
        self.pending_replays.append((kind, "\n".join(blocks)))

    @property
    def unreplayed(self) -> int:
        return len(self.pending_replays)

    # --- feeding -----------------------------------------------------------------------
    def feed(self, raw: bytes, line_no: int | None) -> list[Item]:
        stripped = raw.rstrip(b"\r\n")
        if not stripped.strip():
            return []
        try:
            record = json.loads(stripped.decode("utf-8"), parse_constant=_reject_constant)
        except (ValueError, UnicodeDecodeError):
            return self._hold_or_emit([("opaque", None, None, line_no, stripped)])
        if not isinstance(record, dict):
            return self._hold_or_emit([("opaque", None, None, line_no, stripped)])
        rtype = _str(record.get("type"))
        subtype = _str(record.get("subtype"))
        if rtype in CONTROL_TYPES:
            return [("control", record)]
        try:
            items = self._map(record, rtype, subtype, line_no)
        except (Unreadable, msgspec.ValidationError, TypeError, KeyError, AttributeError, ValueError):
            items = [("opaque", rtype, subtype, line_no)]
        # Opaque items carry their own line (its digest is written).
        items = [item + (stripped,) if item[0] == "opaque" else item for item in items]
        return self._hold_or_emit(items)

    def _hold_or_emit(self, items: list[Item]) -> list[Item]:
        if self.started:
            return items
        out: list[Item] = []
        for item in items:
            if item[0] == "session_started":
                out.append(item)
                out.extend(self.held)
                self.held.clear()
                self.started = True
            elif self.started:
                out.append(item)
            else:
                self.held.append(item)
        return out

    def release_held(self) -> list[Item]:
        """Held items when no opening record ever came (written at wind-up)."""
        held, self.held = self.held, []
        return held

    # --- mapping --------------------------------------------------------------------
    def _map(self, record: dict[str, Any], rtype: str | None, subtype: str | None, line_no: int | None) -> list[Item]:
        at = _str(record.get("timestamp"))
        out: list[Item] = []
        if self._mentions_expired_login(record):
            out.append(("emit", AuthExpired(credential_source=self.credential_source,
                                            detail=self._expired_detail(record), source_line=line_no), at))
        if rtype == "system":
            out += self._system(record, subtype, at, line_no)
        elif rtype == "assistant":
            out += self._assistant(record, at, line_no)
        elif rtype == "user":
            out += self._user(record, at, line_no)
        elif rtype == "rate_limit_event":
            info = record.get("rate_limit_info", record)
            if not isinstance(info, dict):
                raise Unreadable
            resets = info.get("resetsAt")
            out.append(("emit", RateLimit(info=RateLimitInfo(
                status=_str(info.get("status")),
                window=_str(info.get("rateLimitType")),
                resets_at=resets if isinstance(resets, int) and not isinstance(resets, bool) else None,
                utilization=_float(info.get("utilization")),
                using_overage=info.get("isUsingOverage") if isinstance(info.get("isUsingOverage"), bool) else None,
            )), at))
        elif rtype == "result":
            out += self._result(record, at)
        else:
            out.append(("opaque", rtype, subtype, line_no))
        return out

    def _system(self, record: dict[str, Any], subtype: str | None, at: str | None, line_no: int | None) -> list[Item]:
        if subtype == "init":
            self.turn += 1
            self.in_turn = True
            if not self.started:
                return [("session_started", self._session_started(record), at), ("turn_started", at)]
            return [("turn_started", at)]
        if subtype == "permission_denied":
            message = _str(record.get("message")) or _str(record.get("content"))
            if message is None:
                raise Unreadable
            return [("emit", WarningEvent(code=WarningCode.VENDOR_PERMISSION_DENIED, message=message), at)]
        if subtype == "informational":
            message = _str(record.get("content")) or _str(record.get("message"))
            if message is None:
                raise Unreadable
            return [("emit", WarningEvent(code=WarningCode.VENDOR_NOTICE, message=message), at)]
        if subtype == "api_retry":
            parts = [f"{k}={record[k]}" for k in ("attempt", "max_retries", "retry_delay_ms", "error_status", "error")
                     if k in record and record[k] is not None]
            message = "the vendor retried an API request" + (f" ({', '.join(parts)})" if parts else "")
            return [("emit", WarningEvent(code=WarningCode.VENDOR_API_RETRY, message=message), at)]
        if subtype == "background_tasks_changed":
            tasks = record.get("tasks")
            if isinstance(tasks, list) and tasks:
                return [("emit", WarningEvent(code=WarningCode.VENDOR_BACKGROUND_TASKS,
                                               message=f"{len(tasks)} background task(s) running"), at)]
            return [("opaque", "system", subtype, line_no)]
        if subtype == "thinking_tokens":
            estimate = _u64(record.get("estimated_tokens"))
            if estimate is None:
                raise Unreadable
            delta = record.get("estimated_tokens_delta")
            return [("emit", ThinkingEstimate(
                estimate=estimate,
                delta=delta if isinstance(delta, int) and not isinstance(delta, bool) else None), at)]
        return [("opaque", "system", subtype, line_no)]

    def _session_started(self, record: dict[str, Any]) -> SessionStarted:
        plugins = record.get("plugins")
        mcp = record.get("mcp_servers")
        return SessionStarted(
            adapter="claude",
            harness_version=_str(record.get("claude_code_version")),
            session_id=_str(record.get("session_id")),
            model=_str(record.get("model")),
            permission_mode=_str(record.get("permissionMode")),
            credential_source=_str(record.get("apiKeySource")),
            output_style=_str(record.get("output_style")),
            cwd=_str(record.get("cwd")),
            offered_tools=_strings(record.get("tools")),
            slash_commands=_strings(record.get("slash_commands")),
            skills=_strings(record.get("skills")),
            agents=_strings(record.get("agents")),
            plugins=[PluginRef(name=_str(p.get("name")), source=_str(p.get("source")) or _str(p.get("path")),
                               version=_str(p.get("version")))
                     for p in plugins if isinstance(p, dict)] if isinstance(plugins, list) else None,
            mcp_servers=[McpServerRef(name=_str(m.get("name")), status=_str(m.get("status")))
                         for m in mcp if isinstance(m, dict)] if isinstance(mcp, list) else None,
            transcript=TranscriptRef(path=self.transcript_path),
            hermetic=self.hermetic,
        )

    def _assistant(self, record: dict[str, Any], at: str | None, line_no: int | None) -> list[Item]:
        message = record.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            raise Unreadable
        request_id = _str(record.get("request_id"))
        out: list[Item] = []
        for block in message["content"]:
            if not isinstance(block, dict):
                raise Unreadable
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                out.append(("emit", Text(text=block["text"], request_id=request_id), at))
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                out.append(("emit", Thinking(text=block["thinking"], request_id=request_id), at))
            elif kind == "tool_use" and isinstance(block.get("id"), str) and isinstance(block.get("name"), str):
                out.append(("call", block["id"], block["name"], block.get("input"), at))
        message_id = _str(message.get("id"))
        usage = usage_from(message.get("usage"))
        if usage is not None and message_id is not None and message_id not in self.usage_seen:
            self.usage_seen.add(message_id)
            out.append(("emit", UsageReport(request_id=request_id, model=_str(message.get("model")), usage=usage), at))
        if not out:
            return [("opaque", "assistant", None, line_no)]
        return out

    def _user(self, record: dict[str, Any], at: str | None, line_no: int | None) -> list[Item]:
        message = record.get("message")
        if not isinstance(message, dict):
            raise Unreadable
        content = message.get("content")
        if record.get("isReplay") is True:
            return [self._replay(content, at, line_no)]
        out: list[Item] = []
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}] if isinstance(content, str) else None
        if blocks is None:
            raise Unreadable
        for block in blocks:
            if not isinstance(block, dict):
                raise Unreadable
            if block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                result_content = block.get("content")
                is_error = block.get("is_error")
                out.append(("emit", ToolResult(
                    exit_code=None,
                    outcome_source="user.tool_result",
                    call_id=block["tool_use_id"],
                    is_error=is_error if isinstance(is_error, bool) else None,
                    content=result_content,
                    bytes=content_bytes(result_content),
                    tool_use_result=record.get("tool_use_result"),
                ), at))
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                origin = "synthetic" if record.get("isSynthetic") is True else None
                out.append(("emit", Injection(text=block["text"], origin=origin), at))
        if not out:
            return [("opaque", "user", None, line_no)]
        return out

    def _replay(self, content: Any, at: str | None, line_no: int | None) -> Item:
        """A line the adapter wrote, consumed now. Matched by its text; a replay whose text is no
        line's as written (seen: a steer left queued by an interrupt, replayed as a turn of its
        own) still consumed one — the lines written so far that its text holds, else the oldest —
        so `unreplayed` never waits for a replay that will not come."""
        joined = "\n".join(_texts(content))
        pending = self.pending_replays
        taken = [i for i, (_kind, text) in enumerate(pending) if text == joined][:1] \
            or [i for i, (_kind, text) in enumerate(pending) if text and text in joined] or ([0] if pending else [])
        kinds = [pending[i][0] for i in taken]
        for index in reversed(taken):
            del pending[index]
        if "steer" in kinds:
            return ("emit", Injection(text=joined, origin="steer"), at)
        return ("opaque", "user", None, line_no)

    def _result(self, record: dict[str, Any], at: str | None) -> list[Item]:
        is_error = record.get("is_error")
        denials_raw = record.get("permission_denials")
        stats = record.get("subagent_stats")
        status = record.get("api_error_status")
        final = record.get("result")
        ended = SessionEnded(
            final_answer=FinalAnswer(text=final) if isinstance(final, str) else None,
            is_error=is_error if isinstance(is_error, bool) else None,
            subtype=_str(record.get("subtype")),
            stop_reason=_str(record.get("stop_reason")),
            terminal_reason=_str(record.get("terminal_reason")),
            api_error_status=str(status) if isinstance(status, (str, int)) and not isinstance(status, bool) else None,
            num_turns=_u64(record.get("num_turns")),
            duration_ms=_u64(record.get("duration_ms")),
            duration_api_ms=_u64(record.get("duration_api_ms")),
            ttft_ms=_u64(record.get("ttft_ms")),
            time_to_request_ms=_u64(record.get("time_to_request_ms")),
            total_cost_usd=_float(record.get("total_cost_usd")),
            permission_denials=[
                PermissionDenial(tool_name=_str(d.get("tool_name")), tool_use_id=_str(d.get("tool_use_id")),
                                 tool_input=d.get("tool_input"))
                for d in denials_raw if isinstance(d, dict)
            ] if isinstance(denials_raw, list) else None,
            subagents_spawned=_u64(stats.get("spawned")) if isinstance(stats, dict) else None,
            usage=usage_from(record.get("usage")),
            model_usage=model_usage_from(record.get("modelUsage")),
            census=DecisionCensus(),  # the run loop's own count replaces it
        )
        self.last_result = ended
        self.last_result_at = at
        self.in_turn = False
        return [("turn_ended", _str(record.get("stop_reason")), at), ("result", ended, at)]

    @staticmethod
    def _candidate_texts(record: dict[str, Any]) -> list[str]:
        rtype = record.get("type")
        if rtype == "result":
            return [t for t in (_str(record.get("result")),) if t]
        if rtype == "assistant":
            message = record.get("message")
            return _texts(message.get("content")) if isinstance(message, dict) else []
        if rtype == "system":
            return [t for t in (_str(record.get("content")), _str(record.get("message")), _str(record.get("error"))) if t]
        return []

    def _mentions_expired_login(self, record: dict[str, Any]) -> bool:
        return any(phrase in text.lower() for text in self._candidate_texts(record) for phrase in EXPIRED_LOGIN_PHRASES)

    def _expired_detail(self, record: dict[str, Any]) -> str | None:
        for text in self._candidate_texts(record):
            if any(phrase in text.lower() for phrase in EXPIRED_LOGIN_PHRASES):
                return text
        return None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def line_digest(raw: bytes) -> str:
    """SHA-256 of a transcript line without its terminator (docs/reference/wire.md)."""
    if raw.endswith(b"\r\n"):
        raw = raw[:-2]
    elif raw.endswith(b"\n"):
        raw = raw[:-1]
    return hashlib.sha256(raw).hexdigest()


# --- a canonical text form of items, for the recorded-wire conformance check ----------



def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def encode_item(item: Item) -> str:
    """One line per item, compact JSON, pass-through values key-sorted. Deterministic:
    the conformance fixtures compare these lines byte for byte."""
    kind = item[0]
    if kind in ("emit", "session_started", "result"):
        event = item[1]
        body = msgspec.to_builtins(event)
        name = body.pop("event", None) or type(event).__struct_config__.tag
        if name == "tool.result":
            body["content"] = _sorted(body.get("content"))
            body["tool_use_result"] = _sorted(body.get("tool_use_result"))
        if name == "session.ended" and body.get("permission_denials"):
            for denial in body["permission_denials"]:
                denial["tool_input"] = _sorted(denial.get("tool_input"))
        doc: dict[str, Any] = {"item": kind, "at": item[2], "event": name}
        doc.update(body)
    elif kind == "call":
        doc = {"item": "call", "at": item[4], "call_id": item[1], "name": item[2], "input": _sorted(item[3])}
    elif kind == "turn_started":
        doc = {"item": "turn_started", "at": item[1]}
    elif kind == "turn_ended":
        doc = {"item": "turn_ended", "at": item[2], "stop_reason": item[1]}
    elif kind == "control":
        record = item[1]
        request = record.get("request") if isinstance(record.get("request"), dict) else {}
        doc = {"item": "control", "type": record.get("type"), "subtype": request.get("subtype")}
    elif kind == "opaque":
        doc = {"item": "opaque", "vendor_type": item[1], "vendor_subtype": item[2],
               "digest": line_digest(item[4]), "source_line": item[3]}
    else:  # pragma: no cover - every kind is listed above
        raise ValueError(kind)
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
