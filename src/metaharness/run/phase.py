"""The run's phases: every transition of a run — its turns' sequence included — in one table (sans-IO).

What belongs here: the phases a run goes through, the inputs that move it, and the table that
says where each input leads from each phase. One enum and one table, as h11's `_state.py`; the
table has two columns, as h11's has a client's and a server's: the run's (checking → spawning →
the turns' sequence → ending or stopping → closed) and its turn's as the harness reports it
(idle, running, an interrupt in flight), since an interrupt can come in any step of the sequence.
The turns' sequence is the run's own, not the driver's: a turn is written to the child
(OPENING), served until its end (SERVING), the commands queued by then land (LANDING), and the
core then serves a turn the harness starts by itself, opens the next one, idles at a
`--keep-open` boundary until a command or stdin's end wakes it (WAITING, WOKEN), or finishes.
An input the table does not list for the phase its column is in is a bug of the caller, raised
as `PhaseError`, never guessed at.

What a phase means to the rest of the run is read off it here once (`winding_up`, `stopping`,
`turn_running`); the core (`core.py`) moves the machines and emits the actions each move asks
(`BeginTurn`, `Land`, `Finish`, `StopHarness`); the driver (`loop.py`) keeps no state of its own.
"""

from __future__ import annotations

import enum


class Phase(enum.Enum):
    # the run
    CHECKING = "checking"  # the start checks run; nothing is spawned
    SPAWNING = "spawning"  # the adapter's start() runs
    OPENING = "opening"  # a child exists; a turn is being written to it (`BeginTurn`)
    SERVING = "serving"  # a turn was written: served until a turn ends
    LANDING = "landing"  # a turn ended: the commands queued by then land (`Land`)
    WAITING = "waiting"  # --keep-open: idle at the boundary until a command or stdin's end
    WOKEN = "woken"  # ... woken: the commands queued by then land (`Land`)
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
    SPAWNED = "spawned"  # start() returned: a child exists, the first turn opens
    NOT_SPAWNED = "not spawned"  # start() failed, or was never called (a stop came first)
    TURN_WRITTEN = "turn written"  # begin_turn() returned: the turn reached the child
    TURN_SERVED = "turn served"  # a turn.ended was written while the run served one
    SERVE = "serve"  # landed: the harness runs (or will run) a turn of its own
    OPEN = "open"  # landed: a boundary waits, the next turn opens
    WAIT = "wait"  # landed: --keep-open with nothing at the boundary and stdin open
    WAKE = "wake"  # a command came to the idle boundary, or stdin ended
    TURNS_DONE = "turns done"  # landed: no further turn (the harness is told to finish)
    STOP = "stop"  # halt, SIGINT/SIGTERM, the spend cap, a write the child cannot take
    OUTPUT_ENDED = "output ended"  # the child's output ended
    CLOSE = "close"  # stream.closed is written (wind-up, or a refused start)
    # the turn's
    TURN_STARTED = "turn started"
    TURN_ENDED = "turn ended"
    INTERRUPT = "interrupt"  # an interrupt is carried to the child
    INTERRUPT_ANSWERED = "interrupt answered"  # ... and its answer came back (or its failure)


P, I = Phase, Input
SEQUENCE = (P.OPENING, P.SERVING, P.LANDING, P.WAITING, P.WOKEN)  # the turns' steps: a child exists
_ANY_RUN_PHASE_BUT_CLOSED = (P.CHECKING, P.SPAWNING, *SEQUENCE, P.ENDING, P.STOPPING)

# (phase, input) → the next phase. A stop holds through everything after it but the close,
# so every wait of the run ends once one was asked; an interrupt's answer comes before the
# `turn.ended` it causes, so a turn that ends under an interrupt waits for it (ENDED_IN_INTERRUPT).
TRANSITIONS: dict[tuple[Phase, Input], Phase] = {
    (P.CHECKING, I.SPAWN): P.SPAWNING,
    (P.CHECKING, I.STOP): P.STOPPING,
    (P.SPAWNING, I.SPAWNED): P.OPENING,
    (P.SPAWNING, I.NOT_SPAWNED): P.ENDING,
    (P.SPAWNING, I.STOP): P.STOPPING,
    # the turns' sequence
    (P.OPENING, I.TURN_WRITTEN): P.SERVING,
    (P.SERVING, I.TURN_SERVED): P.LANDING,
    (P.LANDING, I.SERVE): P.SERVING,
    (P.LANDING, I.OPEN): P.OPENING,
    (P.LANDING, I.WAIT): P.WAITING,
    (P.LANDING, I.TURNS_DONE): P.ENDING,
    (P.WAITING, I.WAKE): P.WOKEN,
    (P.WOKEN, I.OPEN): P.OPENING,
    (P.WOKEN, I.WAIT): P.WAITING,
    (P.WOKEN, I.TURNS_DONE): P.ENDING,
    **{(phase, I.STOP): P.STOPPING for phase in SEQUENCE},
    **{(phase, I.OUTPUT_ENDED): P.ENDING for phase in SEQUENCE},
    # the end
    (P.ENDING, I.STOP): P.STOPPING,
    (P.ENDING, I.OUTPUT_ENDED): P.ENDING,
    (P.ENDING, I.TURN_WRITTEN): P.ENDING,  # a turn's write that returned after the output ended
    (P.STOPPING, I.SPAWNED): P.STOPPING,
    (P.STOPPING, I.NOT_SPAWNED): P.STOPPING,
    (P.STOPPING, I.STOP): P.STOPPING,
    (P.STOPPING, I.OUTPUT_ENDED): P.STOPPING,
    (P.STOPPING, I.TURN_WRITTEN): P.STOPPING,  # ... after a stop
    (P.CLOSED, I.STOP): P.CLOSED,  # a signal after the end
    (P.CLOSED, I.OUTPUT_ENDED): P.CLOSED,
    **{(phase, I.CLOSE): P.CLOSED for phase in _ANY_RUN_PHASE_BUT_CLOSED},
    # the turn, as the harness reports it
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
    """An input the table does not list for the phase its column is in."""


class Phases:
    """The run's phase and its turn's. `move` is the only way either changes."""

    def __init__(self) -> None:
        self.run = Phase.CHECKING
        self.turn = Phase.IDLE
        # Read once for every command a flood brings, so kept as a plain value (an Enum's hash is Python).
        self.winding_up = False  # from here on a command is too late: no further turn will take it

    def move(self, given: Input) -> Phase:
        """Apply one input to its column; return the phase it led to."""
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
