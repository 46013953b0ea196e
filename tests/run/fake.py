"""A fake harness for testing a run without a child process.

Each turn is a list of calls; a call waits for its decision, then "runs" (a
tool.result) unless denied. Turns can hold open until interrupted. `drive` runs it
under the asyncio driver (`Run`); `CoreRun` drives the run core by plain calls, with
no event loop and a fake clock.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from metaharness.adapters.base import Adapter, ControlRefused, PresentedCall
from metaharness.adapters.oharness import OHarnessAdapter
from metaharness.protocol.commands import Interrupt, PermissionSet, Steer
from metaharness.protocol.descriptor import CapabilityDescriptor
from metaharness.protocol.events import Injection, SessionEnded, SessionStarted, Text, ToolResult
from metaharness.protocol.values import DecisionCensus, Deny, Exited, HermeticAttestation, TranscriptRef
from metaharness.run.loop import Run
from metaharness.run.spec import RunSpec


@dataclass
class Call:
    name: str
    input: Any
    call_id: str | None = None
    seam: str = "owned_tool"


@dataclass
class Turn:
    calls: list[Call] = field(default_factory=list)
    hold: bool = False  # stay open until interrupted or halted
    text: str | None = None


class FakeChild:
    """The child's side of a fake harness with no process: its end (`wait`) comes once `done` is
    set; it is always reachable, says nothing on stderr and keeps nothing."""

    def __init__(self, done: asyncio.Event) -> None:
        self.done = done

    async def wait(self):
        await self.done.wait()
        return Exited(code=0)

    def alive(self) -> bool:
        return True

    def stderr_tail(self) -> str:
        return ""

    def retain(self, _directory: str) -> list[str]:
        return []

    def cleanup(self) -> None: ...


class FakeAdapter(Adapter):
    kind = "oharness"
    postures = ("manual", "plan")
    tools = OHarnessAdapter.tools

    def __init__(self, spec, turns: list[Turn], *, descriptor: CapabilityDescriptor | None = None,
                 end_session: bool = True, crash_after_turn: int | None = None) -> None:
        super().__init__(spec)
        self.turns = list(turns)
        self._descriptor = descriptor
        self.end_session = end_session
        self.crash_after_turn = crash_after_turn
        self.delivered: list[tuple[str, Any, str]] = []
        self.ran: list[str] = []
        self.texts: list[str] = []
        self.heard: list[str] = []  # the controls, finish and halt, in the order the run gave them
        self._done = asyncio.Event()
        self._turn_task: asyncio.Task | None = None
        self._ctx = None
        self._n = 0
        self._waiting: dict[str, asyncio.Future] = {}

    def descriptor(self) -> CapabilityDescriptor:  # type: ignore[override]
        return self._descriptor or OHarnessAdapter.descriptor()

    def deliver(self, call_id, decision, decided_by) -> None:
        self.delivered.append((call_id, decision, decided_by))
        future = self._waiting.get(call_id)
        if future is not None and not future.done():
            future.set_result(decision)

    async def start(self, ctx) -> None:
        self._ctx = ctx
        self.child = FakeChild(self._done)
        ctx.session_started(SessionStarted(adapter="oharness", offered_tools=["read", "write", "bash"],
                                          transcript=TranscriptRef(), hermetic=HermeticAttestation()))

    async def begin_turn(self, text: str, frame=None) -> None:
        self.texts.append(text)
        turn = self.turns.pop(0) if self.turns else Turn(text="(scenario complete)")
        self._turn_task = asyncio.ensure_future(self._play(turn))

    async def _play(self, turn: Turn) -> None:
        ctx = self._ctx
        ctx.turn_started()
        try:
            if turn.text:
                ctx.emit(Text(text=turn.text))
            for call in turn.calls:
                self._n += 1
                call_id = call.call_id or f"call_{self._n}"
                future = self._waiting[call_id] = asyncio.get_running_loop().create_future()
                ctx.present(PresentedCall(call_id=call_id, name=call.name, input=call.input, seam=call.seam))
                decision = await future
                if not isinstance(decision, Deny):
                    self.ran.append(call_id)
                    ctx.emit(ToolResult(call_id=call_id, is_error=False, content="ok", exit_code=0))
            if turn.hold:
                await asyncio.Event().wait()
        except asyncio.CancelledError:
            ctx.turn_ended("interrupted")
            return
        ctx.turn_ended("end_turn")
        if self.crash_after_turn is not None and ctx.turn >= self.crash_after_turn:
            self._done.set()

    async def steer(self, command):
        self.heard.append(f"steer:{command.text}")
        self._ctx.emit(Injection(text=command.text, origin="steer"))

    async def set_posture(self, command):
        self.heard.append(f"posture:{command.posture}")
        return None

    async def interrupt(self, command):
        self.heard.append("interrupt")
        if self._turn_task and not self._turn_task.done():
            self._turn_task.cancel()

    # Looked up by name, so a test's subclass overrides one control as a plain method.
    controls = {Steer: lambda adapter, command: adapter.steer(command),
                PermissionSet: lambda adapter, command: adapter.set_posture(command),
                Interrupt: lambda adapter, command: adapter.interrupt(command)}

    async def finish(self):
        self.heard.append("finish")
        if self.end_session:
            self._ctx.session_ended(SessionEnded(is_error=False, subtype="success", census=DecisionCensus()))
        self._done.set()

    async def halt(self):
        self.heard.append("halt")
        if self._turn_task and not self._turn_task.done():
            self._turn_task.cancel()
        self._done.set()


async def drive(spec: RunSpec, adapter: Adapter | None = None, *, on_event: Callable | None = None,
                turns: list[Turn] | None = None, stdin_eof: bool = False, **fake_kwargs):
    """Run to the end; returns (events as dicts, exit code, adapter, raw lines, stderr)."""
    lines: list[bytes] = []
    events: list[dict] = []
    stderr: list[str] = []
    adapter = adapter or FakeAdapter(spec, turns or [], **fake_kwargs)
    holder: dict[str, Run] = {}

    def write(line: bytes) -> None:
        lines.append(line)
        event = json.loads(line)
        events.append(event)
        if on_event is not None:
            on_event(holder["run"], event)

    run = Run(spec, write, adapter=adapter, run_id="test-run", stderr=stderr.append)
    holder["run"] = run
    if stdin_eof:
        run.stdin_ended()
    code = await asyncio.wait_for(run.execute(), 20)
    return events, code, adapter, lines, stderr


def cmd(command: str, id: str = "c1", **payload) -> bytes:
    return json.dumps({"format": "metaharness.command/1", "id": id, "command": command, **payload}).encode()


def names(events: list[dict]) -> list[str]:
    return [e["event"] for e in events]


# --- the run core driven by plain calls: no event loop, a fake clock ------------------------


class Clock:
    """A clock that moves only when told (seconds)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


