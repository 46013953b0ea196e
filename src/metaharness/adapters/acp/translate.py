"""ACP `session/update` notifications and prompt results → `metaharness.event/1`.

What belongs here: the per-session view of what the agent reported — tool calls by
`toolCallId` with the latest arguments each update carried, message and thought text
gathered chunk by chunk, usage and cost (where the agent prices its model: `takes_cost`) — and the events made from them. Nothing here
writes to the agent; the seam (`seam.py`) answers requests.

Rules kept:
* consecutive `agent_message_chunk`s become one `text` event (and thought chunks one
  `thinking`), written when anything else arrives or the turn ends, so a reader sees whole
  messages in order with the calls between them;
* a `tool_call_update` with status `completed` or `failed` becomes `tool.result` once per
  call; `rawOutput.metadata.exit` (opencode) is its exit code;
* a call the agent reports with no permission request before it is recorded (nobody decided
  it) and named in a warning: `VENDOR_NOTICE` when it ran — the pinning makes every tool ask,
  so this means the pinning failed — and `VENDOR_PERMISSION_DENIED` when the agent's own rules
  refused it (Gemini CLI's policy refuses its subagent tool that way);
* a mode change the adapter has not allowed is reported to `on_mode` (the adapter ends the run);
* every kind not in `HANDLERS` is `opaque`, with its line number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from metaharness.protocol.events import SessionEnded, Text, Thinking, ToolResult, UsageReport
from metaharness.protocol.values import DecisionCensus, FinalAnswer, Usage
from metaharness.protocol.refusals import WarningCode

TERMINAL = ("completed", "failed")
# Updates that carry nothing a reader of events needs (the agent's menu, its plan list).
FOLDED = frozenset({"available_commands_update", "plan", "session_info_update"})


@dataclass
class ToolCall:
    call_id: str
    title: str | None = None
    kind: str | None = None
    raw_input: dict | None = None  # the latest rawInput with more than a cwd
    cwd: str | None = None
    first_status: str | None = None
    status: str | None = None
    asked: bool = False  # a permission request came for it
    result_written: bool = False


@dataclass
class Translator:
    ctx: Any
    on_arguments: Callable[[str], None] = lambda call_id: None
    on_mode: Callable[[str], None] = lambda mode: None
    name_of: Callable[[dict], str] = lambda update: str(update.get("title") or "unknown")
    calls: dict[str, ToolCall] = field(default_factory=dict)
    text: list[str] = field(default_factory=list)
    thought: list[str] = field(default_factory=list)
    last_text: str | None = None
    cost_usd: float | None = None
    takes_cost: bool = True  # False: the agent's `cost` is no price of its own, the cost stays unknown
    turns_completed: int = 0
    last_stop: str | None = None
    last_error: str | None = None  # the last prompt the agent failed (its JSON-RPC error), if no turn ran since
    usage_total: Usage = field(default_factory=Usage)

    def call(self, call_id: str) -> ToolCall:
        return self.calls.setdefault(call_id, ToolCall(call_id))

    # --- notifications --------------------------------------------------------------
    def notification(self, message: dict, raw: bytes, line: int) -> None:
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        update = params.get("update") if isinstance(params.get("update"), dict) else None
        kind = update.get("sessionUpdate") if update else None
        handler = HANDLERS.get(kind) if message.get("method") == "session/update" else None
        try:
            handled = handler(self, update) if handler is not None else kind in FOLDED
        except (KeyError, TypeError, ValueError, AttributeError):
            handled = False
        if not handled:
            self.ctx.opaque(raw, vendor_type=message.get("method"), vendor_subtype=kind if isinstance(kind, str) else None,
                            source_line=line)

    def _message_chunk(self, update: dict) -> bool:
        self._flush_thought()
        text = update["content"]["text"]
        if not isinstance(text, str):
            return False
        self.text.append(text)
        return True

    def _thought_chunk(self, update: dict) -> bool:
        self._flush_text()
        text = update["content"]["text"]
        if not isinstance(text, str):
            return False
        self.thought.append(text)
        return True

    def _tool_call(self, update: dict) -> bool:
        self.flush()
        call = self.call(str(update["toolCallId"]))
        call.title = call.title or update.get("title")
        call.kind = update.get("kind") or call.kind
        call.first_status = call.first_status or update.get("status")
        self._absorb(call, update)
        if update.get("status") == "in_progress":
            self._unasked(call, update, "ran it without asking permission")
        if call.status in TERMINAL:
            self._result(call, update)
        return True

    def _tool_call_update(self, update: dict) -> bool:
        self.flush()
        call = self.call(str(update["toolCallId"]))
        had_input = call.raw_input is not None
        self._absorb(call, update)
        if call.raw_input is not None and not had_input:
            self.on_arguments(call.call_id)
        if call.status in TERMINAL:
            self._result(call, update)
        return True

    def _absorb(self, call: ToolCall, update: dict) -> None:
        if isinstance(update.get("status"), str):
            call.status = update["status"]
        raw_input = update.get("rawInput")
        if isinstance(raw_input, dict):
            if isinstance(raw_input.get("cwd"), str):
                call.cwd = raw_input["cwd"]
            if set(raw_input) - {"cwd"}:
                call.raw_input = raw_input

    def _unasked(self, call: ToolCall, update: dict, what: str) -> None:
        """A call the agent reports without a permission request before it: recorded (nobody
        decided it), and named in a warning."""
        if call.asked or call.result_written:
            return
        call.asked = True
        name = self.name_of(update) if call.title is None else call.title
        self.ctx.record_call(call.call_id, name, call.raw_input or _shown(update))
        if what.startswith("refused"):
            self.ctx.warn(WarningCode.VENDOR_PERMISSION_DENIED, f"{call.call_id} ({name}): the agent {what}")
        else:
            self.ctx.warn(WarningCode.VENDOR_NOTICE, f"{call.call_id} ({name}): the agent {what}")

    def _result(self, call: ToolCall, update: dict) -> None:
        if call.result_written:
            return
        self._unasked(call, update, "refused it by its own rules, before asking" if call.status == "failed"
                      else "ran it without asking permission")
        call.result_written = True
        raw_output = update.get("rawOutput") if isinstance(update.get("rawOutput"), dict) else None
        metadata = raw_output.get("metadata") if raw_output and isinstance(raw_output.get("metadata"), dict) else {}
        exit_code = metadata.get("exit") if isinstance(metadata.get("exit"), int) else None
        content: Any = raw_output.get("output") if raw_output and "output" in raw_output else _content_text(update.get("content"))
        self.ctx.emit(ToolResult(call_id=call.call_id, is_error=call.status == "failed", content=content,
                                 exit_code=exit_code, outcome_source="vendor"))

    def _usage_update(self, update: dict) -> bool:
        cost = update.get("cost")
        if self.takes_cost and isinstance(cost, dict) and isinstance(cost.get("amount"), (int, float)):
            self.cost_usd = float(cost["amount"])
        return True

    def _config_update(self, update: dict) -> bool:
        """opencode carries its mode (agent) as the config option `mode`."""
        for option in update.get("configOptions") or []:
            if isinstance(option, dict) and option.get("id") == "mode" and isinstance(option.get("currentValue"), str):
                self.on_mode(option["currentValue"])
        return True

    def _mode_update(self, update: dict) -> bool:
        mode = update.get("currentModeId") or update.get("modeId")
        if isinstance(mode, str):
            self.on_mode(mode)
        return True

    # --- text ---------------------------------------------------------------------------
    def _flush_text(self) -> None:
        if self.text:
            joined = "".join(self.text)
            self.text.clear()
            if joined:
                self.last_text = joined
                self.ctx.emit(Text(text=joined))

    def _flush_thought(self) -> None:
        if self.thought:
            joined = "".join(self.thought)
            self.thought.clear()
            if joined:
                self.ctx.emit(Thinking(text=joined))

    def flush(self) -> None:
        self._flush_thought()
        self._flush_text()

    # --- the prompt's result ------------------------------------------------------------
    def prompt_result(self, result: Any) -> str | None:
        """Flush, write the turn's usage; the stop reason."""
        self.flush()
        result = result if isinstance(result, dict) else {}
        usage = usage_of(result)
        if usage is not None:
            self.ctx.emit(UsageReport(usage=usage))
            for key in ("input_tokens", "output_tokens"):
                setattr(self.usage_total, key, (getattr(self.usage_total, key) or 0) + (getattr(usage, key) or 0))
        self.turns_completed += 1
        self.last_error = None  # a later turn that ran clears an earlier failed prompt
        stop = result.get("stopReason")
        self.last_stop = stop if isinstance(stop, str) else None
        return self.last_stop

    def session_ended(self, *, error: str | None = None) -> SessionEnded:
        error = error or self.last_error  # a prompt the agent failed (a model request it gave up on)
        return SessionEnded(
            final_answer=FinalAnswer(text=self.last_text) if self.last_text is not None else None,
            is_error=error is not None or self.last_stop not in (None, "end_turn", "cancelled"),
            stop_reason=self.last_stop,
            terminal_reason=error,
            num_turns=self.turns_completed,
            total_cost_usd=self.cost_usd,
            usage=self.usage_total if self.usage_total.input_tokens is not None else None,
            census=DecisionCensus(),  # the loop writes its own count over this
        )


