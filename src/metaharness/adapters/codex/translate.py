"""App-server notifications → `metaharness.event/1` events (docs/guides/claude-and-codex.md).

What belongs here: the notification-to-event mapping table and the small state it needs (items
started but not completed, folded deltas, the turn counter, the last agent message,
the last token totals). Approvals are not here (`seam.py`), nor process control.

Rules kept:
* every notification yields its mapped events or exactly one `opaque`; nothing is
  dropped, and a line that cannot be read is one `opaque` too;
* streaming deltas are folded and yield no line of their own;
* `at` is the vendor's `emittedAtMs` rendered in RFC 3339 UTC with milliseconds —
  never a clock reading;
* lines derived before `session.started` are held and written right after it, or
  at wind-up when it never came.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Callable

from metaharness.adapters.base import RunContext
from metaharness.protocol.events import (
    Injection,
    SessionEnded,
    SessionStarted,
    Text,
    Thinking,
    ToolResult,
    UsageReport,
    RateLimit,
)
from metaharness.protocol.refusals import WarningCode
from metaharness.protocol.values import (
    DecisionCensus,
    FinalAnswer,
    HermeticAttestation,
    RateLimitInfo,
    TranscriptRef,
    Usage,
)

TOOL_ITEM_TYPES = frozenset(
    {"commandExecution", "fileChange", "mcpToolCall", "dynamicToolCall", "webSearch", "imageView",
     "collabAgentToolCall", "functionCall"}
)
PRESENTABLE = frozenset({"commandExecution", "fileChange"})
WARNING_METHODS = frozenset({"warning", "configWarning", "deprecationNotice"})


def rfc3339_ms(millis: Any) -> str | None:
    if not isinstance(millis, int) or isinstance(millis, bool):
        return None
    stamp = _dt.datetime.fromtimestamp(millis / 1000, tz=_dt.timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"


def usage_from(breakdown: Any) -> Usage:
    if not isinstance(breakdown, dict):
        return Usage()

    def count(key: str) -> int | None:
        value = breakdown.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    return Usage(
        input_tokens=count("inputTokens"),
        output_tokens=count("outputTokens"),
        cache_read_input_tokens=count("cachedInputTokens"),
        cache_creation_input_tokens=count("cacheWriteInputTokens"),
        thinking_tokens=count("reasoningOutputTokens"),
    )


class Translator:
    """Holds the mapping state of one app-server session."""

    def __init__(self, ctx: RunContext, on_turn_started: Callable[[str], None] | None = None,
                 on_turn_completed: Callable[[dict], None] | None = None) -> None:
        self.ctx = ctx
        self.on_turn_started = on_turn_started
        self.on_turn_completed = on_turn_completed
        self.started = False
        self.ended = False  # the session's end assembled (or a refused start, which writes none)
        self.held: list[Callable[[], None]] = []
        self.items: dict[str, dict] = {}  # item/started of commandExecution / fileChange by id
        self.deltas: dict[str, list[str]] = {}
        self.presented: set[str] = set()  # item ids presented for decision (seam.py adds)
        self.client_messages: dict[str, tuple[str, str]] = {}  # clientUserMessageId → (origin, text)
        self.model: str | None = None
        self.turns_completed = 0
        self.last_turn: dict | None = None
        self.last_agent_text: str | None = None
        self.last_agent_turn: str | None = None
        self.last_total: Any = None
        self.active_turn_id: str | None = None
        self.stop_reasons: list[str] = []

    # --- output with the hold rule ---------------------------------------------------
    def _out(self, action: Callable[[], None]) -> None:
        if self.started:
            action()
        else:
            self.held.append(action)

    def emit(self, event: Any, at: str | None) -> None:
        self._out(lambda: self.ctx.emit(event, at=at))

    def opaque(self, raw: bytes, line: int, vendor_type: str | None, vendor_subtype: str | None = None) -> None:
        self._out(lambda: self.ctx.opaque(raw, vendor_type=vendor_type, vendor_subtype=vendor_subtype,
                                          source_line=line))

    def warn(self, code: str, message: str) -> None:
        self._out(lambda: self.ctx.warn(code, message))

    def flush_held(self) -> None:
        held, self.held = self.held, []
        for action in held:
            action()

    # --- the opening record -----------------------------------------------------------
    def session_started(self, result: dict, transcript_path: str, hermetic: Any = None) -> None:
        thread = result.get("thread") or {}
        sandbox = result.get("sandbox") or {}
        self.model = result.get("model") if isinstance(result.get("model"), str) else None
        event = SessionStarted(
            adapter="codex",
            harness_version=thread.get("cliVersion"),
            session_id=thread.get("id"),
            model=self.model,
            permission_mode=sandbox.get("type") if isinstance(sandbox, dict) else None,
            cwd=result.get("cwd"),
            transcript=TranscriptRef(path=transcript_path),
            hermetic=hermetic if hermetic is not None else HermeticAttestation(),
        )
        self.ctx.session_started(event, at=None)  # a JSON-RPC result carries no time
        self.started = True
        self.flush_held()

    # --- notifications ----------------------------------------------------------------
    def notification(self, message: dict, raw: bytes, line: int) -> None:
        method = message.get("method")
        if message.get("_unreadable") or not isinstance(method, str):
            self.opaque(raw, line, None)
            return
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        at = rfc3339_ms(message.get("emittedAtMs"))
        handler = _HANDLERS.get(method)
        try:
            handled = handler(self, params, raw, line, at) if handler else False
        except (KeyError, TypeError, ValueError, AttributeError):
            # A known type that could not be read is opaque too (see `opaque` in docs/reference/wire.md).
            handled = False
        if not handled:
            subtype = None
            item = params.get("item")
            if isinstance(item, dict) and isinstance(item.get("type"), str):
                subtype = item["type"]
            self.opaque(raw, line, method, subtype)

    # Each handler returns True when it wrote the mapped events.
    def _turn_started(self, params: dict, raw: bytes, line: int, at: str | None) -> bool:
        turn = params["turn"]
        self.active_turn_id = turn["id"]
        if self.on_turn_started is not None:
            self.on_turn_started(turn["id"])
        self._out(lambda: self.ctx.turn_started(at=at))
        return True

    def _turn_completed(self, params: dict, raw: bytes, line: int, at: str | None) -> bool:
        turn = params["turn"]
        status = turn.get("status")
        self.turns_completed += 1
        self.last_turn = turn
        if self.active_turn_id == turn.get("id"):
            self.active_turn_id = None
        if self.on_turn_completed is not None:
            self.on_turn_completed(turn)
        self._out(lambda: self.ctx.turn_ended(status if isinstance(status, str) else None, at=at))
        return True

    def _item_started(self, params: dict, raw: bytes, line: int, at: str | None) -> bool:
        item = params["item"]
        if item.get("type") in PRESENTABLE:
            self.items[item["id"]] = item  # stored for presentation; no line of its own
            return True
        return False

    def _item_completed(self, params: dict, raw: bytes, line: int, at: str | None) -> bool:
        item = params["item"]
        kind = item.get("type")
        if kind == "agentMessage":
            text = item.get("text")
            if not isinstance(text, str):
                text = "".join(self.deltas.pop(item["id"], []))
            self.deltas.pop(item["id"], None)
            self.last_agent_text = text
            self.last_agent_turn = params.get("turnId")
            self.emit(Text(text=text), at)
            return True
        if kind == "reasoning":
            parts = [p for p in (item.get("summary") or []) + (item.get("content") or []) if isinstance(p, str)]
            self.emit(Thinking(text="\n".join(parts)), at)
            return True
        if kind == "userMessage":
            return self._user_message(item, at)
        if kind in TOOL_ITEM_TYPES:
            call_id = item["id"]
            self.items.pop(call_id, None)
            deltas = self.deltas.pop(call_id, None)
            if call_id not in self.presented:
                # The seam never covered this call: record it, then its result.
                self.warn(WarningCode.COVERAGE_GAP, f"{kind} {call_id} ran without an approval request; the seam did not cover it")
                name = {"commandExecution": "Bash", "fileChange": "apply_patch"}.get(kind, kind)
                self._out(lambda: self.ctx.record_call(call_id, name, item, at=at))
            self.emit(self._tool_result(item, deltas), at)
            return True
        return False

    def _tool_result(self, item: dict, deltas: list[str] | None) -> ToolResult:
        status = item.get("status")
        if item.get("type") == "commandExecution":
            exit_code = item.get("exitCode")
            if not isinstance(exit_code, int) or isinstance(exit_code, bool):
                exit_code = None
            content = item.get("aggregatedOutput")
            if content is None and deltas:
                content = "".join(deltas)
            return ToolResult(
                exit_code=exit_code,
                outcome_source="item/completed",
                call_id=item["id"],
                is_error=status != "completed" or bool(exit_code),
                content=content,
                tool_use_result=item,
            )
        return ToolResult(
            exit_code=None,
            outcome_source="item/completed",
            call_id=item["id"],
            is_error=status != "completed",
            content=None,
            tool_use_result=item,
        )

    def _user_message(self, item: dict, at: str | None) -> bool:
        client_id = item.get("clientId")
        entry = self.client_messages.get(client_id) if isinstance(client_id, str) else None
        if entry is None:
            text = "".join(
                part.get("text", "") for part in item.get("content") or [] if isinstance(part, dict)
            )
            for key, candidate in list(self.client_messages.items()):
                if candidate[1] == text and candidate[0] in ("steer", "deny-reason"):
                    entry = candidate
                    client_id = key
                    break
        if entry is None or entry[0] == "input":
            return False  # turn input metaharness sent is already on the stream: opaque
        self.client_messages.pop(client_id, None)
        origin, text = entry
        self.emit(Injection(text=text, origin=origin), at)
        return True

    def _delta(self, params: dict, raw: bytes, line: int, at: str | None) -> bool:
        item_id = params.get("itemId")
        delta = params.get("delta")
        if isinstance(item_id, str) and isinstance(delta, str):
            self.deltas.setdefault(item_id, []).append(delta)
            return True
        return False

    def _folded(self, params: dict, raw: bytes, line: int, at: str | None) -> bool:
        return True  # other streaming deltas: kept in the transcript only

    def _token_usage(self, params: dict, raw: bytes, line: int, at: str | None) -> bool:
        usage = params["tokenUsage"]
        self.last_total = usage.get("total")
        self.emit(UsageReport(request_id=None, model=self.model, usage=usage_from(usage.get("last"))), at)
        return True

    def _rate_limits(self, params: dict, raw: bytes, line: int, at: str | None) -> bool:
        limits = params.get("rateLimits") or {}
        primary = limits.get("primary")
        if not isinstance(primary, dict):
            return False
        used = primary.get("usedPercent")
        resets = primary.get("resetsAt")
        info = RateLimitInfo(
            window=limits.get("limitName") or limits.get("limitId"),
            resets_at=resets if isinstance(resets, int) and not isinstance(resets, bool) else None,
            utilization=float(used) if isinstance(used, (int, float)) and not isinstance(used, bool) else None,
        )
        self.emit(RateLimit(info=info), at)
        return True

    def _error(self, params: dict, raw: bytes, line: int, at: str | None) -> bool:
        error = params.get("error") or {}
        code = WarningCode.VENDOR_API_RETRY if params.get("willRetry") else WarningCode.VENDOR_ERROR
        self.warn(code, str(error.get("message") if isinstance(error, dict) else error))
        return True

    def _warning(self, params: dict, raw: bytes, line: int, at: str | None) -> bool:
        text = params.get("message") or params.get("summary")
        details = params.get("details")
        if not isinstance(text, str):
            return False
        if isinstance(details, str) and details:
            text = f"{text} ({details})"
        self.warn(WarningCode.VENDOR_WARNING, text)
        return True

    def _hook_completed(self, params: dict, raw: bytes, line: int, at: str | None) -> bool:
        run = params.get("run") or {}
        if run.get("status") == "blocked":
            # The relay's deny (docs/guides/claude-and-codex.md): no item follows, so this is the call's result.
            # The run id ends with the call id: `pre-tool-use:<index>:<source path>:<call_id>`.
            call_id = str(run.get("id", "")).rsplit(":", 1)[-1]
            if call_id not in self.presented:
                return False
            texts = [e.get("text") for e in run.get("entries") or [] if isinstance(e, dict) and isinstance(e.get("text"), str)]
            self.emit(ToolResult(exit_code=None, outcome_source="hook/completed", call_id=call_id, is_error=True,
                                 content="\n".join(texts) or None, tool_use_result=run), at)
            return True
        if run.get("status") != "failed":
            return False
        entries = "; ".join(e.get("text", "") for e in run.get("entries") or [] if isinstance(e, dict))
        self.warn(WarningCode.VENDOR_WARNING, f"hook {run.get('id')} failed" + (f": {entries}" if entries else ""))
        return True

    # --- the terminal record ----------------------------------------------------------
    def end(self) -> SessionEnded | None:
        """At wind-up, once: what was held written (a thread that never opened), then the session's
        end (`session_ended`); None after the first call, or after a refused start (`ended`)."""
        if self.ended:
            return None
        self.ended = True
        if not self.started:
            self.started = True
            self.flush_held()
        return self.session_ended()

    def refused(self) -> None:
        """A refused start: nothing held is written and no session end."""
        self.held.clear()
        self.ended = True

    def session_ended(self) -> SessionEnded | None:
        """Assembled at wind-up (Codex has no session-level terminal record)."""
        if self.last_turn is None:
            return None
        status = self.last_turn.get("status")
        error = self.last_turn.get("error")
        final = None
        if self.last_agent_text is not None and self.last_agent_turn == self.last_turn.get("id"):
            final = FinalAnswer(text=self.last_agent_text, turn_id=self.last_agent_turn)
        total = self.last_total
        return SessionEnded(
            final_answer=final,
            is_error=status != "completed",
            subtype=status,
            stop_reason=status,
            terminal_reason=error.get("message") if isinstance(error, dict) else None,
            num_turns=self.turns_completed,
            usage=usage_from(total) if isinstance(total, dict) else None,
            census=DecisionCensus(),  # the loop writes its own count over this
        )


_HANDLERS: dict[str, Callable[..., bool]] = {
    "turn/started": Translator._turn_started,
    "turn/completed": Translator._turn_completed,
    "item/started": Translator._item_started,
    "item/completed": Translator._item_completed,
    "item/agentMessage/delta": Translator._delta,
    "item/commandExecution/outputDelta": Translator._delta,
    "item/fileChange/outputDelta": Translator._folded,
    "item/reasoning/summaryTextDelta": Translator._folded,
    "item/reasoning/textDelta": Translator._folded,
    "item/reasoning/summaryPartAdded": Translator._folded,
    "item/plan/delta": Translator._folded,
    "serverRequest/resolved": Translator._folded,  # seam traffic: no event
    "thread/tokenUsage/updated": Translator._token_usage,
    "account/rateLimits/updated": Translator._rate_limits,
    "error": Translator._error,
    "warning": Translator._warning,
    "configWarning": Translator._warning,
    "deprecationNotice": Translator._warning,
    "hook/completed": Translator._hook_completed,
}
