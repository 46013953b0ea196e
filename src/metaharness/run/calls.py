"""Call bookkeeping: every call the harness presents, from `tool.requested` to `tool.decided`.

What belongs here: the calls presented (and their digests), the calls pending an
answer and their deadlines, the decisions delivered, abandonment, the census, and
the decision modes as a table {mode → decider}. Pure: time comes from the `clock`
given, and a deadline is not a timer — `next_deadline()` says when the earliest falls
and whoever drives the run calls `expire(now)` then (`loop.py` arms one asyncio timer
for it, told by an `Arm` action; tests call it with a fake clock). A decision reaches the
harness as a `Deliver` action (`actions.py`), the decider's value unchanged.

Rules it keeps:
* Every presented call gets exactly one decision, delivered to the child before its
  `tool.decided` line is written, and counted once in the census. An embedder's answer the
  child cannot hear (it died before the run noticed) is refused TOO_LATE and claims nothing:
  the call stays pending and closes with the wind-up's deny, which is what the line and the
  census then say. An answer counts as heard once it was written and the harness was still
  alive after the write (`Harness.reachable`, the child's `alive`: not exited, not killed — a
  SIGKILLed child not yet torn down still takes the write and never reads it): the driver says
  so after the `Deliver`s (`Heard`, then `heard`); until then the call is held (`hearing`).
* A call id presented again with the same input is the same call (it shares the
  decision); with a different input it is denied (REQUEST_MUTATED).
* A deny-only run never grants: an allow is delivered as abstain (`as_delivered`).
* A pending call is decided by the embedder, by its deadline (deny, decided_by
  "deadline"), or abandoned (deny, "adapter") when its turn, the run or the stream ends.
* A result for a call that was presented and never decided is reported as exactly
  that (UNDECIDED_CALL_RAN), and the call is closed without a decision.
"""

from __future__ import annotations

import hashlib
from msgspec import Struct, field
from typing import TYPE_CHECKING, Any, Callable

import msgspec

from metaharness.adapters.base import PresentedCall, Resolution, resolve_tool, vendor_timeout_ms
from metaharness.protocol.census import Census
from metaharness.protocol.events import Event, ToolDecided, ToolRequested, WarningEvent
from metaharness.protocol.frame import Frame
from metaharness.protocol.refusals import CommandCode, WarningCode
from metaharness.protocol.spec import RunSpec
from metaharness.protocol.values import Abstain, Allow, Decision, Deny

from . import decide as texts
from .actions import ARM, Action, Deliver
from .harness import Harness

if TYPE_CHECKING:  # the policy engine is imported only by a policy-mode run
    from .policy import PolicyDecider

_KEY_ENCODER = msgspec.json.Encoder(order="deterministic")


def call_digest(call_id: str, name: str, input: Any) -> str:
    return hashlib.sha256(_KEY_ENCODER.encode({"call_id": call_id, "input": input, "name": name})).hexdigest()


class Pending(Struct):
    """A call waiting for the embedder; every presentation of it waits on the one decision."""

    call: PresentedCall
    requested_at: float
    deadline_at: float
    waiting: list[PresentedCall] = field(default_factory=list)
    policy: Any = None  # (verdict, outcome) of a call the policy forwarded to the embedder


class _View(Struct):
    """How one presentation reads on the wire (its `tool.requested`)."""

    call: PresentedCall
    operations: list[str]
    subjects: list[str]


