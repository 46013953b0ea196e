"""The run core: a run's rules as plain state and plain calls (docs/reference/wire.md).

What belongs here: `RunCore`, the run's state, and its inputs but two groups: the order of the
lines (`session.started` first, lines reported before it held, a boundary's lines before the turn
they open), the command answers in the order taken, the reports of the adapter's `RunContext`
(which the driver moves in), the spawn, stops, halts and interrupts as state, the spend cap, and
the outbox. The two groups are modules of their own, bound here as the core's methods: the turns'
sequence and their boundaries (`turns.py`: `frame.set`, `message.inject`, `--keep-open`,
`--max-turns`, `landed`) and the end of the stream (`windup.py`). The calls are `calls.py`'s, the
command steps `commands.py`'s, the start checks `start.py`'s; the adapter's facts are read through
`harness.py`, and the adapter is never called from here: what it must hear is an action.

Pure: no event loop, no timer, no queue, no write. The run's phase and its turn's are `phase.py`'s
one table, moved here only (`move`). Every input is a plain call (a command taken, a report of
the adapter's, a tick, the child's end, the outcome of an action); every effect is an action
value (`actions.py`: a line to write, a decision to deliver, a turn to write, the child to stop,
a timer to arm, a wait to wake, …) appended to the outbox in the order it must happen, which the
driver takes (`actions()`) and does after each input it moved in. What must wait (the spawn, a
control the child answers, a turn's write, a deadline, the child's end) is the driver's
(`loop.py`). Nothing is set on the core from outside and it calls nobody back. So every rule can
be driven in a test by plain calls with a fake clock (tests/run/test_core.py).

Rules it keeps:
* Every line goes through one `EventWriter` (so one `seq`); a line about the run
  before `session.started` is held and written right after it.
* An answer owed (an inject whose turn has not reached the child, the embedder's decision until
  the harness heard it) holds the answers to commands taken after it: answers keep the order taken.
* An interrupt's `command.result` precedes the `turn.ended` it causes, whichever the
  harness reports first.
* Every stop (halt, signal, spend cap, a child out of reach) moves to STOPPING and asks for the
  child's stop (`StopHarness`) once it exists — one before it is asked when the spawn settles.
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable

import msgspec

from metaharness.adapters.base import PresentedCall
from metaharness.loopback.pricing import Charge, Meter, disagrees, shipped_prices
from metaharness.protocol.frame import Frame
from metaharness.protocol.census import Census
from metaharness.protocol.commands import Halt
from metaharness.protocol.decode import CommandLine
from metaharness.protocol.events import (
    CommandResult,
    Event,
    Opaque,
    SessionEnded,
    SessionStarted,
    ToolRequested,
    ToolResult,
    TurnEnded,
    TurnStarted,
    WarningEvent,
)
from metaharness.protocol.refusals import WarningCode
from metaharness.protocol.spec import RunSpec
from metaharness.protocol.stream import EventWriter
from metaharness.protocol.values import HermeticAttestation, Ok, refused

from . import commands, turns, windup
from . import decide as texts
from .actions import STOP_HARNESS, WAKE, Abandon, Action, Heard, Say, Write
from .calls import Calls
from .harness import Harness
from .turns import Boundary
from .phase import Input, Phase, Phases
from .start import RunRefused, check_start

if TYPE_CHECKING:  # the policy engine is imported only by a policy-mode run
    from .policy import PolicyDecider


class RunCore:
    """One run's rules. `harness` is the adapter as the run sees it; `clock` gives seconds."""

    def __init__(self, spec: RunSpec, *, run_id: str, harness: Harness, clock: Callable[[], float] = time.monotonic,
                 meter: Meter | None = None) -> None:
        self.spec = spec
        self.run_id = run_id
        self.harness = harness
        self.out: list[Action] = []  # the actions not yet taken by the driver, in order (`actions`)
        self.writer = EventWriter(self._write, run_id)
        self.run_cwd = spec.work_dir()
        self.refusal: RunRefused | None = None  # set when the start was refused
        self.census = Census()
        self.calls = Calls(spec, harness, self.census, emit=self.emit, warn=self.call_warn, act=self.out_append,
                           clock=clock, run_cwd=self.run_cwd)
        self.boundary = Boundary()
        self.boundary_lines: list[Any] = []
        self.answers: list[list[Any]] = []  # [command id, outcome or None while owed], in order taken
        self.opening: Boundary | None = None  # the boundary taken for a turn not yet written to the child
        self.held: list[tuple[Any, str | None]] = []
        self.started = False
        self.ended: SessionEnded | None = None  # the harness's terminal record
        self.phases = Phases()
        self.turn = 0
        self.turns_ended = 0  # `turn.ended` lines written
        self.served = 0  # ... when the turn being served was opened: a later one ends it
        self.halt_id: str | None = None
        self.budget_stop = False
        self.model_failure: WarningEvent | None = None  # the last MODEL_REQUEST_FAILED written
        self.unreachable: str | None = None  # why the run could not write what a turn needed to the child
        self.stdin_done = False
        self._deferred_turn_end: tuple[str | None, str | None] | None = None  # ENDED_IN_INTERRUPT's line
        self.child: bool | None = None  # whether a child was spawned; None until the spawn settled
        self.read_before_spawn = False  # the command being taken was read before the spawn settled
        # The command being processed, so its answer is known to have been written.
        self.inflight: CommandLine | None = None  # the command being processed
        self.inflight_answered = False
        # Every model response metaharness sees is priced here (adapters reach it as ctx.meter). A
        # driver gives a meter whose charges it moves in itself (`charged`, then the actions).
        self.meter = meter if meter is not None else Meter(shipped_prices(), spec.max_cost_usd, on_charge=self.charged)
        self.priced_at_endpoint = False  # a service in front of the model prices it (the recorder)

    # --- the outbox (actions.py) ---------------------------------------------------------------
    def actions(self) -> list[Action]:
        """The actions appended since the last call, in the order they must be done."""
        out = self.out
        if out:  # an empty outbox is handed as it is: asked after every command of a flood
            self.out = []
        return out

    def out_append(self, action: Action) -> None:
        self.out.append(action)

    def _write(self, line: bytes) -> None:  # the EventWriter's sink: once per line, kept short
        self.out.append(Write(line))

    def say(self, text: str) -> None:
        self.out.append(Say(text))

    # --- phases (phase.py holds the table) -------------------------------------------------------
    def move(self, given: Input) -> Phase:
        after = self.phases.move(given)
        self.out.append(WAKE)
        return after

    @property
    def winding_up(self) -> bool:
        """From here on a command is TOO_LATE."""
        return self.phases.winding_up

    @property
    def stopping(self) -> bool:
        return self.phases.stopping

    @property
    def turn_running(self) -> bool:
        return self.phases.turn_running

    @property
    def spawn_settled(self) -> bool:
        """The adapter's start() returned or failed, or will never be called."""
        return self.child is not None

    @property
    def spawned(self) -> bool:
        return self.child is True

    def spawn_begins(self) -> None:
        self.move(Input.SPAWN)

    def spawn_settles(self, *, spawned: bool) -> None:
        """The adapter's start() returned (a child exists: its first turn opens, or it is stopped
        when a stop came first) or failed."""
        self.child = spawned
        if self.move(Input.SPAWNED if spawned else Input.NOT_SPAWNED) is Phase.OPENING:
            turns.open_turn(self, self.spec.prompt or "")
        elif spawned:  # a stop came while the child was spawning
            self.out.append(STOP_HARNESS)

    def _stop(self) -> None:
        """Move to STOPPING, and stop the child if one exists (one before it is stopped when it does)."""
        if self.move(Input.STOP) is Phase.STOPPING and self.child:
            self.out.append(STOP_HARNESS)

    @property
    def frame(self) -> Frame | None:
        """The frame in force."""
        return self.calls.frame

    @property
    def policy(self) -> PolicyDecider | None:
        return self.calls.policy

    # --- lines ---------------------------------------------------------------------------
    def warn(self, code: str, message: str) -> None:
        self.writer.write(WarningEvent(code=code, message=message))

    def call_warn(self, code: str, message: str) -> None:
        # About a call: held with the call's own lines until session.started.
        self.emit(WarningEvent(code=code, message=message))

    def result(self, command_id: str, outcome: Any) -> None:
        if self.inflight is not None and command_id == getattr(self.inflight, "id", None):
            self.inflight_answered = True
        if self.answers:  # an earlier command's answer is owed: answers keep the order taken
            self.answers.append([command_id, outcome])
        else:
            self.writer.write(CommandResult(id=command_id, outcome=outcome))

    def owe(self, command_id: str) -> None:
        """The command's answer comes later (`_settle`); answers to commands taken after it wait."""
        if self.inflight is not None and command_id == getattr(self.inflight, "id", None):
            self.inflight_answered = True  # owed, not missing
        self.answers.append([command_id, None])

    def settle(self, command_id: str, outcome: Any) -> None:
        for slot in self.answers:
            if slot[0] == command_id and slot[1] is None:
                slot[1] = outcome
                break
        while self.answers and self.answers[0][1] is not None:
            cid, answer = self.answers.pop(0)
            self.writer.write(CommandResult(id=cid, outcome=answer))

    # --- start -----------------------------------------------------------------------------
    def price_at_endpoint(self) -> Meter:
        """A service in front of the model (the recorder) prices its traffic on the run's meter: the
        run counts the traffic as seen, so `--max-cost-usd` is kept rather than refused."""
        self.priced_at_endpoint = True
        return self.meter

    def check_start(self) -> None:
        """The start checks (start.py); raises RunRefused, else the run is set to start."""
        plan = check_start(self.spec, self.harness, self.run_cwd, priced_at_endpoint=self.priced_at_endpoint)
        self.calls.policy = plan.policy
        self.meter.prices = plan.prices
        if plan.launch_frame is not None:
            self.boundary.frame = plan.launch_frame

    # --- the RunContext (what the adapter reports) ----------------------------------------------
    def session_started(self, event: SessionStarted, *, at: str | None = None) -> None:
        if self.started:
            self.warn(WarningCode.VENDOR_NOTICE, "the harness reported a second opening record; it was not written again")
            return
        event.hermetic = self._attestation(event.hermetic)
        if event.available_operations is msgspec.UNSET and event.offered_tools:
            ops = self.harness.operations_of_tools(event.offered_tools)
            if ops:
                event.available_operations = ops
        self.writer.write(event, at)
        self.started = True
        # Order at start: session.started, then held lines, then the launch frame's boundary lines.
        held, self.held = self.held, []
        for held_event, held_at in held:
            self.writer.write(held_event, held_at)
        turns.flush_lines(self)

    def _attestation(self, given: HermeticAttestation) -> HermeticAttestation:
        given.mode = self.spec.hermetic  # type: ignore[assignment]
        given.decisions = self.spec.decisions  # type: ignore[assignment]
        given.deny_only = self.spec.deny_only
        if self.spec.hermetic == "off":
            given.imposed, given.unavailable = [], []
        return given

    def emit(self, event: Event, *, at: str | None = None) -> None:
        if type(event) is WarningEvent and event.code == WarningCode.MODEL_REQUEST_FAILED:
            self.model_failure = event
        if type(event) is ToolResult and self.calls.ran_without_decision(event.call_id):
            self.calls.undecided_result(event.call_id)
        if not self.started:
            self.held.append((event, at))
        else:
            self.writer.write(event, at)

    def present(self, call: PresentedCall) -> None:
        self.calls.present(call)

    def record_call(self, call_id: str, name: str, input: Any, *, at: str | None = None) -> None:
        self.emit(ToolRequested(call_id=call_id, name=name, input=input, decision_required=False, seam="none"), at=at)

    def opaque(self, raw_line: bytes, *, vendor_type: str | None, vendor_subtype: str | None,
               source_line: int | None) -> None:
        line = raw_line.rstrip(b"\n")
        if line.endswith(b"\r"):
            line = line[:-1]
        self.emit(Opaque(vendor_type=vendor_type, vendor_subtype=vendor_subtype,
                         digest=hashlib.sha256(line).hexdigest(), source_line=source_line))

    def turn_started(self, *, at: str | None = None) -> None:
        self.turn += 1
        self.move(Input.TURN_STARTED)
        frame = self.calls.frame
        event = TurnStarted(turn=self.turn, frame_digest=frame.digest if frame is not None else None)
        if self.started:
            turns.flush_lines(self)
        self.emit(event, at=at)

    def turn_ended(self, stop_reason: str | None, *, at: str | None = None) -> None:
        if self.move(Input.TURN_ENDED) is Phase.ENDED_IN_INTERRUPT:
            # The interrupt's command.result precedes the turn.ended it causes,
            # whichever the harness reports first.
            self._deferred_turn_end = (stop_reason, at)
            return
        self._write_turn_end(stop_reason, at)

    def _write_turn_end(self, stop_reason: str | None, at: str | None) -> None:
        self.emit(TurnEnded(turn=self.turn, stop_reason=stop_reason), at=at)
        self.calls.abandon_all("the turn ended")
        self.turns_ended += 1
        if self.phases.run is Phase.SERVING:
            turns.land(self, Input.TURN_SERVED)
        else:
            self.out.append(WAKE)

    def charged(self, charge: Charge) -> None:
        """The meter priced a response: past the cap, say so once and stop the run at once."""
        meter = self.meter
        if not meter.reached or self.budget_stop:
            return
        self.budget_stop = True
        if charge.cost_usd is None:
            self.emit(WarningEvent(code=WarningCode.PRICE_UNKNOWN, message=(
                f"model {charge.model!r} is not in the price table (prices taken {meter.prices.taken}), so "
                f"--max-cost-usd cannot be kept past this response; add it with --prices")))
        message = (f"--max-cost-usd {meter.cap_usd:g} reached: spent {meter.summary()}; "
                   f"no further model request is forwarded and the run stops")
        spent = msgspec.UNSET if meter.unpriced else round(meter.spent_usd, 6)  # unknown, as in session.ended
        self.emit(WarningEvent(code=WarningCode.BUDGET_REACHED, message=message, metered_cost_usd=spent))
        self.say(f"metaharness: {message}")
        # the harness may present the call its last answer asked for before the stop lands: it
        # must not run, and its deny must stop the turn before the harness asks its model again
        # (in-process on oharness, where no proxy of ours stands between them)
        self.calls.closed = "the spend cap was reached"
        if self.spawned:
            self.out.append(Abandon("interrupt"))
        if not self.stopping:
            self.stop_requested()

    def session_ended(self, event: SessionEnded, *, at: str | None = None) -> None:
        if self.ended is not None:
            return
        if self.meter.responses:
            event.metered_cost_usd = None if self.meter.unpriced else round(self.meter.spent_usd, 6)
            reported, metered = event.total_cost_usd, event.metered_cost_usd
            if reported is not None and metered is not None and disagrees(metered, reported):
                self.emit(WarningEvent(code=WarningCode.COST_DISAGREES, message=(
                    f"the harness reports ${reported:.4f}, metaharness priced ${metered:.4f} from the traffic it "
                    f"saw (prices taken {self.meter.prices.taken})")))
        # Decisions still open cannot be counted after the census is written.
        self.calls.abandon_all("the stream ended")
        event.census = self.census.snapshot()
        failure = self.model_failure.model_failure if self.model_failure is not None else None
        if event.is_error and event.api_error_status is None and failure and failure.http_status not in (None, 200):
            # The vendor did not say; the loopback or proxy served this status to it.
            event.api_error_status = str(failure.http_status)
        self.ended = event
        self.emit(event, at=at)

    # --- commands (commands.py holds the steps) -------------------------------------------------
    # One command through the pipeline's steps (a command the child must hear is a `Carry` action):
    # `commands.take` itself, so the route of a command enters no forwarding frame.
    take = commands.take
    # The turns' sequence and its boundaries (turns.py), the end of the stream (windup.py): the core's own inputs.
    set_frame_at_boundary, inject_at_boundary = turns.set_frame_at_boundary, turns.inject_at_boundary
    turn_written, landed = turns.turn_written, turns.landed
    refuse_start, wind_up, close_reason = windup.refuse_start, windup.wind_up, windup.close_reason

    def answer_late(self, item: CommandLine) -> None:
        self.result(item.id, refused(*commands.late_refusal(self, item)))

    def answer_leftovers(self, queued: Iterable[CommandLine]) -> None:
        """Answer the command in flight (if its processing could not finish) and every
        command still queued: all were read before `stream.closed`."""
        item = self.inflight
        if item is not None and not self.inflight_answered and type(item) is not Halt:
            self.answer_late(item)
        for item in queued:
            self.answer_late(item)

    def hear(self, cid: str, call_id: str) -> None:
        """The embedder's decision for `call_id` was handed to the harness (`Deliver`s): its answer
        is owed until the driver says whether the harness heard it (`Heard`, then `heard`)."""
        self.owe(cid)
        self.out.append(Heard(call_id, cid))

    def heard(self, call_id: str, cid: str, why: str | None) -> None:
        """Whether the harness heard the embedder's decision (`why`: None, or why not): the call's
        line and census count and an ok, or the call pending again and TOO_LATE."""
        refusal = self.calls.heard(call_id, why)
        self.settle(cid, refused(*refusal) if refusal is not None else Ok(applies_at=None))

    def halt_taken(self, cid: str) -> None:
        self._abandon_for_stop("the run was halted")
        self.halt_id = cid
        self.calls.closed = "the run was halted"
        self._stop()

    def interrupt_begins(self) -> None:
        self.move(Input.INTERRUPT)
        self.out.append(Abandon("interrupt"))
        self.calls.abandon_all("the run was interrupted")

    def interrupt_ends(self) -> None:
        before = self.phases.turn
        self.move(Input.INTERRUPT_ANSWERED)
        if before is Phase.ENDED_IN_INTERRUPT and self._deferred_turn_end is not None:
            stop_reason, at = self._deferred_turn_end
            self._deferred_turn_end = None
            self._write_turn_end(stop_reason, at)

    def stop_requested(self) -> None:
        """A stop with no halt command (SIGINT/SIGTERM, the spend cap, a child out of reach): wind up.
        The calls still pending are abandoned the first time the run begins to wind up."""
        if not self.winding_up:
            self._abandon_for_stop(self.calls.closed or "the stream ended")
        self._stop()

    def _abandon_for_stop(self, why: str) -> None:
        """A stop's abandonment denies; the harness hears of the stop before them (`abandoning`)."""
        if self.calls.pending and self.spawned:
            self.out.append(Abandon("stop"))
        self.calls.abandon_all(why)

    def stdin_ended(self) -> None:
        self.stdin_done = True
        turns.wake(self)

    def harness_unreachable(self, why: str) -> None:
        """A write a turn needs (its frame, its input) found the child gone: the run stops (the
        driver stops the child) and winds up; stderr says so now, the wind-up's NO_TERMINAL_RECORD names it. The turn's
        injects reached no one: no `injection` line claims them, an inject still owed its answer is
        refused TOO_LATE, one already accepted gets COMMAND_NOT_APPLIED."""
        turns.undelivered(self, texts.UNREACHABLE.format(why=why))
        if self.unreachable is None:
            self.unreachable = why
            self.say(f"metaharness: {texts.UNREACHABLE.format(why=why)}; the run ends")
        self._stop()

    def child_output_ended(self) -> None:
        # Wind-up begins when the child's output ends; a command read from here on is TOO_LATE.
        self.move(Input.OUTPUT_ENDED)

    # --- deadlines (the driver arms a timer for next_deadline and calls expire then) ----------------
    def next_deadline(self) -> float | None:
        return self.calls.next_deadline()

    def expire(self, now: float) -> None:
        self.calls.expire(now)

    # --- the turns' sequence (phase.py's OPENING … WOKEN) and boundaries ---------------------------

    # --- wind-up -----------------------------------------------------------------------------------

