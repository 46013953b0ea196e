"""The end of a run's stream: the wind-up, a refused start, the close reason (sans-IO).

What belongs here: what is written once the run is over — pending calls abandoned, a missing
terminal record said, boundary commands that never took effect said, every command still
unanswered answered, the halt's result, the policy trail closed (`ClosePolicy`), then exactly one
`stream.closed` with the close reason and the exit code — and the same end for a start refused
before anything was spawned. Functions of the run core (`core.py`'s `RunCore` binds them as its
own methods), which act only by appending actions to its outbox.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from metaharness.protocol.decode import CommandLine
from metaharness.protocol.refusals import CommandCode, WarningCode
from metaharness.protocol.values import Ok, ProcessTermination, UnknownTermination, refused

from . import decide as texts
from . import turns
from .actions import ClosePolicy
from .phase import Input
from .start import RunRefused

if TYPE_CHECKING:
    from .core import RunCore


def refuse_start(core: "RunCore", refusal: RunRefused, queued: Iterable[CommandLine] = ()) -> int:
    core.refusal = refusal  # the library API raises it (metaharness.api.RunRefused)
    core.say(f"metaharness: {refusal.sentence}")
    core.move(Input.CLOSE)
    for command_id, code, reason in refusal.results:
        core.result(command_id, refused(code, reason))
    core.answer_leftovers(queued)  # every line read before stream.closed is answered
    core.writer.close("error", UnknownTermination())
    return 2


def wind_up(core: "RunCore", termination: ProcessTermination, queued: Iterable[CommandLine] = (), *, tail: str = "",
            retained: Iterable[str] = ()) -> int:
    """Write the end of the stream; return the exit code. `queued`: commands read and not taken;
    `tail`: the child's last words on stderr; `retained`: what `--retain-dir` could not keep."""
    core.move(Input.CLOSE)
    core.calls.abandon_all(core.calls.closed or "the stream ended")
    turns.undelivered(core, texts.ENDING)  # a turn taken and never written to the child
    if not core.started:
        held, core.held = core.held, []
        for event, at in held:
            core.writer.write(event, at)
    if core.ended is None:
        message = "the harness ended without a terminal record"
        if core.unreachable is not None:
            message += f"; {texts.UNREACHABLE.format(why=core.unreachable)}"
        if tail and tail.strip():
            message += f"; its stderr: {tail.strip()}"
        core.warn(WarningCode.NO_TERMINAL_RECORD, message)
    for failure in retained:
        core.warn(WarningCode.RETAIN_FAILED, failure)
    leftover = core.boundary
    for cid in [slot[0] for slot in core.answers if slot[1] is None]:  # owed by a turn never opened
        core.settle(cid, refused(CommandCode.TOO_LATE, texts.ENDING))
    leftover.injects = [(cid, text) for cid, text in leftover.injects if cid not in leftover.owed]
    for superseded in leftover.superseded:
        core.warn(WarningCode.COMMAND_NOT_APPLIED, f"frame.set {superseded} never took effect: the run wound up first")
    if leftover.frame_command is not None:
        core.warn(WarningCode.COMMAND_NOT_APPLIED, f"frame.set {leftover.frame_command} never took effect: the run wound up first")
    for cid, _text in leftover.injects:
        core.warn(WarningCode.COMMAND_NOT_APPLIED, f"message.inject {cid} never took effect: the run wound up first")
    # Lines still queued (read before this point) are answered before the marker.
    core.answer_leftovers(queued)
    if core.halt_id is not None:
        core.result(core.halt_id, Ok(applies_at=None))
    if core.policy is not None:
        core.out.append(ClosePolicy(core.policy))
    if core.model_failure is not None and (core.ended is None or core.ended.is_error):
        # One line naming the failure that ended the session (a request the harness retried to
        # an answer is a warning in the stream only).
        core.say(f"metaharness: {core.model_failure.message}")
    core.writer.close(core.close_reason(), termination if termination is not None else UnknownTermination())
    if core.ended is None:
        return 3
    return 1 if core.spec.fail_on_error and core.ended.is_error is True else 0


def close_reason(core: "RunCore") -> str:
    if core.halt_id is not None:
        return "steer-halt"
    if core.budget_stop:
        return "budget"
    ended = core.ended
    if ended is None:
        return "error"
    if "budget-exhausted" in (ended.subtype, ended.stop_reason, ended.terminal_reason):
        return "budget"
    if ended.is_error is True:
        return "error"
    if ended.is_error is False or ended.subtype == "success":
        return "completed"
    return "error"