class CoreRun:
    """A `RunCore` over a FakeAdapter, driven synchronously the way `loop.py` drives it:
    `start()` (the start checks, the spawn settled, `session.started`), `turn()` (the turn the core
    asks to begin, written, then started by the harness; `landed()` first when a turn ended), `call()` (the harness presents a call), `send()` (one stdin line
    through the decoder and the pipeline), `expire()` at the fake clock, `wind_up()`. The
    core's actions are done as the driver does them: when the test reads what the run wrote or
    delivered (`lines`, `delivered`), or calls `act()`."""

    def __init__(self, spec: RunSpec, *, descriptor: CapabilityDescriptor | None = None) -> None:
        from metaharness.run.core import RunCore
        from metaharness.run.harness import Harness

        self.spec = spec
        self.clock = Clock()
        self._lines: list[bytes] = []
        self._said: list[str] = []
        self.adapter = FakeAdapter(spec, [], descriptor=descriptor)
        self.turn_inputs: list[Any] = []
        self.frames_set: list[Any] = []
        self._changes = 0
        self.harness = Harness(self.adapter, spec)
        self.core = RunCore(spec, run_id="test-run", harness=self.harness, clock=self.clock)
        self.unheard: dict[str, str] = {}  # what the driver's `Deliver` keeps for the `Heard` after it
        self.carried: list = []  # the commands the core asked to carry to the child (`Carry`)
        self.steps: list = []  # the turns' steps the core asked for (`BeginTurn`, `Land`, `Finish`)
        self.write, self.say = self._lines.append, self._said.append

    # --- the core's actions (the test is the driver): the driver's own table, but for its timer, its
    # stop and its waits, which need an event loop ---
    def act(self) -> None:
        from metaharness.run.actions import Arm, BeginTurn, Carry, Finish, Land, StopHarness, Wake
        from metaharness.run.act import ACTIONS

        step = lambda run, action: run.steps.append(action)  # noqa: E731
        does = {**ACTIONS, Arm: lambda run, action: None, StopHarness: lambda run, action: None,
                BeginTurn: step, Land: step, Finish: step,
                Carry: lambda run, action: run.carried.append(action.command),
                Wake: lambda run, action: setattr(run, "_changes", run._changes + 1)}
        while batch := self.core.actions():
            for action in batch:
                does[type(action)](self, action)

    def moved(self, input, *args):
        answer = input(*args)
        self.act()
        return answer

    @property
    def changes(self) -> int:
        """How often the core said a wait may be over (`Wake`)."""
        self.act()
        return self._changes

    @property
    def lines(self) -> list[bytes]:
        self.act()
        return self._lines

    @property
    def stderr(self) -> list[str]:
        self.act()
        return self._said

    @property
    def delivered(self) -> list:
        """(call_id, decision, decided_by), as the run delivered them."""
        self.act()
        return self.adapter.delivered

    @property
    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.lines]

    def by(self, name: str) -> list[dict]:
        return [e for e in self.events if e["event"] == name]

    def result(self, cid: str) -> dict:
        return [e for e in self.by("command.result") if e["id"] == cid][-1]["outcome"]

    def start(self, *, session: bool = True) -> None:
        self.core.check_start()
        self.core.spawn_begins()
        self.core.spawn_settles(spawned=True)
        if session:
            self.core.session_started(SessionStarted(adapter="oharness", offered_tools=["read", "write", "bash"],
                                                     transcript=TranscriptRef(), hermetic=HermeticAttestation()))

    def turn(self, first: bool = False) -> None:
        """A boundary, then the harness starts the turn."""
        begin = self.begun()
        if begin.frame is not None:
            self.frames_set.append(begin.frame)
        self.turn_inputs.append(begin.text)
        self.core.turn_written()
        self.core.turn_started()

    def landed(self, turn_coming: bool = False) -> str:
        """The commands queued at a boundary landed (the core asked with `Land`): the run's phase after."""
        from metaharness.run.actions import Land

        self.act()
        assert self.steps and type(self.steps[-1]) is Land, self.steps
        self.steps.pop()
        self.core.landed(turn_coming)
        self.act()
        return self.core.phases.run.value

    def begun(self):
        """The turn the core asked to begin (`BeginTurn`), landing the boundary first when it asks."""
        from metaharness.run.actions import BeginTurn, Land

        self.act()
        if self.steps and type(self.steps[-1]) is Land:
            self.landed()
        assert self.steps and type(self.steps[-1]) is BeginTurn, self.steps
        return self.steps.pop()

    def call(self, name: str, input: Any, call_id: str) -> None:
        self.core.present(PresentedCall(call_id=call_id, name=name, input=input, seam="owned_tool"))

    def send(self, line: bytes) -> bool:
        """One stdin line; True when the core hands it to the driver to carry to the child."""
        from metaharness.protocol.decode import decode_command_line
        from metaharness.run import commands

        item = decode_command_line(line)
        if item is None:
            return False
        self.core.inflight, self.core.inflight_answered = item, False
        try:
            carried = len(self.carried)
            self.core.take(item)
            self.act()
            carry = len(self.carried) > carried
            if not carry:
                commands.unanswered(self.core, item, "metaharness could not carry it")
            return carry
        finally:
            self.core.inflight = None
            self.act()

    def expire(self) -> None:
        self.core.expire(self.clock())

    def wind_up(self, queued: list[bytes] = ()) -> int:
        from metaharness.protocol.decode import decode_command_line

        items = [decode_command_line(line) for line in queued]
        return self.core.wind_up(Exited(code=0), [i for i in items if i is not None])

    def end_session(self) -> None:
        self.core.session_ended(SessionEnded(is_error=False, subtype="success", census=DecisionCensus()))