def usage_of(result: dict) -> Usage | None:
    """opencode: `usage {inputTokens, outputTokens}`; Gemini CLI: `_meta.quota.token_count`."""
    usage = result.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("inputTokens"), int):
        return Usage(input_tokens=usage["inputTokens"], output_tokens=usage.get("outputTokens"),
                     cache_read_input_tokens=usage.get("cachedReadTokens"),
                     thinking_tokens=usage.get("thoughtTokens"))
    meta = result.get("_meta") if isinstance(result.get("_meta"), dict) else {}
    quota = meta.get("quota") if isinstance(meta.get("quota"), dict) else {}
    count = quota.get("token_count") if isinstance(quota.get("token_count"), dict) else None
    if count is not None and isinstance(count.get("input_tokens"), int):
        return Usage(input_tokens=count["input_tokens"], output_tokens=count.get("output_tokens"))
    return None


def _content_text(content: Any) -> Any:
    """ACP tool-call content → its text where it is text blocks; else the list as given."""
    if not isinstance(content, list):
        return content
    texts = []
    for block in content:
        inner = block.get("content") if isinstance(block, dict) else None
        if isinstance(inner, dict) and inner.get("type") == "text" and isinstance(inner.get("text"), str):
            texts.append(inner["text"])
        else:
            return content
    return "\n".join(texts)


