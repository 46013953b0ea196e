"""What the run core asks of the world, as values: the core's only way to act.

What belongs here: one small frozen type per kind of action, and nothing that performs one. The
core (`core.py`, and `calls.py`, `commands.py` under it) appends them to its outbox in the order
their effects must happen; whoever drives it (`loop.py`'s `Run`; a test's `CoreRun`) takes them
(`RunCore.actions`) after every input it moved into the core and does each, in order, through one
table (`act.py`'s `ACTIONS`). So the core never writes a line, never calls the adapter and holds
no callback of its driver: h11's shape, where the protocol object says what to send and the caller
sends it.

Rules kept:
* the outbox's order is the order of the effects: a decision's `Deliver` comes before its
  `tool.decided` line's `Write` (the harness hears an answer before anyone reads that it was
  given), an `Abandon` before the abandonment denies it announces;
* an action whose outcome the core needs comes back as an input: after the embedder's decision
  was handed to every presentation of its call, `Heard` asks the driver whether the harness heard
  it, and the driver answers `RunCore.heard(call_id, command_id, why)`;
* an action done may bring inputs of its own (the adapter reports while it takes a decision): the
  driver does their actions first, before the rest of the batch, as direct calls would have.
"""

from __future__ import annotations

from typing import Any, Union

# msgspec's Struct, not a dataclass: a dataclass is made at import by generated code (about a
# millisecond each, at every start), and a Struct's init is also the cheaper, once per flood line.
from msgspec import Struct

from metaharness.adapters.base import TurnInput
from metaharness.protocol.frame import Frame
from metaharness.protocol.values import Decision


class Write(Struct, frozen=True):
    """One encoded event line for stdout (numbered by the core's `EventWriter`)."""

    line: bytes


class Say(Struct, frozen=True):
    """One line for the operator, on stderr."""

    text: str


class Deliver(Struct, frozen=True):
    """Hand `decision` to the harness for one presentation of `call_id` (`Adapter.deliver`), the
    decider's value unchanged. `heard`: the embedder's answer, whose failure the driver keeps for
    the `Heard` that follows instead of saying it."""

    call_id: str
    decision: Decision
    decided_by: str
    heard: bool = False


class Heard(Struct, frozen=True):
    """After the embedder's decision was delivered: tell the core whether the harness heard it
    (`RunCore.heard`), so the command is answered ok or TOO_LATE."""

    call_id: str
    command_id: str


class Carry(Struct, frozen=True):
    """A command that must reach the child (steer, permission.set, interrupt, halt): the driver
    carries it, and the queue's worker takes no further command until it was carried."""

    command: Any


class Abandon(Struct, frozen=True):
    """The calls waiting are about to be abandoned for an "interrupt" or a "stop"
    (`Adapter.abandoning`): their denies are the next deliveries."""

    cause: str


class Arm(Struct, frozen=True):
    """A call began to wait: arm the one timer for the core's next deadline (`next_deadline`)."""


class StopHarness(Struct, frozen=True):
    """Stop the child (`Adapter.halt`): a halt, a signal, the spend cap, a child out of reach —
    asked once the child exists (a stop before it is asked again when the spawn settles)."""


class BeginTurn(Struct, frozen=True):
    """Write a turn to the child (`Adapter.begin_turn(text, frame)`); the driver answers
    `RunCore.turn_written`, or `RunCore.harness_unreachable` when the write found the child gone."""

    text: TurnInput
    frame: Frame | None


class Land(Struct, frozen=True):
    """A boundary: wait (bounded) until every command queued so far was taken, then answer
    `RunCore.landed(turn_coming)` with the adapter's live fact."""


class Finish(Struct, frozen=True):
    """No further turn: tell the harness to finish (`Adapter.finish`)."""


class ClosePolicy(Struct, frozen=True):
    """Wind-up: close the policy decision trail (`PolicyDecider.close`) and say where it is kept."""

    policy: Any


class Wake(Struct, frozen=True):
    """A phase moved, a turn ended, a boundary command came, stdin ended: a wait may be over."""


Action = Union[Write, Say, Deliver, Heard, Carry, Abandon, Arm, StopHarness, BeginTurn, Land, Finish, ClosePolicy, Wake]
ARM, STOP_HARNESS, LAND, FINISH, WAKE = Arm(), StopHarness(), Land(), Finish(), Wake()
