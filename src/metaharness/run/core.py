"""The run core: a run's rules as plain state and plain calls (docs/reference/wire.md).

What belongs here: the order of the lines (`session.started` first, lines reported
before it held, a boundary's lines before the turn they open), the reports of the adapter's
`RunContext` (which the driver moves in), turns and their boundaries (`frame.set`, `message.inject`,
`--keep-open`, `--max-turns`), halts and interrupts as state, and wind-up ending in
exactly one `stream.closed`. The calls are `calls.py`'s, the command steps
`commands.py`'s, the start checks `start.py`'s; the adapter's facts are read through
`harness.py`, and the adapter is never called from here: what it must hear is an action.

Pure: no event loop, no timer, no queue, no write. The run's phase and its turn's are `phase.py`'s
machines, moved here only (`_move`). Every input is a plain call (a command taken, a report of
the adapter's, a tick, the child's end); every effect is an action value (`actions.py`: a line to
write, a decision to deliver, a timer to arm, a wait to wake, …) appended to the outbox in the
order it must happen, which the driver takes (`actions()`) and does after each input it moved in.
What must wait (the spawn, a control the child answers, a deadline, the child's end) is the
driver's (`loop.py`). Nothing is set on the core from outside and it calls nobody back. So every
rule can be driven in a test by plain calls with a fake clock (tests/run/test_core.py).

Rules it keeps:
* Every line goes through one `EventWriter` (so one `seq`); a line about the run
  before `session.started` is held and written right after it.
* A turn's input is the frame's rendering (when a frame takes effect), then each
  inject in arrival order, then (first turn only) the prompt.
* A `message.inject` read while no turn runs opens the next turn at once and is answered once
  that turn was written to the child — refused TOO_LATE (`the harness can no longer be
  reached: …`) with no `injection` line when the write found it gone; answers to commands taken
  after it wait for it, so answers keep the order taken. One read while a turn runs is accepted
  at once (an answer held for a whole turn would stall the decisions the embedder owes).
* A turn taken and never written to the child claims nothing: no `injection` or `step.entered`
  line, its `frame.set` and accepted injects said not applied (COMMAND_NOT_APPLIED).
* An interrupt's `command.result` precedes the `turn.ended` it causes, whichever the
  harness reports first.
* Wind-up: pending calls abandoned, a missing terminal record said, boundary commands
  that never took effect said, every command still unanswered answered, the halt's
  result, then `stream.closed` with the close reason.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable

import msgspec

from metaharness.adapters.base import PresentedCall
from metaharness.loopback.pricing import Charge, Meter, disagrees, shipped_prices
from metaharness.protocol import frame as frames
from metaharness.protocol.frame import Frame
from metaharness.protocol.census import Census
from metaharness.protocol.commands import Halt
from metaharness.protocol.decode import CommandLine
from metaharness.protocol.events import (
    CommandResult,
    Event,
    Injection,
    Opaque,
    SessionEnded,
    SessionStarted,
    StepEntered,
    ToolRequested,
    ToolResult,
    TurnEnded,
    TurnStarted,
    WarningEvent,
)
from metaharness.protocol.refusals import CommandCode, WarningCode
from metaharness.protocol.spec import RunSpec
from metaharness.protocol.stream import EventWriter
from metaharness.protocol.values import HermeticAttestation, Ok, ProcessTermination, UnknownTermination, refused

from . import commands
from . import decide as texts
from .actions import FINISH, LAND, STOP_HARNESS, WAKE, Abandon, Action, BeginTurn, ClosePolicy, Heard, Say, Write
from .calls import Calls
from .harness import Harness
from .phase import Input, Phase, Phases
from .start import RunRefused, check_start

if TYPE_CHECKING:  # the policy engine is imported only by a policy-mode run
    from .policy import PolicyDecider


@dataclass
class Boundary:
    """What takes effect at the next turn boundary."""

    frame: Frame | None = None
    frame_command: str | None = None
    superseded: list[str] = field(default_factory=list)
    injects: list[tuple[str, str]] = field(default_factory=list)  # (command id, text)
    # injects read while no turn ran (their turn opens at once): answered once it reached the harness
    owed: list[str] = field(default_factory=list)
    previous: Frame | None = None  # the frame in force before this boundary's took effect (`_undelivered`)

    def __bool__(self) -> bool:
        return self.frame is not None or bool(self.injects)


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
        self._boundary_lines: list[Any] = []
        self._answers: list[list[Any]] = []  # [command id, outcome or None while owed], in order taken
        self._opening: Boundary | None = None  # the boundary taken for a turn not yet written to the child
        self._held: list[tuple[Any, str | None]] = []
        self._session_started = False
        self.ended: SessionEnded | None = None  # the harness's terminal record
        self.phases = Phases()
        self.turn = 0
        self.turns_ended = 0  # `turn.ended` lines written
        self._served = 0  # ... when the turn being served was opened: a later one ends it
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

    def _say(self, text: str) -> None:
        self.out.append(Say(text))

    # --- phases (phase.py holds the table) -------------------------------------------------------
    def _move(self, given: Input) -> Phase:
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
        self._move(Input.SPAWN)

    def spawn_settles(self, *, spawned: bool) -> None:
        """The adapter's start() returned (a child exists: its first turn opens, or it is stopped
        when a stop came first) or failed."""
        self.child = spawned
        if self._move(Input.SPAWNED if spawned else Input.NOT_SPAWNED) is Phase.OPENING:
            self._open(self.spec.prompt or "")
        elif spawned:  # a stop came while the child was spawning
            self.out.append(STOP_HARNESS)

    def _stop(self) -> None:
        """Move to STOPPING, and stop the child if one exists (one before it is stopped when it does)."""
        if self._move(Input.STOP) is Phase.STOPPING and self.child:
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
        if self._answers:  # an earlier command's answer is owed: answers keep the order taken
            self._answers.append([command_id, outcome])
        else:
            self.writer.write(CommandResult(id=command_id, outcome=outcome))

    def _owe(self, command_id: str) -> None:
        """The command's answer comes later (`_settle`); answers to commands taken after it wait."""
        if self.inflight is not None and command_id == getattr(self.inflight, "id", None):
            self.inflight_answered = True  # owed, not missing
        self._answers.append([command_id, None])

    def _settle(self, command_id: str, outcome: Any) -> None:
        for slot in self._answers:
            if slot[0] == command_id and slot[1] is None:
                slot[1] = outcome
                break
        while self._answers and self._answers[0][1] is not None:
            cid, answer = self._answers.pop(0)
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

    def refuse_start(self, refusal: RunRefused, queued: Iterable[CommandLine] = ()) -> int:
        self.refusal = refusal  # the library API raises it (metaharness.api.RunRefused)
        self._say(f"metaharness: {refusal.sentence}")
        self._move(Input.CLOSE)
        for command_id, code, reason in refusal.results:
            self.result(command_id, refused(code, reason))
        self.answer_leftovers(queued)  # every line read before stream.closed is answered
        self.writer.close("error", UnknownTermination())
        return 2

    # --- the RunContext (what the adapter reports) ----------------------------------------------
    def session_started(self, event: SessionStarted, *, at: str | None = None) -> None:
        if self._session_started:
            self.warn(WarningCode.VENDOR_NOTICE, "the harness reported a second opening record; it was not written again")
            return
        event.hermetic = self._attestation(event.hermetic)
        if event.available_operations is msgspec.UNSET and event.offered_tools:
            ops = self.harness.operations_of_tools(event.offered_tools)
            if ops:
                event.available_operations = ops
        self.writer.write(event, at)
        self._session_started = True
        # Order at start: session.started, then held lines, then the launch frame's boundary lines.
        held, self._held = self._held, []
        for held_event, held_at in held:
            self.writer.write(held_event, held_at)
        self._flush_boundary_lines()

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
        if not self._session_started:
            self._held.append((event, at))
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
        self._move(Input.TURN_STARTED)
        frame = self.calls.frame
        event = TurnStarted(turn=self.turn, frame_digest=frame.digest if frame is not None else None)
        if self._session_started:
            self._flush_boundary_lines()
        self.emit(event, at=at)

    def turn_ended(self, stop_reason: str | None, *, at: str | None = None) -> None:
        if self._move(Input.TURN_ENDED) is Phase.ENDED_IN_INTERRUPT:
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
            self._move(Input.TURN_SERVED)
            self.out.append(LAND)
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
        self._say(f"metaharness: {message}")
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
        self._owe(cid)
        self.out.append(Heard(call_id, cid))

    def heard(self, call_id: str, cid: str, why: str | None) -> None:
        """Whether the harness heard the embedder's decision (`why`: None, or why not): the call's
        line and census count and an ok, or the call pending again and TOO_LATE."""
        refusal = self.calls.heard(call_id, why)
        self._settle(cid, refused(*refusal) if refusal is not None else Ok(applies_at=None))

    def set_frame_at_boundary(self, cid: str, new_frame: Frame) -> None:
        frame = self.calls.frame
        same_step = frame is not None and frame.step == new_frame.step
        if self.boundary.frame_command is not None:
            self.boundary.superseded.append(self.boundary.frame_command)
        self.boundary.frame = new_frame
        self.boundary.frame_command = cid
        self.result(cid, Ok(applies_at="next turn" if same_step else "next step"))
        self._wake()

    def inject_at_boundary(self, cid: str, text: str) -> None:
        """Read while a turn runs: accepted at once (its turn is a boundary away; an answer held
        that long would stall the calls the embedder must decide meanwhile). Read while none runs:
        its turn opens now, and it is answered once that turn reached the harness (`turn_written`,
        `harness_unreachable`), like a decision."""
        self.boundary.injects.append((cid, text))
        if self.turn_running:
            self.result(cid, Ok(applies_at="next turn"))
        else:
            self.boundary.owed.append(cid)
            self._owe(cid)
        self._wake()

    def halt_taken(self, cid: str) -> None:
        self._abandon_for_stop("the run was halted")
        self.halt_id = cid
        self.calls.closed = "the run was halted"
        self._stop()

    def interrupt_begins(self) -> None:
        self._move(Input.INTERRUPT)
        self.out.append(Abandon("interrupt"))
        self.calls.abandon_all("the run was interrupted")

    def interrupt_ends(self) -> None:
        before = self.phases.turn
        self._move(Input.INTERRUPT_ANSWERED)
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
        self._wake()

    def harness_unreachable(self, why: str) -> None:
        """A write a turn needs (its frame, its input) found the child gone: the run stops (the
        driver stops the child) and winds up; stderr says so now, the wind-up's NO_TERMINAL_RECORD names it. The turn's
        injects reached no one: no `injection` line claims them, an inject still owed its answer is
        refused TOO_LATE, one already accepted gets COMMAND_NOT_APPLIED."""
        self._undelivered(texts.UNREACHABLE.format(why=why))
        if self.unreachable is None:
            self.unreachable = why
            self._say(f"metaharness: {texts.UNREACHABLE.format(why=why)}; the run ends")
        self._stop()

    def turn_written(self) -> None:
        """The turn `BeginTurn` asked for was written to the child: its owed answers, then its lines;
        it is served until a turn ends (one may have ended while it was written)."""
        opening, self._opening = self._opening, None
        for cid in opening.owed if opening is not None else ():
            self._settle(cid, Ok(applies_at="next turn"))
        if self._session_started:
            self._flush_boundary_lines()
        if self._move(Input.TURN_WRITTEN) is Phase.SERVING and self.turns_ended > self._served:
            self._move(Input.TURN_SERVED)
            self.out.append(LAND)

    def _undelivered(self, why: str) -> None:
        """The turn `_open` took never reached the child: its `injection` lines go unwritten,
        its owed answers are refused TOO_LATE with `why`, its accepted injects said not applied —
        and so is its `frame.set` (no `step.entered` claims it; the frame before it stays in force)."""
        boundary, self._opening = self._opening, None
        self._boundary_lines = [line for line in self._boundary_lines if type(line) is not Injection]
        if boundary is None:
            return
        if boundary.frame_command is not None:
            self._boundary_lines = [line for line in self._boundary_lines if type(line) is not StepEntered]
            self.calls.enforce(boundary.previous)
            self.warn(WarningCode.COMMAND_NOT_APPLIED, f"frame.set {boundary.frame_command} never took effect: {why}")
        for cid in boundary.owed:
            self._settle(cid, refused(CommandCode.TOO_LATE, why))
        for cid, _text in boundary.injects:
            if cid not in boundary.owed:
                self.warn(WarningCode.COMMAND_NOT_APPLIED, f"message.inject {cid} never took effect: {why}")
        boundary.injects.clear()

    def child_output_ended(self) -> None:
        # Wind-up begins when the child's output ends; a command read from here on is TOO_LATE.
        self._move(Input.OUTPUT_ENDED)

    # --- deadlines (the driver arms a timer for next_deadline and calls expire then) ----------------
    def next_deadline(self) -> float | None:
        return self.calls.next_deadline()

    def expire(self, now: float) -> None:
        self.calls.expire(now)

    # --- the turns' sequence (phase.py's OPENING … WOKEN) and boundaries ---------------------------
    def landed(self, turn_coming: bool) -> None:
        """The commands queued at a boundary landed (`Land`); `turn_coming`: the harness says it will
        start a turn by itself. What follows the end of a turn: serve the harness's own turn to its
        end, open the next turn (a boundary waits), idle (`--keep-open`, nothing at the boundary,
        stdin open), or finish (no more turns; `--max-turns` spent sets the budget close reason).
        Woken at an idle boundary: open, idle again, or finish. Winding up: nothing follows."""
        run = self.phases.run
        if run is Phase.LANDING:
            step = Input.SERVE if self.turn_running or turn_coming else self._next_turn()
        elif run is Phase.WOKEN:
            step = self._after_wait()
        else:
            return
        self._move(step)
        if step is Input.SERVE:
            self._served = self.turns_ended
        elif step is Input.OPEN:
            self._open()
        elif step is Input.TURNS_DONE:
            self.out.append(FINISH)

    def _next_turn(self) -> Input:
        if self.spec.max_turns is not None and self.turn >= self.spec.max_turns:
            self.budget_stop = True
            return Input.TURNS_DONE
        if not self.boundary and self.spec.keep_open:
            return self._after_wait()
        return Input.OPEN if self.boundary else Input.TURNS_DONE

    def _after_wait(self) -> Input:
        if self.boundary:
            return Input.OPEN
        return Input.TURNS_DONE if self.stdin_done else Input.WAIT

    def _wake(self) -> None:
        """A boundary command came or stdin ended: a run idle at its boundary lands them."""
        if self.phases.run is Phase.WAITING and (self.boundary or self.stdin_done):
            self._move(Input.WAKE)
            self.out.append(LAND)
        else:
            self.out.append(WAKE)

    def _open(self, prompt: str | None = None) -> None:
        """Take the boundary that opens the next turn and ask for it to be written (`BeginTurn`: the
        frame to hand the harness when a new one took effect, else None; the turn's input). `prompt`
        for the first turn."""
        before = self.calls.frame
        blocks = self._take_boundary()
        if prompt is not None:
            blocks.append(prompt)
        frame = self.calls.frame
        self._served = self.turns_ended
        self.out.append(BeginTurn(self.harness.turn_input(blocks), frame if frame is not before else None))

    def _take_boundary(self) -> list[str]:
        """Apply what waits for this boundary; return the text blocks that open the turn
        (the frame's rendering, then each inject in arrival order)."""
        boundary, self.boundary = self.boundary, Boundary()
        self._opening = boundary
        lines: list[Any] = []
        pieces: list[str] = []
        for superseded in boundary.superseded:
            self.warn(WarningCode.COMMAND_NOT_APPLIED, f"frame.set {superseded} was superseded by a later frame.set before its boundary")
        if boundary.frame is not None:
            new = boundary.frame
            boundary.previous = self.calls.frame
            if self.calls.frame is None or self.calls.frame.step != new.step:
                lines.append(StepEntered(step=new.step, frame_digest=new.digest))
            text = frames.render(new)
            lines.append(Injection(text=text, origin="frame"))
            pieces.append(text)
            self.calls.enforce(new)
        for _cid, text in boundary.injects:
            lines.append(Injection(text=text, origin="message.inject"))
            pieces.append(text)
        self._boundary_lines.extend(lines)  # written once the turn reached the child (`turn_written`)
        return pieces

    def _flush_boundary_lines(self) -> None:
        lines, self._boundary_lines = self._boundary_lines, []
        for line in lines:
            self.writer.write(line)

    # --- wind-up -----------------------------------------------------------------------------------
    def wind_up(self, termination: ProcessTermination, queued: Iterable[CommandLine] = (), *, tail: str = "",
                retained: Iterable[str] = ()) -> int:
        """Write the end of the stream; return the exit code. `queued`: commands read and not taken;
        `tail`: the child's last words on stderr; `retained`: what `--retain-dir` could not keep."""
        self._move(Input.CLOSE)
        self.calls.abandon_all(self.calls.closed or "the stream ended")
        self._undelivered(texts.ENDING)  # a turn taken and never written to the child
        if not self._session_started:
            held, self._held = self._held, []
            for event, at in held:
                self.writer.write(event, at)
        if self.ended is None:
            message = "the harness ended without a terminal record"
            if self.unreachable is not None:
                message += f"; {texts.UNREACHABLE.format(why=self.unreachable)}"
            if tail and tail.strip():
                message += f"; its stderr: {tail.strip()}"
            self.warn(WarningCode.NO_TERMINAL_RECORD, message)
        for failure in retained:
            self.warn(WarningCode.RETAIN_FAILED, failure)
        leftover = self.boundary
        for cid in [slot[0] for slot in self._answers if slot[1] is None]:  # owed by a turn never opened
            self._settle(cid, refused(CommandCode.TOO_LATE, texts.ENDING))
        leftover.injects = [(cid, text) for cid, text in leftover.injects if cid not in leftover.owed]
        for superseded in leftover.superseded:
            self.warn(WarningCode.COMMAND_NOT_APPLIED, f"frame.set {superseded} never took effect: the run wound up first")
        if leftover.frame_command is not None:
            self.warn(WarningCode.COMMAND_NOT_APPLIED, f"frame.set {leftover.frame_command} never took effect: the run wound up first")
        for cid, _text in leftover.injects:
            self.warn(WarningCode.COMMAND_NOT_APPLIED, f"message.inject {cid} never took effect: the run wound up first")
        # Lines still queued (read before this point) are answered before the marker.
        self.answer_leftovers(queued)
        if self.halt_id is not None:
            self.result(self.halt_id, Ok(applies_at=None))
        if self.policy is not None:
            self.out.append(ClosePolicy(self.policy))
        if self.model_failure is not None and (self.ended is None or self.ended.is_error):
            # One line naming the failure that ended the session (a request the harness retried to
            # an answer is a warning in the stream only).
            self._say(f"metaharness: {self.model_failure.message}")
        self.writer.close(self.close_reason(), termination if termination is not None else UnknownTermination())
        if self.ended is None:
            return 3
        return 1 if self.spec.fail_on_error and self.ended.is_error is True else 0

    def close_reason(self) -> str:
        if self.halt_id is not None:
            return "steer-halt"
        if self.budget_stop:
            return "budget"
        ended = self.ended
        if ended is None:
            return "error"
        if "budget-exhausted" in (ended.subtype, ended.stop_reason, ended.terminal_reason):
            return "budget"
        if ended.is_error is True:
            return "error"
        if ended.is_error is False or ended.subtype == "success":
            return "completed"
        return "error"
