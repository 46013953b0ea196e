"""The per-call seam over ACP: `session/request_permission` → presented call → one answer.

What belongs here: reading a permission request (its tool call and its options), holding it
until the call's arguments are known (an agent may send them in a later `tool_call_update`),
turning a decision into the ACP answer, the adapter's own ceiling (ACP sets no timeout), and
the escalation when an agent does not take a refusal up.

Rules kept (a table, `ANSWERS`, maps each decision to the option kind it selects):
* allow and abstain select the `allow_once` option; deny selects `reject_once` (the outcome
  `cancelled` when the agent offers no reject option, or once the turn's cancel went out). Never an `allow_always` or
  `reject_always` option: nothing may persist a rule inside the agent's session;
* `replace` cannot travel over ACP: refused by name, the call stays pending;
* every permission request gets exactly one answer. A request still unanswered at the ceiling
  (above the run's deadline) is rejected here; a request we cannot read is rejected at once;
* a refusal the agent has not acted on within `takeup_s` (not one line from it since the
  answer, no terminal `tool_call_update` for the call, and the turn still running) escalates: `session/cancel`, then, `takeup_s` later,
  stdin is closed — both agents exit when it closes, and neither runs the call;
* arguments held for longer than `hold_s` are never guessed: the request is rejected and the
  call recorded with what it showed.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from metaharness.adapters.base import ControlRefused, PresentedCall, RunContext
from metaharness.protocol.refusals import CommandCode, WarningCode
from metaharness.protocol.values import Abstain, Allow, Decision, Deny, Replace

from .rpc import RpcChannel

REPLACE_REASON = "ACP carries no rewritten input, so the {kind} adapter cannot deliver replace; deny instead"
NOT_SUPPORTED = {"code": -32601, "message": "metaharness: method not supported"}
# decision type → the option kind it selects
ANSWERS: dict[type, str] = {Allow: "allow_once", Abstain: "allow_once", Deny: "reject_once"}


@dataclass
class Pending:
    request_id: Any
    call_id: str
    options: dict[str, str]  # option kind → optionId (once-kinds only)
    tool_call: dict
    received_ns: int
    answered: str | None = None  # the option kind (or "cancelled") written
    ceiling: asyncio.TimerHandle | None = None
    hold: asyncio.TimerHandle | None = None
    presented: bool = False


@dataclass
class Seam:
    rpc: RpcChannel
    ctx: RunContext
    kind: str
    ceiling_ms: int
    # vendor hooks (see `AcpAdapter`): the call's (name, input, cwd) or None while its
    # arguments are still to come; whether a call has finished; cancel the running turn.
    call_of: Callable[[dict, bool], tuple[str, Any, str | None] | None]
    settled: Callable[[str], bool]
    cancel_turn: Callable[[], None]
    hold_s: float = 5.0
    takeup_s: float = 60.0
    pending: dict[str, Pending] = field(default_factory=dict)
    wire_decisions: list[tuple[str, str]] = field(default_factory=list)  # (call_id, option kind) for tests
    cancelling: bool = False  # a turn's cancel went out: refusals go as `cancelled` (see `deliver`)
    _escalations: list[asyncio.TimerHandle] = field(default_factory=list)

    # --- agent requests ---------------------------------------------------------------
    def on_request(self, message: dict, raw: bytes, line: int) -> None:
        method = message.get("method")
        request_id = message.get("id")
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        if method != "session/request_permission":
            # No client capability (fs, terminal) is advertised: nothing else is ours to serve.
            self.ctx.opaque(raw, vendor_type=method, vendor_subtype=None, source_line=line)
            self.rpc.answer(request_id, error=NOT_SUPPORTED)
            return
        tool_call = params.get("toolCall")
        call_id = tool_call.get("toolCallId") if isinstance(tool_call, dict) else None
        options = _once_options(params.get("options"))
        if not isinstance(call_id, str) or not call_id or options is None or call_id in self.pending:
            # Unreadable, or a second open request for one call: refused, never guessed.
            self.ctx.opaque(raw, vendor_type=method, vendor_subtype="unreadable", source_line=line)
            self.ctx.warn(WarningCode.VENDOR_NOTICE, f"an unreadable permission request (line {line}) was rejected")
            self._write(request_id, None, options or {}, "reject_once")
            return
        pending = Pending(request_id, call_id, options, tool_call, time.monotonic_ns())
        self.pending[call_id] = pending
        loop = asyncio.get_running_loop()
        pending.ceiling = loop.call_later(self.ceiling_ms / 1000, self._ceiling_expired, call_id)
        if not self._try_present(pending, final=False):
            pending.hold = loop.call_later(self.hold_s, self._hold_expired, call_id)

    def arguments_arrived(self, call_id: str) -> None:
        """A `tool_call_update` brought arguments: present a held request now if it can be."""
        pending = self.pending.get(call_id)
        if pending is not None and not pending.presented and pending.answered is None:
            self._try_present(pending, final=False)

    def _try_present(self, pending: Pending, *, final: bool) -> bool:
        call = self.call_of(pending.tool_call, final)
        if call is None:
            return False
        if pending.hold is not None:
            pending.hold.cancel()
        pending.presented = True
        name, call_input, cwd = call
        call_id = pending.call_id
        self.ctx.present(PresentedCall(
            call_id=call_id, name=name, input=call_input, seam="control_request",
            cwd=cwd, can_replace=False,
        ))
        return True

    def _hold_expired(self, call_id: str) -> None:
        pending = self.pending.get(call_id)
        if pending is None or pending.presented or pending.answered is not None:
            return
        call = self.call_of(pending.tool_call, True)
        name, call_input = (call[0], call[1]) if call else (str(pending.tool_call.get("title") or "unknown"), pending.tool_call)
        self.ctx.record_call(call_id, name, call_input)
        self.ctx.warn(WarningCode.PENDING_CALL_ABANDONED, f"{call_id}: the {self.kind} agent asked permission but never sent the "
                                                f"call's arguments within {self.hold_s:g}s, so it was rejected")
        self._answer(pending, "reject_once")

    # --- decisions --------------------------------------------------------------------
    def deliver(self, call_id: str, decision: Decision, decided_by: str) -> None:
        pending = self.pending.get(call_id)
        if pending is None or pending.answered is not None:
            return  # answered already (ceiling, interrupt): never a second answer
        if isinstance(decision, Replace):
            raise ControlRefused(CommandCode.UNSUPPORTED_CONTROL, REPLACE_REASON.format(kind=self.kind))
        option_kind = ANSWERS.get(type(decision), "reject_once")  # anything unknown: fail closed
        if self.cancelling and option_kind != "allow_once":
            option_kind = "cancelled"  # what ACP asks of a client once it cancelled the turn
        self._answer(pending, option_kind)

    def _answer(self, pending: Pending, option_kind: str) -> None:
        if pending.answered is not None:
            return
        for timer in (pending.ceiling, pending.hold):
            if timer is not None:
                timer.cancel()
        pending.answered = self._write(pending.request_id, pending.call_id, pending.options, option_kind)
        self.pending.pop(pending.call_id, None)
        if pending.answered != "allow_once":
            self._watch_takeup(pending.call_id, self.rpc.line_count)

    def _write(self, request_id: Any, call_id: str | None, options: dict[str, str], option_kind: str) -> str:
        option_id = options.get(option_kind)
        if option_id is None:
            # No such option offered: allow cannot be delivered (fail closed), a refusal goes as cancelled.
            written = "cancelled"
            result: dict = {"outcome": {"outcome": "cancelled"}}
        else:
            written = option_kind
            result = {"outcome": {"outcome": "selected", "optionId": option_id}}
        if self.rpc.answer(request_id, result) and call_id is not None:
            self.wire_decisions.append((call_id, written))
        return written

    def cancel_all(self) -> list[str]:
        """Answer every open request `cancelled` now (interrupt, halt); returns the call ids."""
        ids = []
        for pending in list(self.pending.values()):
            for timer in (pending.ceiling, pending.hold):
                if timer is not None:
                    timer.cancel()
            pending.answered = self._write(pending.request_id, pending.call_id, {}, "cancelled")
            self.pending.pop(pending.call_id, None)
            ids.append(pending.call_id)
        return ids

    # --- our own deadline and the escalation --------------------------------------------
    def _ceiling_expired(self, call_id: str) -> None:
        pending = self.pending.get(call_id)
        if pending is None or pending.answered is not None:
            return
        self.ctx.warn(WarningCode.PENDING_CALL_ABANDONED, f"{call_id} reached the {self.kind} adapter's {self.ceiling_ms}ms "
                                                "ceiling undecided and was rejected")
        self._answer(pending, "reject_once")

    def _watch_takeup(self, call_id: str, line_at_answer: int) -> None:
        loop = asyncio.get_running_loop()

        def taken_up() -> bool:
            return self.rpc.line_count > line_at_answer or self.settled(call_id)

        def second() -> None:
            if not self.settled(call_id) and not self.rpc.stdin_closed:
                self.ctx.warn(WarningCode.VENDOR_NOTICE, f"the {self.kind} agent did not act on the refusal of {call_id} "
                                               "or on the cancel; its stdin was closed")
                self.rpc.close_stdin()

        def first() -> None:
            if taken_up() or self.rpc.stdin_closed:
                return
            self.ctx.warn(WarningCode.VENDOR_NOTICE, f"the {self.kind} agent did not act on the refusal of {call_id} within "
                                           f"{self.takeup_s:g}s; the turn was cancelled")
            self.cancel_turn()
            self._escalations.append(loop.call_later(self.takeup_s, second))

        self._escalations.append(loop.call_later(self.takeup_s, first))

    def stop_timers(self) -> None:
        for timer in self._escalations:
            timer.cancel()
        self._escalations.clear()
        for pending in self.pending.values():
            for timer in (pending.ceiling, pending.hold):
                if timer is not None:
                    timer.cancel()


def _once_options(raw: Any) -> dict[str, str] | None:
    """The offered once-options by kind; None when the list is not readable."""
    if not isinstance(raw, list):
        return None
    found: dict[str, str] = {}
    for option in raw:
        if not isinstance(option, dict) or not isinstance(option.get("optionId"), str):
            return None
        if option.get("kind") in ("allow_once", "reject_once") and option["kind"] not in found:
            found[option["kind"]] = option["optionId"]
    return found
