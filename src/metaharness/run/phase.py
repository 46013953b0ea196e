"""The run's phases: every transition of a run, and of its turn, in one table (sans-IO).

What belongs here: the phases a run goes through, the inputs that move it, and the table that
says where each input leads from each phase. Two machines share the table, as a client's and a
server's do in h11: the run's (checking → spawning → live → ending or stopping → closed) and
its turn's (idle, running, an interrupt in flight). An input the table does not list for the
phase a machine is in is a bug of the caller, raised as `PhaseError`, never guessed at.

What a phase means to the rest of the run is read off it here once (`winding_up`, `stopping`,
`turn_running`); the core (`core.py`) moves the machines and does what each move
asks, the driver (`loop.py`) waits for a phase instead of keeping flags of its own.
"""

from __future__ import annotations

import enum


class Phase(enum.Enum):
    # the run
    CHECKING = "checking"  # the start checks run; nothing is spawned
    SPAWNING = "spawning"  # the adapter's start() runs
    LIVE = "live"  # a child exists; turns are opened and served
    ENDING = "ending"  # no more turns (turns done, the child's output ended, nothing spawned)
    STOPPING = "stopping"  # a stop was asked (halt, signal, spend cap, a child out of reach)
    CLOSED = "closed"  # stream.closed is written
    # the turn
    IDLE = "idle"  # no turn runs
    RUNNING = "running"  # a turn runs
    INTERRUPTING = "interrupting"  # a turn runs and an interrupt is in flight
    INTERRUPTING_IDLE = "interrupting idle"  # an interrupt is in flight and no turn runs
    ENDED_IN_INTERRUPT = "ended in interrupt"  # the turn ended before the interrupt's answer: its line waits


class Input(enum.Enum):
    # the run's
    SPAWN = "spawn"  # the start checks passed and the adapter's start() begins
    SPAWNED = "spawned"  # start() returned: a child exists
    NOT_SPAWNED = "not spawned"  # start() failed, or was never called (a stop came first)
    STOP = "stop"  # halt, SIGINT/SIGTERM, the spend cap, a write the child cannot take
    TURNS_DONE = "turns done"  # the driver opens no further turn
    OUTPUT_ENDED = "output ended"  # the child's output ended
    CLOSE = "close"  # stream.closed is written (wind-up, or a refused start)
    # the turn's
    TURN_STARTED = "turn started"
    TURN_ENDED = "turn ended"
    INTERRUPT = "interrupt"  # an interrupt is carried to the child
    INTERRUPT_ANSWERED = "interrupt answered"  # ... and its answer came back (or its failure)


P, I = Phase, Input
_ANY_RUN_PHASE_BUT_CLOSED = (P.CHECKING, P.SPAWNING, P.LIVE, P.ENDING, P.STOPPING)

# (phase, input) → the next phase. A stop holds through everything after it but the close,
# so every wait of the run ends once one was asked; an interrupt's answer comes before the
# `turn.ended` it causes, so a turn that ends under an interrupt waits for it (ENDED_IN_INTERRUPT).
TRANSITIONS: dict[tuple[Phase, Input], Phase] = {
    (P.CHECKING, I.SPAWN): P.SPAWNING,
    (P.CHECKING, I.STOP): P.STOPPING,
    (P.SPAWNING, I.SPAWNED): P.LIVE,
    (P.SPAWNING, I.NOT_SPAWNED): P.ENDING,
    (P.SPAWNING, I.STOP): P.STOPPING,
    (P.LIVE, I.STOP): P.STOPPING,
    (P.LIVE, I.TURNS_DONE): P.ENDING,
    (P.LIVE, I.OUTPUT_ENDED): P.ENDING,
    (P.ENDING, I.STOP): P.STOPPING,
    (P.ENDING, I.TURNS_DONE): P.ENDING,
    (P.ENDING, I.OUTPUT_ENDED): P.ENDING,
    (P.STOPPING, I.SPAWNED): P.STOPPING,
    (P.STOPPING, I.NOT_SPAWNED): P.STOPPING,
    (P.STOPPING, I.STOP): P.STOPPING,
    (P.STOPPING, I.TURNS_DONE): P.STOPPING,
    (P.STOPPING, I.OUTPUT_ENDED): P.STOPPING,
    (P.CLOSED, I.STOP): P.CLOSED,  # a signal after the end
    (P.CLOSED, I.OUTPUT_ENDED): P.CLOSED,
    **{(phase, I.CLOSE): P.CLOSED for phase in _ANY_RUN_PHASE_BUT_CLOSED},
    (P.IDLE, I.TURN_STARTED): P.RUNNING,
    (P.IDLE, I.TURN_ENDED): P.IDLE,  # an end the harness reports with no start
    (P.IDLE, I.INTERRUPT): P.INTERRUPTING_IDLE,
    (P.RUNNING, I.TURN_STARTED): P.RUNNING,
    (P.RUNNING, I.TURN_ENDED): P.IDLE,
    (P.RUNNING, I.INTERRUPT): P.INTERRUPTING,
    (P.INTERRUPTING, I.TURN_STARTED): P.INTERRUPTING,
    (P.INTERRUPTING, I.TURN_ENDED): P.ENDED_IN_INTERRUPT,
    (P.INTERRUPTING, I.INTERRUPT_ANSWERED): P.RUNNING,
    (P.INTERRUPTING_IDLE, I.TURN_STARTED): P.INTERRUPTING,
    (P.INTERRUPTING_IDLE, I.TURN_ENDED): P.ENDED_IN_INTERRUPT,
    (P.INTERRUPTING_IDLE, I.INTERRUPT_ANSWERED): P.IDLE,
    (P.ENDED_IN_INTERRUPT, I.TURN_STARTED): P.ENDED_IN_INTERRUPT,
    (P.ENDED_IN_INTERRUPT, I.TURN_ENDED): P.ENDED_IN_INTERRUPT,  # the later end is the one written
    (P.ENDED_IN_INTERRUPT, I.INTERRUPT_ANSWERED): P.IDLE,
}

TURN_INPUTS = frozenset({I.TURN_STARTED, I.TURN_ENDED, I.INTERRUPT, I.INTERRUPT_ANSWERED})
_WINDING_UP = frozenset({P.ENDING, P.STOPPING, P.CLOSED})
_TURN_RUNNING = frozenset({P.RUNNING, P.INTERRUPTING})


class PhaseError(RuntimeError):
    """An input the table does not list for the phase its machine is in."""


class Phases:
    """The two machines of one run. `move` is the only way a phase changes."""

    def __init__(self) -> None:
        self.run = Phase.CHECKING
        self.turn = Phase.IDLE
        # Read once for every command a flood brings, so kept as a plain value (an Enum's hash is Python).
        self.winding_up = False  # from here on a command is too late: no further turn will take it

    def move(self, given: Input) -> Phase:
        """Apply one input to its machine; return the phase it led to."""
        turn = given in TURN_INPUTS
        now = self.turn if turn else self.run
        after = TRANSITIONS.get((now, given))
        if after is None:
            raise PhaseError(f"{given.value!r} cannot happen while the {'turn' if turn else 'run'} is {now.value!r}")
        if turn:
            self.turn = after
        else:
            self.run = after
            self.winding_up = after in _WINDING_UP
        return after

    @property
    def stopping(self) -> bool:
        """A stop was asked: every wait of the run is over."""
        return self.run is Phase.STOPPING

    @property
    def turn_running(self) -> bool:
        return self.turn in _TURN_RUNNING
