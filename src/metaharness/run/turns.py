"""The turns' sequence and their boundaries: what opens a turn, what follows its end (sans-IO).

What belongs here: the moves of the turns' sequence (`phase.py`'s OPENING … WOKEN) and the
boundary between two turns — what waits for it (`frame.set`, `message.inject`), the turn it opens
(`open_turn`, asked of the driver as `BeginTurn`), its lines once that turn reached the child
(`turn_written`), what was claimed for a turn that never did (`undelivered`), and what follows a
turn's end once the commands queued by then landed (`landed`: serve the harness's own turn, open
the next, idle at a `--keep-open` boundary, or finish). Each function is an input or a step of
the run core (`core.py`'s `RunCore`, which binds the inputs as its own methods) and acts only
by appending actions to its outbox.

Rules it keeps:
* A turn's input is the frame's rendering (when a frame takes effect), then each inject in
  arrival order, then (first turn only) the prompt.
* A `message.inject` read while no turn runs opens the next turn at once and is answered once that
  turn was written to the child; one read while a turn runs is accepted at once.
* A turn taken and never written to the child claims nothing: no `injection` or `step.entered`
  line, its `frame.set` and accepted injects said not applied (COMMAND_NOT_APPLIED).
"""

from __future__ import annotations

from msgspec import Struct, field
from typing import TYPE_CHECKING, Any

from metaharness.protocol import frame as frames
from metaharness.protocol.events import Injection, StepEntered
from metaharness.protocol.frame import Frame
from metaharness.protocol.refusals import CommandCode, WarningCode
from metaharness.protocol.values import Ok, refused

from .actions import FINISH, LAND, WAKE, BeginTurn
from .phase import Input, Phase

if TYPE_CHECKING:
    from .core import RunCore


class Boundary(Struct):
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


def set_frame_at_boundary(core: "RunCore", cid: str, new_frame: Frame) -> None:
    frame = core.calls.frame
    same_step = frame is not None and frame.step == new_frame.step
    if core.boundary.frame_command is not None:
        core.boundary.superseded.append(core.boundary.frame_command)
    core.boundary.frame = new_frame
    core.boundary.frame_command = cid
    core.result(cid, Ok(applies_at="next turn" if same_step else "next step"))
    wake(core)


def inject_at_boundary(core: "RunCore", cid: str, text: str) -> None:
    """Read while a turn runs: accepted at once (its turn is a boundary away; an answer held
    that long would stall the calls the embedder must decide meanwhile). Read while none runs:
    its turn opens now, and it is answered once that turn reached the harness (`turn_written`,
    `harness_unreachable`), like a decision."""
    core.boundary.injects.append((cid, text))
    if core.turn_running:
        core.result(cid, Ok(applies_at="next turn"))
    else:
        core.boundary.owed.append(cid)
        core.owe(cid)
    wake(core)


def turn_written(core: "RunCore") -> None:
    """The turn `BeginTurn` asked for was written to the child: its owed answers, then its lines;
    it is served until a turn ends (one may have ended while it was written)."""
    opening, core.opening = core.opening, None
    for cid in opening.owed if opening is not None else ():
        core.settle(cid, Ok(applies_at="next turn"))
    if core.started:
        flush_lines(core)
    if core.move(Input.TURN_WRITTEN) is Phase.SERVING and core.turns_ended > core.served:
        land(core, Input.TURN_SERVED)


def undelivered(core: "RunCore", why: str) -> None:
    """The turn `open_turn` took never reached the child: its `injection` lines go unwritten,
    its owed answers are refused TOO_LATE with `why`, its accepted injects said not applied —
    and so is its `frame.set` (no `step.entered` claims it; the frame before it stays in force)."""
    boundary, core.opening = core.opening, None
    core.boundary_lines = [line for line in core.boundary_lines if type(line) is not Injection]
    if boundary is None:
        return
    if boundary.frame_command is not None:
        core.boundary_lines = [line for line in core.boundary_lines if type(line) is not StepEntered]
        core.calls.enforce(boundary.previous)
        core.warn(WarningCode.COMMAND_NOT_APPLIED, f"frame.set {boundary.frame_command} never took effect: {why}")
    for cid in boundary.owed:
        core.settle(cid, refused(CommandCode.TOO_LATE, why))
    for cid, _text in boundary.injects:
        if cid not in boundary.owed:
            core.warn(WarningCode.COMMAND_NOT_APPLIED, f"message.inject {cid} never took effect: {why}")
    boundary.injects.clear()


