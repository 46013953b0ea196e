"""The per-call seam: app-server approval requests → presented calls → answers
(docs/guides/claude-and-codex.md).

What belongs here: building a `PresentedCall` from an approval request (with the
`item/started` stored for it), turning a decision into the JSON-RPC answer, the
deny-reason steer, the adapter's own ceiling, and the answers to every other
server request.

Rules kept (each decision's answer is a row of one table: `APPROVAL_ANSWERS` for an approval,
`HOOK_ANSWERS` for a relay hook; a decision of any other type is declined):
* allow and abstain → `{"decision":"accept"}`; deny → `turn/steer` with the reason,
  its result awaited, then `{"decision":"decline"}` (a decline carries no reason);
* never `acceptForSession` or `acceptWithExecpolicyAmendment` — nothing that persists a
  rule in CODEX_HOME or removes the per-call decision; `cancel` only for an interrupt's
  abandonment denies (`interrupting`): it declines and ends the turn with no further
  model request, where a `decline` would let Codex ask the model once more before the
  `turn/interrupt` that follows it arrives;
* `replace` is refused by name; the call stays pending — except in a relay run
  (`--codex-replace-relay`, docs/guides/claude-and-codex.md), where the PreToolUse hook presents each
  call first (`on_hook`): deny → the hook's deny with the reason; allow/abstain → no
  output; replace (a Bash command only) → `allow` + `updatedInput`. The approval that
  follows for that call is then answered here, never presented again: `accept` only if
  it carries exactly what was decided (the original command, or the replacement as
  `/bin/bash -lc '<new>'`; for a patch, the same file entries), `decline` after a deny;
  anything else is presented under the same call id, so the loop's mutated-request
  rule declines it (REQUEST_MUTATED). An approval with no hook presentation before it
  (the relay failed) is presented and decided as in any run;
* every server request gets exactly one answer; the server waits forever, so a call
  still unanswered at the adapter's ceiling (`vendor_ms`, above the run's deadline)
  is declined here;
* decisions reach the child before any control: `decline_all` flushes them first.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from metaharness.adapters.base import ControlRefused, PresentedCall, ReplaceOnly, RunContext, resolve_tool
from metaharness.protocol.refusals import CommandCode, WarningCode
from metaharness.protocol.values import Abstain, Allow, Decision, Deny, Replace

from .relay import deny_output, rewrite_output, unwrap_shell
from .rpc import RpcChannel, RpcError
from .tools import TOOLS
from .translate import Translator, rfc3339_ms

REPLACE_REASON = (
    "the codex adapter cannot deliver replace through app-server approvals; a run started with "
    "--codex-replace-relay delivers it for shell calls; otherwise deny with a reason instead"
)
DENY_TEMPLATE = "metaharness refused the previous tool call {call_id}: {reason}"
STEER_WAIT_S = 5.0
RELAY_REPLACE_REASON = (
    "the codex relay can replace only a Bash call's command: answer replace with {\"command\": \"<new command>\"}, "
    "or deny with a reason instead"
)
# A relay hook's Bash call carries `{"command": "<non-empty text>"}` as its replacement, nothing else.
COMMAND_ONLY = ReplaceOnly(frozenset({"command"}), RELAY_REPLACE_REASON)
HOOK_DENY_FALLBACK = "metaharness refused this call"
NOT_SUPPORTED = {"code": -32601, "message": "metaharness: method not supported"}
APPROVAL_METHODS = ("item/commandExecution/requestApproval", "item/fileChange/requestApproval")


@dataclass
class Pending:
    request_id: Any
    call_id: str
    item_id: str
    turn_id: str | None
    answered: bool = False
    received_ns: int = 0
    ceiling: asyncio.TimerHandle | None = None
    deny_task: asyncio.Task | None = None
    decision: str | None = None  # the word written: accept / decline


@dataclass
class HookCall:
    """A call the relay presented from its PreToolUse hook (relay runs only)."""

    call_id: str
    name: str  # Bash | apply_patch
    input: dict  # {"command": …} as the hook gave it
    cwd: str | None
    reply: Callable[[bytes], None]  # the hook's stdout
    verdict: str | None = None  # accept / decline, once decided
    expected: str | None = None  # Bash: the command the approval must carry
    approval: tuple[Pending, str, dict] | None = None  # an approval waiting for the verdict


@dataclass
class Seam:
    rpc: RpcChannel
    translator: Translator
    ctx: RunContext
    thread_id: Callable[[], str | None]
    ceiling_ms: int
    pending: dict[str, Pending] = field(default_factory=dict)
    wire_decisions: list[tuple[str, str]] = field(default_factory=list)  # (call_id, word) for tests/bench
    timings: list[tuple[str, int, int]] = field(default_factory=list)  # (call_id, request read ns, answer written ns)
    run_cwd: str | None = None  # the run's directory, for resolving a patch by the tool table (None: no comparison)
    hook_calls: dict[str, HookCall] = field(default_factory=dict)
    interrupting: bool = False  # set for an interrupt's abandonment: denies go out as `cancel`

    # --- server requests --------------------------------------------------------------
    def on_request(self, message: dict, raw: bytes, line: int) -> None:
        method = message.get("method")
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        request_id = message.get("id")
        if method in APPROVAL_METHODS:
            hook_call = self.hook_calls.get(params.get("itemId"))  # type: ignore[arg-type]
            if hook_call is not None:
                self._approval_after_hook(hook_call, method, params, request_id)
                return
            try:
                call = self._presentation(method, params, request_id)
            except (KeyError, TypeError, ValueError):
                # An approval we cannot read is declined: fail closed, never guessed.
                self.rpc.answer(request_id, {"decision": "decline"})
                self.translator.opaque(raw, line, method)
                return
            self.translator.presented.add(params["itemId"])
            self.ctx.present(call)
            return
        self.translator.opaque(raw, line, method if isinstance(method, str) else None)
        if method == "item/permissions/requestApproval":
            self.rpc.answer(request_id, error={"code": -32000, "message": "metaharness grants no additional permissions"})
        elif method == "mcpServer/elicitation/request":
            self.rpc.answer(request_id, {"action": "decline", "content": None, "_meta": None})
        elif method == "item/tool/requestUserInput":
            self.rpc.answer(request_id, error={"code": -32000, "message": "metaharness: no person is present to answer"})
        elif method in ("execCommandApproval", "applyPatchApproval"):
            self.rpc.answer(request_id, {"decision": {"denied": {"rejection": "metaharness answers only v2 approvals"}}})
        else:
            self.rpc.answer(request_id, error=NOT_SUPPORTED)

    def _presentation(self, method: str, params: dict, request_id: Any, call_id: str | None = None) -> PresentedCall:
        item_id = params["itemId"]
        if not isinstance(item_id, str):
            raise TypeError("itemId")
        approval_id = params.get("approvalId")
        if call_id is None:
            call_id = item_id if approval_id is None else f"{item_id}#{approval_id}"
        cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else None
        if method == "item/commandExecution/requestApproval":
            name = "Bash"
            call_input: dict = {"command": params["command"], "cwd": params.get("cwd")}
            if params.get("reason") is not None:
                call_input["reason"] = params["reason"]
            if params.get("kind") not in (None, "command"):
                call_input["kind"] = params["kind"]
        else:
            name = "apply_patch"
            item = self.translator.items.get(item_id) or {}
            call_input = {"changes": item.get("changes") or []}
            if params.get("grantRoot") is not None:
                call_input["grant_root"] = params["grantRoot"]
        pending = Pending(request_id=request_id, call_id=call_id, item_id=item_id, turn_id=params.get("turnId"),
                          received_ns=time.monotonic_ns())
        self.pending[call_id] = pending
        loop = asyncio.get_running_loop()
        pending.ceiling = loop.call_later(self.ceiling_ms / 1000, self._ceiling_expired, call_id)
        return PresentedCall(
            call_id=call_id,
            name=name,
            input=call_input,
            seam="control_request",
            cwd=cwd,
            at=rfc3339_ms(params.get("startedAtMs")),
            can_replace=False,
        )

    # --- the relay's hook presentations (relay runs only) ------------------------------
    def on_hook(self, payload: dict, reply: Callable[[bytes], None]) -> None:
        """One PreToolUse payload from the relay: present the call it describes."""
        name = payload.get("tool_name")
        tool_input = payload.get("tool_input")
        call_id = payload.get("tool_use_id")
        if (payload.get("hook_event_name") != "PreToolUse" or name not in ("Bash", "apply_patch")
                or not isinstance(call_id, str) or not call_id or not isinstance(tool_input, dict)
                or not isinstance(tool_input.get("command"), str)):
            reply(b"")  # not a call this seam presents: the approval request (if any) decides
            return
        cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
        hook_call = HookCall(call_id, name, {"command": tool_input["command"]}, cwd, reply)
        self.hook_calls[call_id] = hook_call
        self.translator.presented.add(call_id)
        self.ctx.present(PresentedCall(call_id=call_id, name=name, input=hook_call.input, seam="hook",
                                       cwd=cwd, can_replace=name == "Bash", replace_only=COMMAND_ONLY))

    def _deliver_hook(self, hook_call: HookCall, decision: Decision) -> None:
        if hook_call.verdict is not None:
            return  # never a second answer
        HOOK_ANSWERS.get(type(decision), _hook_deny)(hook_call, decision)  # anything unknown: fail closed
        if hook_call.approval is not None:
            self._settle_approval(hook_call)

    def _approval_after_hook(self, hook_call: HookCall, method: str, params: dict, request_id: Any) -> None:
        pending = Pending(request_id=request_id, call_id=hook_call.call_id, item_id=hook_call.call_id,
                          turn_id=params.get("turnId"), received_ns=time.monotonic_ns())
        hook_call.approval = (pending, method, params)
        if hook_call.verdict is None:
            # The hook's call is still undecided (its relay gave up early): wait for the verdict.
            self.pending[hook_call.call_id] = pending
            pending.ceiling = asyncio.get_running_loop().call_later(
                self.ceiling_ms / 1000, self._ceiling_expired, hook_call.call_id)
            return
        self._settle_approval(hook_call)

    def _settle_approval(self, hook_call: HookCall) -> None:
        assert hook_call.approval is not None
        pending, method, params = hook_call.approval
        hook_call.approval = None
        if pending.answered or pending.deny_task is not None:
            return
        self.pending.pop(hook_call.call_id, None)
        if hook_call.verdict == "decline":
            self._answer(pending, "decline")
        elif self._carries(hook_call, method, params):
            self._answer(pending, "accept")
        else:
            if pending.ceiling is not None:
                pending.ceiling.cancel()
            # Not what was decided: presented under the same call id, the loop's
            # mutated-request rule denies it (REQUEST_MUTATED) and the approval is declined.
            try:
                call = self._presentation(method, params, pending.request_id, call_id=hook_call.call_id)
            except (KeyError, TypeError, ValueError):
                self._answer(pending, "decline")
                return
            self.ctx.present(call)

    def _carries(self, hook_call: HookCall, method: str, params: dict) -> bool:
        """Does the approval ask for exactly what the hook's call was decided on?"""
        if hook_call.name == "Bash":
            return method == APPROVAL_METHODS[0] and unwrap_shell(params.get("command")) == hook_call.expected
        if method != APPROVAL_METHODS[1] or self.run_cwd is None:
            return False
        item = self.translator.items.get(hook_call.call_id) or {}
        asked = resolve_tool(TOOLS, "apply_patch", {"changes": item.get("changes")}, params.get("cwd") or hook_call.cwd,
                             self.run_cwd)
        decided = resolve_tool(TOOLS, "apply_patch", hook_call.input, hook_call.cwd, self.run_cwd)
        return bool(decided.operations) and (sorted(asked.subjects), asked.operations) == (sorted(decided.subjects), decided.operations)

    # --- decisions --------------------------------------------------------------------
    def deliver(self, call_id: str, decision: Decision, decided_by: str) -> None:
        """The loop's decision for a presented call: a relay hook's call while it is undecided
        (its approval waits for the verdict), else the approval presented under that id."""
        hook_call = self.hook_calls.get(call_id)
        if hook_call is not None and hook_call.verdict is None:
            self._deliver_hook(hook_call, decision)
            return
        self._deliver_approval(call_id, decision, decided_by)

    def _deliver_approval(self, call_id: str, decision: Decision, decided_by: str) -> None:
        pending = self.pending.get(call_id)
        if pending is None or pending.answered or pending.deny_task is not None:
            return  # already answered (e.g. by the ceiling): never a second answer
        answer = APPROVAL_ANSWERS.get(type(decision), Seam._decline)  # anything unknown: fail closed
        answer(self, pending, decision, decided_by)

    def _accept(self, pending: Pending, decision: Decision, decided_by: str) -> None:
        self._answer(pending, "accept")

    def _decline(self, pending: Pending, decision: Decision, decided_by: str) -> None:
        self._answer(pending, "decline")

    def _deny(self, pending: Pending, decision: Deny, decided_by: str) -> None:
        # Abandonment (interrupt, halt, turn end) declines without a reason steer.
        if decided_by == "adapter" or self.translator.active_turn_id is None:
            self._answer(pending, "cancel" if self.interrupting and decided_by == "adapter" else "decline")
            return
        self._deny_with_reason(pending, decision.reason)

    def _refuse_replace(self, pending: Pending, decision: Replace, decided_by: str) -> None:
        raise ControlRefused(CommandCode.UNSUPPORTED_CONTROL, REPLACE_REASON)  # the call stays pending

    def _answer(self, pending: Pending, word: str) -> None:
        if pending.answered:
            return
        pending.answered = True
        if pending.ceiling is not None:
            pending.ceiling.cancel()
        pending.decision = word
        if self.rpc.answer(pending.request_id, {"decision": word}):
            self.wire_decisions.append((pending.call_id, word))
            self.timings.append((pending.call_id, pending.received_ns, time.monotonic_ns()))
        self.pending.pop(pending.call_id, None)

    def _deny_with_reason(self, pending: Pending, reason: str) -> None:
        text = DENY_TEMPLATE.format(call_id=pending.call_id, reason=reason)
        client_id = f"mh-deny-{pending.call_id}"
        self.translator.client_messages[client_id] = ("deny-reason", text)
        turn_id = pending.turn_id or self.translator.active_turn_id
        try:
            future = self.rpc.send_request("turn/steer", {
                "threadId": self.thread_id(),
                "expectedTurnId": turn_id,
                "clientUserMessageId": client_id,
                "input": [{"type": "text", "text": text, "text_elements": []}],
            })
        except Exception:
            self.translator.client_messages.pop(client_id, None)
            self._answer(pending, "decline")
            return

        async def decline_after_steer() -> None:
            try:
                await asyncio.wait_for(asyncio.shield(future), STEER_WAIT_S)
            except (RpcError, asyncio.TimeoutError, Exception):
                # The turn is gone or the steer failed: the model will not see the reason,
                # but the call is still declined.
                self.translator.client_messages.pop(client_id, None)
            self._answer(pending, "decline")

        pending.deny_task = asyncio.get_running_loop().create_task(decline_after_steer())

    def _ceiling_expired(self, call_id: str) -> None:
        pending = self.pending.get(call_id)
        if pending is None or pending.answered or pending.deny_task is not None:
            return
        self.ctx.warn(WarningCode.PENDING_CALL_ABANDONED, f"{call_id} reached the codex adapter's {self.ceiling_ms}ms ceiling undecided and was declined")
        self._deny_with_reason(pending, f"no decision arrived within the codex adapter's {self.ceiling_ms}ms ceiling")

    def decline_all(self) -> list[str]:
        """Answer every unanswered approval `decline` now, without a reason steer;
        a deny waiting on its steer is declined at once. Returns the call ids."""
        declined = []
        for pending in list(self.pending.values()):
            if pending.deny_task is not None:
                pending.deny_task.cancel()
            self._answer(pending, "decline")
            declined.append(pending.call_id)
        return declined

    async def settle(self) -> None:
        """Wait until every deny in flight has written its decline."""
        tasks = [p.deny_task for p in self.pending.values() if p.deny_task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


# Each decision → the approval's answer (one table; a type not in it is declined).
APPROVAL_ANSWERS: dict[type, Callable[[Seam, Pending, Any, str], None]] = {
    Allow: Seam._accept, Abstain: Seam._accept, Deny: Seam._deny, Replace: Seam._refuse_replace,
}


def _hook_accept(hook_call: HookCall, decision: Decision) -> None:
    hook_call.verdict, hook_call.expected = "accept", hook_call.input["command"]
    hook_call.reply(b"")  # no output: the approval that follows is answered on what was decided


def _hook_deny(hook_call: HookCall, decision: Decision) -> None:
    reason = decision.reason if isinstance(decision, Deny) and decision.reason.strip() else HOOK_DENY_FALLBACK
    hook_call.verdict = "decline"
    hook_call.reply(deny_output(reason))


def _hook_replace(hook_call: HookCall, decision: Replace) -> None:
    if hook_call.name != "Bash" or COMMAND_ONLY.refusal(decision.input) is not None:
        _hook_deny(hook_call, decision)  # what the relay cannot carry: fail closed
        return
    hook_call.verdict, hook_call.expected = "accept", decision.input["command"]
    hook_call.reply(rewrite_output(hook_call.expected))


# Each decision → a relay hook's answer (one table; a type not in it is denied).
HOOK_ANSWERS: dict[type, Callable[[HookCall, Any], None]] = {
    Allow: _hook_accept, Abstain: _hook_accept, Deny: _hook_deny, Replace: _hook_replace,
}
