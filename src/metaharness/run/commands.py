"""The command pipeline: one `command.result` for every command (docs/reference/wire.md).

What belongs here: the steps every command goes through, in order, and the table
{command type → run-configuration check, handler} that fills in the two steps that
differ per command. Pure: a handler changes the core's state and answers, or — for the
four commands that must reach the child (steer, permission.set, interrupt, halt) — asks for
it to be carried (a `Carry` action), and the driver (`act.py`'s `CARRIERS`) carries it: waits for the
spawn, calls the adapter, answers with `control_answered` / `control_failed` / `unreachable`
below.

The steps (the first that refuses answers the command):
1. a line that did not decode is answered MALFORMED under the id it could read;
2. the reserved id `-` is refused MALFORMED (the decoder's own rule and reason, for
   commands that come typed from the library);
3. well-formedness — `protocol.decode.well_formedness`, the wire rule, in one place;
4. capability — the adapter's descriptor (`Harness.command_refusal`);
5. run configuration — the command's own check in PIPELINE;
6. execute — never once the run winds up (`late_refusal`), else the command's handler.

Rules it keeps: a decision cannot be replayed, and a command read once the run winds
up is TOO_LATE — both worded once, in `late_refusal`.
"""

from __future__ import annotations

from msgspec import Struct
from typing import TYPE_CHECKING, Any, Callable

from metaharness.adapters.base import ControlRefused
from metaharness.protocol.commands import (
    FrameSet,
    Halt,
    Interrupt,
    MessageInject,
    PermissionSet,
    Steer,
    ToolDecide,
)
from metaharness.protocol.decode import RESERVED_ID, RESERVED_ID_REASON, CommandLine, CommandRefusal, well_formedness
from metaharness.protocol.frame import Frame
from metaharness.protocol.refusals import CommandCode, Sentence
from metaharness.protocol.values import Ok, Replace, refused

from . import decide as texts
from .actions import Carry

if TYPE_CHECKING:
    from .core import RunCore

Refusal = tuple[str, str]  # (code, reason)


class Route(Struct, frozen=True):
    name: str
    # step 5: a refusal the run's configuration gives this command, or None
    check: Callable[["RunCore", Any], Refusal | None] | None
    # step 6: the command's effect (a `Carry` action for one the child must hear)
    handle: Callable[["RunCore", Any, Frame | None], None]


def take(core: "RunCore", item: CommandLine) -> None:
    """Steps 1–6 for one command."""
    kind = type(item)
    if kind is CommandRefusal:
        core.result(item.id, refused(item.code, item.reason))
        return
    route = PIPELINE.get(kind)
    if route is None:  # not a command: the worker's last guard answers what carries an id
        return
    cid = item.id
    if cid == RESERVED_ID:
        core.result(RESERVED_ID, refused(CommandCode.MALFORMED, RESERVED_ID_REASON))
        return
    frame, malformed = well_formedness(item)
    if malformed is not None:
        core.result(cid, refused(CommandCode.MALFORMED, malformed))
        return
    if (code := core.harness.command_refusal(route.name)) is not None:
        core.result(cid, refused(code, f"the {core.harness.kind} adapter refuses {route.name}"))
        return
    if route.check is not None and (refusal := route.check(core, item)) is not None:
        core.result(cid, refused(*refusal))
        return
    if core.phases.winding_up:
        core.result(cid, refused(*late_refusal(core, item)))
        return
    route.handle(core, item, frame)


def late_refusal(core: "RunCore", item: CommandLine) -> Refusal:
    """The answer to a command read once the run winds up (or left in the queue at its end)."""
    if type(item) is CommandRefusal:
        return item.code, item.reason
    if type(item) is ToolDecide and core.calls.was_presented(item.call_id):
        return CommandCode.TOO_LATE, texts.REPLAYED.format(call_id=item.call_id)
    return CommandCode.TOO_LATE, texts.ENDING


# --- step 5: run configuration ------------------------------------------------------------


def _check_decide(core: "RunCore", item: ToolDecide) -> Refusal | None:
    if type(item.decision) is not Replace:
        return None
    if core.spec.deny_only:
        return CommandCode.UNSUPPORTED_CONTROL, "this run is deny-only and replace would grant; answer deny or abstain"
    why = core.calls.replace_refusal(item.call_id, item.decision.input)
    return (CommandCode.UNSUPPORTED_CONTROL, why) if why is not None else None