def _shown(update: dict) -> dict:
    return {key: update[key] for key in ("title", "kind", "content", "locations") if key in update}


HANDLERS: dict[str, Callable[[Translator, dict], bool]] = {
    "agent_message_chunk": Translator._message_chunk,
    "agent_thought_chunk": Translator._thought_chunk,
    "tool_call": Translator._tool_call,
    "tool_call_update": Translator._tool_call_update,
    "usage_update": Translator._usage_update,
    "current_mode_update": Translator._mode_update,
    "config_option_update": Translator._config_update,
    "user_message_chunk": lambda self, update: True,  # our own prompt echoed (session replay)
}


def failure_text(exc: Any) -> str:
    """An agent's error answer (an `RpcError`) as one sentence: its message, and the `data.details`
    the ACP SDK puts an uncaught error's own message in (Qwen Code answers a failed model request
    `Internal error` with the failure there)."""
    details = exc.data.get("details") if isinstance(exc.data, dict) else None
    return f"{exc.message}: {details}" if isinstance(details, str) and details and details not in exc.message \
        else exc.message


def session_model(result: dict) -> str | None:
    """The model a new session reports: Gemini CLI's `models.currentModelId`, or opencode's
    `model` config option."""
    models = result.get("models") if isinstance(result.get("models"), dict) else {}
    if isinstance(models.get("currentModelId"), str):
        return models["currentModelId"]
    for option in result.get("configOptions") or []:
        if isinstance(option, dict) and option.get("id") == "model" and isinstance(option.get("currentValue"), str):
            return option["currentValue"]
    return None
