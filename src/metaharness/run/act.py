"""What the driver does for each of the core's actions, and how it carries a control: one table each.

What belongs here: `ACTIONS` {action type → what the driver does} (`actions.py` names them),
`STEPS` {the turns' steps the core asks for → how the driver awaits each} and `CARRIERS`
{command type → how it reaches the child}, as plain functions of the driver (`loop.py`'s `Run`),
which calls `ACTIONS` from `Run.act` after every input it moved into the core, `STEPS` from its
drive and `carry` from the queue's worker. No rule of the run's lives here: when an action's
outcome matters to the core it goes back in as an input (`RunCore.heard`, `turn_written`,
`landed`, `commands.control_answered`, …).

Rules it keeps:
* a decision the harness could not take is said on stderr — but the embedder's, whose failure is
  its command's answer: kept for the `Heard` that follows, which counts it heard only when the
  harness was reachable before the write and still is after it (a write to a dead peer need not fail);
* a control (steer, permission.set, interrupt) waits until the spawn settled and is refused
  TOO_LATE once the child is out of reach; an interrupt is a phase of the core's while it is
  carried (`interrupt_begins` … `interrupt_ends`); a halt holds the worker until the child's stop
  (`StopHarness`, which the core asked for with it) returned.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from metaharness.adapters.base import ControlRefused
from metaharness.protocol.commands import Command, Halt, Interrupt, PermissionSet, Steer

from . import commands
from .actions import (ARM, Abandon, Arm, BeginTurn, Carry, ClosePolicy, Deliver, Finish, Heard, Land, Say, StopHarness,
                      Wake, Write)

if TYPE_CHECKING:
    from .loop import Run

BOUNDARY_BOUND_S = 5.0  # at a boundary, how long the commands already queued may take to land


def _deliver(run: "Run", action: Deliver) -> None:
    if action.heard and not run.harness.reachable():  # the embedder's, to a harness already gone: not handed
        run.unheard[action.call_id] = "it has exited"
        return
    try:
        run.adapter.deliver(action.call_id, action.decision, action.decided_by)
    except Exception as exc:  # a child that went away cannot run the call either
        why = str(exc) or type(exc).__name__
        if action.heard:  # the embedder's: said by the Heard that follows, as its answer
            run.unheard[action.call_id] = why
        else:
            run.say(f"metaharness: could not deliver the decision for {action.call_id}: {why}")


def _heard(run: "Run", action: Heard) -> None:
    why = run.unheard.pop(action.call_id, None)
    if why is None and not run.harness.reachable():
        why = "it exited as the decision was written"
    run.moved(run.core.heard, action.call_id, action.command_id, why)


def _arm(run: "Run", _action: Arm) -> None:
    """One timer at a time, for the core's next deadline; when it fires the core expires what is due."""
    if run.timer is None and (due := run.core.next_deadline()) is not None:
        run.timer = asyncio.get_running_loop().call_later(max(0.0, due - run.clock()), _deadline_fell, run)


def _deadline_fell(run: "Run") -> None:
    run.timer = None
    run.moved(run.core.expire, run.clock())
    _arm(run, ARM)


async def _halt(run: "Run") -> None:
    try:
        await run.adapter.halt()
    except Exception as exc:
        run.say(f"metaharness: stopping the harness failed: {exc}")


def _stop_harness(run: "Run", _action: StopHarness) -> None:
    run.stop_task = asyncio.ensure_future(_halt(run))


def _close_policy(run: "Run", action: ClosePolicy) -> None:
    if kept := action.policy.close():
        run.say(f"metaharness: the policy decision trail is in {kept}")


def _step(run: "Run", action: Any) -> None:
    run.step = action  # the drive awaits it (`STEPS`)
    run.changed.set()


# What the driver does for each action of the core's (actions.py).
ACTIONS: dict[type, Callable[["Run", Any], None]] = {
    Write: lambda run, action: run.write(action.line),
    Say: lambda run, action: run.say(action.text),
    Deliver: _deliver,
    Heard: _heard,
    Carry: lambda run, action: setattr(run.queue, "carrying", action.command),
    Abandon: lambda run, action: run.adapter.abandoning(action.cause),
    Arm: _arm,
    StopHarness: _stop_harness,
    BeginTurn: _step,
    Land: _step,
    Finish: _step,
    ClosePolicy: _close_policy,
    Wake: lambda run, action: run.changed.set(),
}


# --- the turns' steps: what the drive awaits, its outcome moved back in ---------------------------


async def _begin_turn(run: "Run", step: BeginTurn) -> None:
    """Write the turn; a write that found the child gone stops the run (`harness_unreachable`),
    never a traceback."""
    try:
        await run.adapter.begin_turn(step.text, step.frame)
    except Exception as exc:
        if not isinstance(exc, (OSError, EOFError)) and run.harness.reachable():
            raise  # not the channel: a bug, which must not pass for a dead child
        run.moved(run.core.harness_unreachable, str(exc) or type(exc).__name__)
        return
    run.moved(run.core.turn_written)


async def _land(run: "Run", _step: Land) -> None:
    """Wait until every command queued so far was taken (bounded; a stop cuts it short)."""
    queue, target = run.queue, run.queue.fed
    await run.until(lambda: queue.finished >= target or run.core.stopping, BOUNDARY_BOUND_S)
    run.moved(run.core.landed, run.adapter.turn_coming)


async def _finish(run: "Run", _step: Finish) -> None:
    await run.adapter.finish()


STEPS: dict[type, Callable[["Run", Any], Awaitable[None]]] = {BeginTurn: _begin_turn, Land: _land, Finish: _finish}


# --- carrying a command to the child -----------------------------------------------------------


async def carry(run: "Run", item: Command) -> None:
    await CARRIERS[type(item)](run, item)


async def _child_reachable(run: "Run") -> bool:
    """Wait until the spawn settled; True when a child can still be reached."""
    await run.spawn_settled()
    return run.core.spawned and not run.core.winding_up and run.harness.reachable()


async def _control(run: "Run", cid: str, answer: Awaitable[Any]) -> None:
    try:
        applies_at = await answer
    except (ControlRefused, OSError, EOFError) as exc:  # refused, or the child's channel closed under it
        run.moved(commands.control_failed, run.core, cid, exc)
        return
    run.moved(commands.control_answered, run.core, cid, applies_at)


async def _carry_control(run: "Run", item: Steer | PermissionSet) -> None:
    if await _child_reachable(run):
        await _control(run, item.id, run.adapter.control(item))
    else:
        run.moved(commands.unreachable, run.core, item.id)


async def _carry_interrupt(run: "Run", item: Interrupt) -> None:
    if not await _child_reachable(run):
        run.moved(commands.unreachable, run.core, item.id)
        return
    run.moved(run.core.interrupt_begins)
    try:
        await _control(run, item.id, run.adapter.control(item))
    finally:
        run.moved(run.core.interrupt_ends)


async def _carry_halt(run: "Run", item: Halt) -> None:
    if run.stop_task is not None:  # the stop the core asked for with the halt (none before the child exists)
        await run.stop_task


# How each command the core asks to carry (`Carry`) reaches the child.
CARRIERS: dict[type, Callable[["Run", Any], Awaitable[None]]] = {
    Steer: _carry_control,
    PermissionSet: _carry_control,
    Interrupt: _carry_interrupt,
    Halt: _carry_halt,
}