def landed(core: "RunCore", turn_coming: bool) -> None:
    """The commands queued at a boundary landed (`Land`); `turn_coming`: the harness says it will
    start a turn by itself. What follows the end of a turn: serve the harness's own turn to its
    end, open the next turn (a boundary waits), idle (`--keep-open`, nothing at the boundary,
    stdin open), or finish (no more turns; `--max-turns` spent sets the budget close reason).
    Woken at an idle boundary: open, idle again, or finish. Winding up: nothing follows."""
    run = core.phases.run
    if run is Phase.LANDING:
        step = Input.SERVE if core.turn_running or turn_coming else _next_turn(core)
    elif run is Phase.WOKEN:
        step = _after_wait(core)
    else:
        return
    core.move(step)
    if step is Input.SERVE:
        core.served = core.turns_ended
    elif step is Input.OPEN:
        open_turn(core)
    elif step is Input.TURNS_DONE:
        core.out.append(FINISH)


def _next_turn(core: "RunCore") -> Input:
    if core.spec.max_turns is not None and core.turn >= core.spec.max_turns:
        core.budget_stop = True
        return Input.TURNS_DONE
    if not core.boundary and core.spec.keep_open:
        return _after_wait(core)
    return Input.OPEN if core.boundary else Input.TURNS_DONE


def _after_wait(core: "RunCore") -> Input:
    if core.boundary:
        return Input.OPEN
    return Input.TURNS_DONE if core.stdin_done else Input.WAIT


def wake(core: "RunCore") -> None:
    """A boundary command came or stdin ended: a run idle at its boundary lands them."""
    if core.phases.run is Phase.WAITING and (core.boundary or core.stdin_done):
        land(core, Input.WAKE)
    else:
        core.out.append(WAKE)


def land(core: "RunCore", given: Input) -> None:
    """A boundary: the commands queued by now land (`Land`), then `landed` says what follows."""
    core.move(given)
    core.out.append(LAND)


def open_turn(core: "RunCore", prompt: str | None = None) -> None:
    """Take the boundary that opens the next turn and ask for it to be written (`BeginTurn`: the
    frame to hand the harness when a new one took effect, else None; the turn's input). `prompt`
    for the first turn."""
    before = core.calls.frame
    blocks = _take_boundary(core)
    if prompt is not None:
        blocks.append(prompt)
    frame = core.calls.frame
    core.served = core.turns_ended
    core.out.append(BeginTurn(core.harness.turn_input(blocks), frame if frame is not before else None))


def _take_boundary(core: "RunCore") -> list[str]:
    """Apply what waits for this boundary; return the text blocks that open the turn
    (the frame's rendering, then each inject in arrival order)."""
    boundary, core.boundary = core.boundary, Boundary()
    core.opening = boundary
    lines: list[Any] = []
    pieces: list[str] = []
    for superseded in boundary.superseded:
        core.warn(WarningCode.COMMAND_NOT_APPLIED, f"frame.set {superseded} was superseded by a later frame.set before its boundary")
    if boundary.frame is not None:
        new = boundary.frame
        boundary.previous = core.calls.frame
        if core.calls.frame is None or core.calls.frame.step != new.step:
            lines.append(StepEntered(step=new.step, frame_digest=new.digest))
        text = frames.render(new)
        lines.append(Injection(text=text, origin="frame"))
        pieces.append(text)
        core.calls.enforce(new)
    for _cid, text in boundary.injects:
        lines.append(Injection(text=text, origin="message.inject"))
        pieces.append(text)
    core.boundary_lines.extend(lines)  # written once the turn reached the child (`turn_written`)
    return pieces


def flush_lines(core: "RunCore") -> None:
    lines, core.boundary_lines = core.boundary_lines, []
    for line in lines:
        core.writer.write(line)