class Calls:
    """The calls of one run. `emit` writes a line in the run's order; `warn` writes a
    warning about a call (held with the call's lines until `session.started`)."""

    def __init__(self, spec: RunSpec, harness: Harness, census: Census, *, emit: Callable[[Event], None],
                 warn: Callable[[str, str], None], act: Callable[[Action], None],
                 clock: Callable[[], float], run_cwd: str) -> None:
        self.spec = spec
        self.harness = harness
        self.tools = harness.adapter.tools
        self.census = census
        self.emit = emit
        self.warn = warn
        self.act = act  # the core's outbox
        self.clock = clock
        self.run_cwd = run_cwd
        self.presented: dict[str, str] = {}  # call_id → digest, every call presented for decision
        self.pending: dict[str, Pending] = {}  # in presentation order, so in deadline order
        self.decided: dict[str, tuple[Decision, str]] = {}  # call_id → (decision, decided_by) delivered
        # The embedder's answers handed to the harness, until the driver says it heard them (`heard`).
        self.hearing: dict[str, tuple[Pending, Decision, str, int, Any]] = {}
        self.ran_undecided: set[str] = set()  # presented, never decided, and a result came
        self.frame: Frame | None = None  # the frame in force, and what it admits (`enforce`)
        self.admitted: list = []
        self.scope: list = []
        self.policy: PolicyDecider | None = None  # the PolicyDecider of a policy-mode run
        self.closed: str | None = None  # why a call presented from now on is abandoned at once (a halt, the spend cap)
        self._no_frame_warned = False
        self._decider = DECIDERS[spec.decisions]

    def enforce(self, frame: Frame | None) -> None:
        """Put `frame` in force (None: no frame, as before the first one)."""
        self.frame = frame
        self.admitted, self.scope = texts.frame_terms(frame) if frame is not None else ([], [])

    # --- presenting ------------------------------------------------------------------
    def present(self, call: PresentedCall) -> None:
        digest = call_digest(call.call_id, call.name, call.input)
        known = self.presented.get(call.call_id)
        resolution = resolve_tool(self.tools, call.name, call.input, call.cwd, self.run_cwd)
        view = _View(call, list(dict.fromkeys(op[0] for op in sorted(resolution.operations))),
                     [s for s, _ in resolution.subjects])
        if known is not None:
            self._requested(view, False, call.seam)
            if known != digest:
                self.warn(WarningCode.REQUEST_MUTATED, f"{call.call_id} was presented again with a different input")
                self._decide(call, [call], Deny(reason=texts.MUTATED), "adapter", call.seam, None)
            elif (pending := self.pending.get(call.call_id)) is not None:
                pending.waiting.append(call)
            elif call.call_id in self.decided:
                decision, decided_by = self.decided[call.call_id]
                self.act(Deliver(call.call_id, decision, decided_by))
            return
        self.presented[call.call_id] = digest
        if self.closed is not None:
            self._requested(view, False, call.seam)
            self._decide(call, [call], Deny(reason=texts.ABANDONED.format(why=self.closed)),
                         "adapter", call.seam, None)
            return
        self._decider(self, call, resolution, view)

    def _requested(self, view: _View, required: bool, seam: str, deadline: int | None = None,
                   policy: Any = msgspec.UNSET) -> None:
        call = view.call
        self.emit(ToolRequested(
            call_id=call.call_id, name=call.name, input=call.input,
            operations=view.operations or msgspec.UNSET, subjects=view.subjects or msgspec.UNSET,
            decision_required=required, deadline_ms=deadline, seam=seam, policy=policy,  # type: ignore[arg-type]
        ), at=call.at)

    # --- the deciders, one per decision mode -------------------------------------------
    def _by_frame(self, call: PresentedCall, resolution: Resolution, view: _View) -> None:
        if self.frame is None:
            if not self._no_frame_warned:
                self._no_frame_warned = True
                self.warn(WarningCode.NO_FRAME_IN_FORCE, texts.NO_FRAME_WARNING)
            self._requested(view, False, "none")
            self._decide(call, [call], Abstain(), "adapter", "none", None)
            return
        decision = self._frame_verdict(call, resolution)
        self._requested(view, False, call.seam)
        self._decide(call, [call], decision, "frame", call.seam, None)

    def _ask(self, call: PresentedCall, resolution: Resolution, view: _View, policy: Any = None) -> None:
        deadline = self.spec.decision_timeout_ms
        wire = self.policy.wire_policy(policy[1]) if policy is not None else msgspec.UNSET
        self._requested(view, True, call.seam, deadline, wire)
        now = self.clock()
        self.pending[call.call_id] = Pending(call=call, requested_at=now, deadline_at=now + deadline / 1000,
                                             waiting=[call], policy=policy)
        self.act(ARM)  # a call began to wait: the driver arms its timer

    def _observe(self, call: PresentedCall, resolution: Resolution, view: _View) -> None:
        self._requested(view, False, call.seam)
        self._decide(call, [call], Allow(), "observe", call.seam, None)

    def _by_policy(self, call: PresentedCall, resolution: Resolution, view: _View) -> None:
        policy = self.policy
        verdict = policy.verdict(call.name, call.input, call.cwd or self.run_cwd)
        frame_reason = None
        if verdict.behavior != "deny" and self.frame is not None:  # deny rules are reported first
            decision = self._frame_verdict(call, resolution)
            if isinstance(decision, Deny):
                frame_reason = decision.reason
        outcome = policy.decision(verdict, frame_reason)
        if outcome.decision == "forward":
            self._ask(call, resolution, view, policy=(verdict, outcome))
            return
        self._requested(view, False, call.seam)
        self._decide(call, [call], policy.as_decision(outcome), outcome.decided_by, call.seam, None)
        policy.record(call.call_id, outcome)

    def _frame_verdict(self, call: PresentedCall, resolution: Resolution) -> Decision:
        decision, uncovered = texts.frame_verdict(self.admitted, self.scope, call.name,
                                                  resolution.operations, resolution.subjects)
        if uncovered:
            self.warn(WarningCode.UNCOVERED_TOOL, f"{call.name} renders to no operation, so no frame can admit it")
        return decision

    # --- answering pending calls -------------------------------------------------------
    def decide(self, call_id: str, decision: Decision) -> tuple[str, str] | None:
        """The embedder's answer: None when it was handed to the harness (whether it was heard comes
        back as `heard`); else the TOO_LATE or UNKNOWN_CALL refusal as (code, reason)."""
        if call_id not in self.pending:
            if call_id in self.presented:
                return CommandCode.TOO_LATE, texts.REPLAYED.format(call_id=call_id)
            return CommandCode.UNKNOWN_CALL, texts.UNKNOWN_CALL.format(call_id=call_id)
        # Whether the harness heard it comes back from the driver (`heard`): one that died before
        # the run noticed is not handed the answer, and the call is pending again, for the wind-up's deny.
        self._close(call_id, decision, "embedder", heard_only=True)
        return None

    def heard(self, call_id: str, why: str | None) -> tuple[str, str] | None:
        """Whether the harness heard the embedder's answer for `call_id` (`why`: None, or why not).
        Heard: its line and census count, None. Not: nothing is claimed for it — it is pending again,
        in deadline order, for the wind-up's deny — and the TOO_LATE refusal as (code, reason)."""
        pending, decision, decided_by, latency, resolved = self.hearing.pop(call_id)
        if why is not None:
            del self.decided[call_id]
            ordered = sorted([*self.pending.items(), (call_id, pending)], key=lambda item: item[1].requested_at)
            self.pending.clear()
            self.pending.update(ordered)
            return CommandCode.TOO_LATE, texts.UNDELIVERED.format(why=why)
        if resolved is not None:
            self.policy.record(pending.call.call_id, resolved)
        self._record(pending.call, decision, decided_by, pending.call.seam, latency)
        return None

    def was_presented(self, call_id: str) -> bool:
        return call_id in self.presented

    def replace_refusal(self, call_id: str, new_input: Any) -> str | None:
        """Why a replace cannot reach this call (refused UNSUPPORTED_CONTROL), or None."""
        pending = self.pending.get(call_id)
        if not self.harness.delivers_replace or (pending is not None and not pending.call.can_replace):
            return (f"the {self.harness.kind} adapter cannot deliver replace for this call; "
                    "deny with a reason instead")
        only = pending.call.replace_only if pending is not None else None
        return only.refusal(new_input) if only is not None else None

    def next_deadline(self) -> float | None:
        """When the earliest pending call's deadline falls (clock time), or None. Every call waits
        the same decision_timeout_ms, so the first call still pending is the first to expire."""
        for pending in self.pending.values():
            return pending.deadline_at
        return None

    def expire(self, now: float) -> None:
        """Deny every pending call whose deadline fell at or before `now`."""
        n = self.spec.decision_timeout_ms
        while self.pending:
            call_id, pending = next(iter(self.pending.items()))
            if pending.deadline_at > now:
                return
            reason = texts.DEADLINE.format(n=n, m=vendor_timeout_ms(n))
            self._close(call_id, Deny(reason=reason), "deadline")

    def abandon_all(self, why: str) -> None:
        for call_id in list(self.pending):
            self._close(call_id, Deny(reason=texts.ABANDONED.format(why=why)), "adapter")
            self.warn(WarningCode.PENDING_CALL_ABANDONED, f"{call_id} was never decided by the embedder")

    def ran_without_decision(self, call_id: str) -> bool:
        """A result came for `call_id`: True when it was presented and never decided (nor already reported)."""
        return call_id in self.presented and call_id not in self.decided and call_id not in self.ran_undecided

    def undecided_result(self, call_id: str) -> None:
        """A result for a call metaharness presented and never decided: say exactly that.
        The call is closed without a decision (no tool.decided, no census count), so nothing
        later claims that it did not run."""
        self.pending.pop(call_id, None)
        self.ran_undecided.add(call_id)
        self.emit(WarningEvent(code=WarningCode.UNDECIDED_CALL_RAN, message=(
            f"{call_id} produced a result though metaharness never decided it: "
            "something other than this run's embedder let it run")))

    def _close(self, call_id: str, decision: Decision, decided_by: str, *, heard_only: bool = False) -> None:
        """Close a pending call with `decision`, delivered to every presentation of it. `heard_only`
        (the embedder's answer): its line waits until the driver says the harness heard it (`heard`)."""
        pending = self.pending.pop(call_id)  # closed before the child hears it (it may answer at once)
        latency = int((self.clock() - pending.requested_at) * 1000)
        resolved = None
        if pending.policy is not None:
            # A forwarded policy ask: the engine resolves the answer; the trail records it.
            verdict = pending.policy[0]
            answer = None if decided_by == "deadline" else decision
            resolved = self.policy.answer(verdict, answer)
            if decided_by == "embedder":
                decision = self.policy.as_decision(resolved, decision)
        decision = texts.as_delivered(decision, self.spec.deny_only)
        self.decided[call_id] = (decision, decided_by)
        for presented in pending.waiting:
            self.act(Deliver(presented.call_id, decision, decided_by, heard_only))
        if heard_only:
            self.hearing[call_id] = (pending, decision, decided_by, latency, resolved)
            return
        if resolved is not None:
            self.policy.record(pending.call.call_id, resolved)
        self._record(pending.call, decision, decided_by, pending.call.seam, latency)

    def _decide(self, call: PresentedCall, waiting: list[PresentedCall], decision: Decision, decided_by: str,
                seam: str, latency: int | None) -> None:
        decision = texts.as_delivered(decision, self.spec.deny_only)
        self.decided[call.call_id] = (decision, decided_by)
        for presented in waiting:
            self.act(Deliver(presented.call_id, decision, decided_by))
        self._record(call, decision, decided_by, seam, latency)

    def _record(self, call: PresentedCall, decision: Decision, decided_by: str, seam: str, latency: int | None) -> None:
        """The decision's line and its census count, once the child heard it."""
        self.emit(ToolDecided(call_id=call.call_id, decision=decision, decided_by=decided_by,  # type: ignore[arg-type]
                              seam=seam, latency_ms=latency))  # type: ignore[arg-type]
        self.census.count(decision, decided_by, seam)

# The decision modes: who decides a call the moment it is presented.
DECIDERS: dict[str, Callable[[Calls, PresentedCall, Resolution, _View], None]] = {
    "frame": Calls._by_frame,
    "ask": Calls._ask,
    "observe": Calls._observe,
    "policy": Calls._by_policy,
}
