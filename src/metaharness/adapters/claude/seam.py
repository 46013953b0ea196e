"""Claude Code's stdio control protocol: the writer, control requests, and the
per-call PreToolUse `hook_callback` seam (docs/guides/claude-and-codex.md).

What belongs here: `ControlChannel` (the one writer of the child's stdin and the
`mh-N` control requests awaiting their `control_response`) and `CallSeam` (one
presentation per `tool_use_id`, decisions parked until the callback arrives,
answers written exactly once, cancellations honoured).

Rules kept: only JSON object lines are ever written (Claude exits on anything
else); every answer echoes the request id exactly; `ask`/`defer` and a bare
`updatedInput` are never sent; a call whose callback input differs from what was
presented is denied (REQUEST_MUTATED); anything unexpected is answered fail-closed.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any, Callable

from metaharness.adapters.base import ControlRefused, PresentedCall
from metaharness.protocol.refusals import CommandCode, Sentence
from metaharness.protocol.values import Abstain, Allow, Decision, Deny, Replace

from .launch import HOOK_CALLBACK_ID

MUTATED_REASON = Sentence.REQUEST_MUTATED


def _pre_tool_use(**fields: Any) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", **fields}}


# Each decision as the PreToolUse hook's output; an abstain is no output (Claude Code's own
# permission pipeline decides the call).
HOOK_OUTPUT: dict[type, Callable[[Any], dict[str, Any]]] = {
    Allow: lambda decision: _pre_tool_use(permissionDecision="allow"),
    Deny: lambda decision: _pre_tool_use(permissionDecision="deny", permissionDecisionReason=decision.reason),
    Replace: lambda decision: _pre_tool_use(permissionDecision="allow", updatedInput=decision.input),
    Abstain: lambda decision: {},
}


def hook_output(decision: Decision) -> dict[str, Any]:
    """The PreToolUse hook output object for one metaharness decision."""
    answer = HOOK_OUTPUT.get(type(decision))
    if answer is None:
        raise TypeError(f"not a decision: {decision!r}")
    return answer(decision)


def success_response(request_id: str, response: dict[str, Any]) -> dict[str, Any]:
    return {"type": "control_response", "response": {"subtype": "success", "request_id": request_id,
                                                     "response": response}}


def error_response(request_id: str, error: str) -> dict[str, Any]:
    return {"type": "control_response", "response": {"subtype": "error", "request_id": request_id, "error": error}}


def user_line(blocks: list[str]) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": b} for b in blocks]},
            "parent_tool_use_id": None, "session_id": ""}


class ChannelClosed(Exception):
    """The child's stdin is closed; nothing more can be written."""