def _check_frame(core: "RunCore", item: FrameSet) -> Refusal | None:
    if core.spec.decisions == "observe":
        return CommandCode.UNSUPPORTED_CONTROL, "frame.set cannot be honoured in an observe run: observe enforces nothing"
    return None


def _check_posture(core: "RunCore", item: PermissionSet) -> Refusal | None:
    if not core.harness.accepts_posture(item.posture):
        return CommandCode.UNSUPPORTED_CONTROL, f"the {core.harness.kind} adapter does not accept the posture {item.posture!r}"
    return None


# --- step 6: the handlers ---------------------------------------------------------------------


def _decide(core: "RunCore", item: ToolDecide, _frame: Frame | None) -> None:
    refusal = core.calls.decide(item.call_id, item.decision)
    if refusal is None:  # delivered: answered once the driver says whether the harness heard it
        core.hear(item.id, item.call_id)
    else:
        core.result(item.id, refused(*refusal))


def _frame_set(core: "RunCore", item: FrameSet, frame: Frame | None) -> None:
    core.set_frame_at_boundary(item.id, frame)


def _inject(core: "RunCore", item: MessageInject, _frame: Frame | None) -> None:
    core.inject_at_boundary(item.id, item.text)


def _steer(core: "RunCore", item: Steer, _frame: Frame | None) -> None:
    if not core.turn_running:
        core.result(item.id, refused(CommandCode.TOO_LATE, Sentence.NOTHING_TO_STEER))
        return
    core.out.append(Carry(item))


def _posture(core: "RunCore", item: PermissionSet, _frame: Frame | None) -> None:
    core.out.append(Carry(item))  # before the child exists the posture is held until it does (delivered, then ok)


def _interrupt(core: "RunCore", item: Interrupt, _frame: Frame | None) -> None:
    if (core.read_before_spawn or not core.spawn_settled) and not core.winding_up:
        # Read before the child existed (even if taken later, behind a held permission.set):
        # no turn could be running then, so there is nothing to stop (still ok). Carried
        # later it would stop a turn begun after it.
        core.result(item.id, Ok(applies_at=None))
        return
    core.out.append(Carry(item))


def _halt(core: "RunCore", item: Halt, _frame: Frame | None) -> None:
    core.halt_taken(item.id)
    core.out.append(Carry(item))  # the driver stops the child; the halt is answered at wind-up, before stream.closed


PIPELINE: dict[type, Route] = {
    ToolDecide: Route("tool.decide", _check_decide, _decide),
    FrameSet: Route("frame.set", _check_frame, _frame_set),
    MessageInject: Route("message.inject", None, _inject),
    Steer: Route("steer", None, _steer),
    PermissionSet: Route("permission.set", _check_posture, _posture),
    Interrupt: Route("interrupt", None, _interrupt),
    Halt: Route("halt", None, _halt),
}


# --- answers for what the driver carried ----------------------------------------------------


def control_answered(core: "RunCore", cid: str, applies_at: Any) -> None:
    core.result(cid, Ok(applies_at=applies_at if isinstance(applies_at, str) else None))


def control_failed(core: "RunCore", cid: str, exc: Exception) -> None:
    """The adapter refused the control (ControlRefused), or the child's channel closed under it."""
    if isinstance(exc, ControlRefused):
        core.result(cid, refused(exc.code, exc.reason))
    else:
        core.result(cid, refused(CommandCode.TOO_LATE, texts.UNREACHABLE.format(why=exc or type(exc).__name__)))


def unreachable(core: "RunCore", cid: str) -> None:
    why = texts.ENDING if core.winding_up or not core.spawned else \
        "the harness has exited, so nothing can reach it"
    core.result(cid, refused(CommandCode.TOO_LATE, why))


def unanswered(core: "RunCore", item: CommandLine, reason: str) -> None:
    """The last guard of command processing: a command whose processing wrote no result gets one.
    A halt is answered at wind-up, right before `stream.closed`."""
    if core.inflight_answered or core.writer.closed or type(item) is Halt:
        return
    if type(item) is CommandRefusal or not isinstance(getattr(item, "id", None), str):
        return
    core.result(item.id, refused(CommandCode.TOO_LATE if core.winding_up else CommandCode.UNSUPPORTED_CONTROL, reason))