class ControlChannel:
    """The single writer of the child's stdin (one `write` per line, so lines never
    interleave) and the adapter's own control requests."""

    def __init__(self, write: Callable[[bytes], None], *, on_line: Callable[[bytes], None] | None = None) -> None:
        self._write = write
        self._on_line = on_line
        self._next_id = 0
        self._waiting: dict[str, asyncio.Future] = {}
        self._interrupt: tuple[str, asyncio.Future] | None = None  # sent ahead of its denies, reply awaited later
        self.closed = False

    def next_request_id(self) -> str:
        self._next_id += 1
        return f"mh-{self._next_id}"

    def write(self, obj: dict[str, Any]) -> None:
        if self.closed:
            raise ChannelClosed("the child's stdin is closed")
        line = (json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
        self._write(line)
        if self._on_line is not None:
            self._on_line(line)

    def send_request(self, request: dict[str, Any], request_id: str | None = None) -> tuple[str, asyncio.Future]:
        request_id = request_id or self.next_request_id()
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        self.write({"type": "control_request", "request_id": request_id, "request": request})
        return request_id, future

    async def request(self, request: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """Send a control request; return the reply's `response` object (subtype
        success or error)."""
        return await self.reply(self.send_request(request), timeout)

    async def reply(self, sent: tuple[str, asyncio.Future], timeout: float | None = None) -> dict[str, Any]:
        """The reply to a request `send_request` sent (its `response` object)."""
        request_id, future = sent
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._waiting.pop(request_id, None)

    # --- the controls Claude takes as control requests ---------------------------------------
    def send_interrupt(self) -> bool:
        """Send the interrupt now unless one is out (or stdin is closed); its reply is awaited by
        `interrupt_replied`. True when it was sent by this call."""
        if self._interrupt is not None or self.closed:
            return False
        try:
            self._interrupt = self.send_request({"subtype": "interrupt"})
        except (ChannelClosed, ConnectionError, BrokenPipeError):
            return False
        return True

    @property
    def interrupt_out(self) -> bool:
        return self._interrupt is not None

    async def interrupt_replied(self, timeout: float) -> bool:
        """Wait for the reply to the interrupt that is out (TimeoutError after `timeout`); False when
        none is out."""
        sent, self._interrupt = self._interrupt, None
        if sent is None:
            return False
        await self.reply(sent, timeout)
        return True

    async def set_permission_mode(self, word: str, timeout: float) -> None:
        """`set_permission_mode`; ControlRefused naming what Claude said when it did not take it."""
        try:
            reply = await self.request({"subtype": "set_permission_mode", "mode": word}, timeout)
        except (ChannelClosed, asyncio.TimeoutError, ConnectionError, BrokenPipeError) as exc:
            raise ControlRefused(CommandCode.TOO_LATE, f"claude did not take the posture: {exc or 'no reply'}") from None
        if reply.get("subtype") != "success":
            code = reply.get("error_code")
            words = reply.get("error") or "claude refused the permission mode"
            raise ControlRefused(CommandCode.UNSUPPORTED_CONTROL,
                                 f"claude refused {word!r}: {words}" + (f" ({code})" if code else ""))

    def on_control_response(self, record: dict[str, Any]) -> bool:
        response = record.get("response")
        if not isinstance(response, dict):
            return False
        future = self._waiting.pop(str(response.get("request_id")), None)
        if future is None or future.done():
            return False
        future.set_result(response)
        return True

    def fail_waiting(self, reason: str) -> None:
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ChannelClosed(reason))
        self._waiting.clear()


@dataclass
class _Call:
    call_id: str
    name: str
    input: Any
    callback_id: str | None = None  # Claude's request id of the pending hook_callback
    callback_read_ns: int | None = None
    parked: Decision | None = None
    answered: bool = False
    cancelled: bool = False
    mutated: bool = False


@dataclass
class SeamTiming:
    """Where metaharness spent time on one call (for the benchmark): nanoseconds of
    `time.perf_counter_ns()`."""

    call_id: str
    record_read_ns: int | None = None  # the assistant record (or callback) that presented it was read
    presented_ns: int | None = None  # present() returned (frame mode: decided and parked)
    callback_read_ns: int | None = None
    answer_written_ns: int | None = None


class CallSeam:
    """Presentation and answers for PreToolUse callbacks, keyed by `tool_use_id`."""

    def __init__(self, channel: ControlChannel, present: Callable[[PresentedCall], None],
                 *, cwd: str | None = None) -> None:
        self.channel = channel
        self._present = present
        self.cwd = cwd
        self.calls: dict[str, _Call] = {}
        self.by_request: dict[str, str] = {}  # Claude request id → call id
        self.timings: dict[str, SeamTiming] = {}
        self.errors: list[str] = []

    # --- from the records -----------------------------------------------------------
    def on_tool_use(self, call_id: str, name: str, input: Any, at: str | None, read_ns: int | None = None) -> None:
        if call_id in self.calls:
            return  # presented once per id
        self.calls[call_id] = _Call(call_id, name, input)
        self.timings[call_id] = SeamTiming(call_id, record_read_ns=read_ns)
        self._present_call(call_id, name, input, at)
        self.timings[call_id].presented_ns = time.perf_counter_ns()

    def on_callback(self, record: dict[str, Any], read_ns: int | None = None) -> None:
        request_id = record.get("request_id")
        request = record.get("request") if isinstance(record.get("request"), dict) else {}
        hook_input = request.get("input") if isinstance(request.get("input"), dict) else {}
        call_id = request.get("tool_use_id") or hook_input.get("tool_use_id")
        if not isinstance(request_id, str):
            return  # nothing to echo: Claude's own timeout blocks the call
        if request.get("callback_id") != HOOK_CALLBACK_ID or not isinstance(call_id, str):
            self.channel.write(error_response(request_id, "metaharness registered no such callback"))
            return
        name = hook_input.get("tool_name") if isinstance(hook_input.get("tool_name"), str) else "?"
        tool_input = hook_input.get("tool_input")
        call = self.calls.get(call_id)
        if call is None:  # the callback came first: present from it
            call = self.calls[call_id] = _Call(call_id, name, tool_input)
            self.timings[call_id] = SeamTiming(call_id, record_read_ns=read_ns)
            call.callback_id, call.callback_read_ns = request_id, read_ns
            self.by_request[request_id] = call_id
            self.timings[call_id].callback_read_ns = read_ns
            self._present_call(call_id, name, tool_input, None)
            self.timings[call_id].presented_ns = time.perf_counter_ns()
            self._flush(call)
            return
        call.callback_id, call.callback_read_ns = request_id, read_ns
        self.by_request[request_id] = call_id
        self.timings[call_id].callback_read_ns = read_ns
        if tool_input != call.input and not call.answered:
            # A mutated input is denied: the loop writes the lines; the child hears a deny now.
            call.mutated = True
            self._answer(call, Deny(reason=MUTATED_REASON))
            self._present_call(call_id, name, tool_input, None)
            return
        self._flush(call)

    def on_cancel(self, record: dict[str, Any]) -> None:
        call_id = self.by_request.get(str(record.get("request_id")))
        if call_id is not None:
            self.calls[call_id].cancelled = True

    def on_control(self, record: dict[str, Any], read_ns: int | None = None) -> None:
        """One control record from Claude: a reply to our request, a cancellation, or a request —
        of which only our hook's callback is served; any other is refused (fail-closed)."""
        rtype = record.get("type")
        if rtype == "control_response":
            self.channel.on_control_response(record)
        elif rtype == "control_cancel_request":
            self.on_cancel(record)
        elif rtype == "control_request":
            request = record.get("request") if isinstance(record.get("request"), dict) else {}
            if request.get("subtype") == "hook_callback":
                self.on_callback(record, read_ns)
            elif isinstance(record.get("request_id"), str):
                try:
                    self.channel.write(error_response(record["request_id"],
                                                      f"metaharness does not serve {request.get('subtype')!r}"))
                except ChannelClosed:
                    pass

    # --- from the loop ------------------------------------------------------------------
    def _present_call(self, call_id: str, name: str, input: Any, at: str | None) -> None:
        self._present(PresentedCall(call_id=call_id, name=name, input=input, seam="hook",
                                    cwd=self.cwd, at=at, can_replace=True))

    def deliver(self, call_id: str, decision: Decision, decided_by: str = "") -> None:
        call = self.calls.get(call_id)
        if call is None or call.answered or call.cancelled:
            return  # a late answer to a withdrawn request is ignored silently
        if call.mutated and not isinstance(decision, Deny):
            decision = Deny(reason=MUTATED_REASON)
        call.parked = decision
        self._flush(call)

    def _flush(self, call: _Call) -> None:
        if call.parked is not None and call.callback_id is not None and not call.answered and not call.cancelled:
            self._answer(call, call.parked)

    def _answer(self, call: _Call, decision: Decision) -> None:
        call.answered = True
        try:
            self.channel.write(success_response(call.callback_id, hook_output(decision)))  # type: ignore[arg-type]
        except ChannelClosed:
            # Claude cancels a pending callback when its stdin closes: the call does not run.
            self.errors.append(f"{call.call_id}: stdin closed before the answer")
        timing = self.timings.get(call.call_id)
        if timing is not None:
            timing.answer_written_ns = time.perf_counter_ns()

    def deny_unanswered(self, reason: str) -> list[str]:
        """Fail-closed sweep before an interrupt/halt: every callback still waiting gets a
        deny (the loop normally decided them already; this covers callbacks whose call
        was never decided, e.g. a mutated presentation)."""
        denied = []
        for call in self.calls.values():
            if call.callback_id is not None and not call.answered and not call.cancelled:
                self._answer(call, Deny(reason=reason))
                denied.append(call.call_id)
        return denied

    def waiting_callbacks(self) -> list[str]:
        return [c.call_id for c in self.calls.values()
                if c.callback_id is not None and not c.answered and not c.cancelled]
