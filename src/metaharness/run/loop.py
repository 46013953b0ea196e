"""The run driver: the asyncio around the run core — it moves inputs in and actions out, nothing else.

What belongs here: the start checks (on a thread, so a stop cuts them short), the spawn, the
turns' drive and its waits (a turn's end, a boundary command, the child's end, a stop), the one
deadline timer, stopping the child (halt, SIGINT/SIGTERM, the spend cap) and the awaiting of
wind-up; `Run` is the adapter's `RunContext`, each report moved into the core. After every input
it moves in, the core's actions are done (`act`, through `act.py`'s table, which also carries the
controls). Every rule it applies is the core's (`core.py`, and below it `phase.py`, `calls.py`,
`commands.py`, `start.py`); commands are taken by the queue's worker (`queue.py`).

Rules it keeps (the timing ones):
* Phases are the core's: every wait here is for a phase, or for what the core counts (turns
  ended, the boundary, stdin's end), re-asked whenever the core says one may be over (`Wake`,
  `_until`); a stop (the core's STOPPING) ends every wait, and `stop_harness` stops the child.
* A boundary sees every command queued before it: at a turn's end, and when a `--keep-open`
  run is woken at its boundary, the driver waits (at most BOUNDARY_BOUND_S) until the worker
  took every command already queued, so commands sent together open the same turn.
* At the end every line already written to stdin is answered (`CommandQueue.drain`); after a
  stop the child's output may take STOP_BOUND_S to end, then the run winds up without it.
* One timer at a time, armed for the core's next deadline (`Arm`); when it fires the core
  expires what is due and the timer is armed for the next.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import time
from typing import Any, Awaitable, Callable

from metaharness.adapters.base import Adapter, StartRefusal
from metaharness.loopback.pricing import Charge, Meter, shipped_prices
from metaharness.protocol.frame import Frame
from metaharness.protocol.spec import RunSpec
from metaharness.protocol.values import ProcessTermination, UnknownTermination

from .act import ACTIONS, carry
from .actions import Write
from .core import RunCore
from .harness import Harness
from .queue import CommandQueue, IntakeLink
from .start import RunRefused  # noqa: F401  (re-exported: api.py and replay refuse starts through it)

STOP_BOUND_S = 15.0  # after a stop, how long the child's output may take to end
BOUNDARY_BOUND_S = 5.0  # at a turn's end, how long the commands already queued may take to land


def _report(name: str) -> Callable[..., None]:
    """One report of the adapter's `RunContext`, moved into the core (`RunCore.<name>`)."""

    def moved(run: "Run", *args: Any, **kwargs: Any) -> None:
        getattr(run.core, name)(*args, **kwargs)
        run.act()

    moved.__name__ = moved.__qualname__ = name
    return moved


class Run:
    """One run of one harness. Use `execute()`; see `metaharness.api` for embedders."""

    # The adapter's reports: `Run` is its `RunContext` (api.py and the cassette host report through it too).
    session_started, turn_started, turn_ended = _report("session_started"), _report("turn_started"), _report("turn_ended")
    emit, present, record_call = _report("emit"), _report("present"), _report("record_call")
    session_ended, warn, opaque = _report("session_ended"), _report("warn"), _report("opaque")

    def __init__(self, spec: RunSpec, write: Callable[[bytes], None], *, run_id: str | None = None,
                 adapter: Adapter | None = None, stderr: Callable[[str], None] | None = None) -> None:
        from metaharness.adapters import adapter_class

        self.spec, self.write, self.say = spec, write, stderr or (lambda text: None)  # stdout's lines, stderr's
        self.run_id = run_id or spec.run_id or f"{spec.kind}-{os.getpid()}"
        self.adapter: Adapter = adapter or adapter_class(spec.kind)(spec)
        self.harness = Harness(self.adapter, spec)
        self._clock = time.monotonic  # the loop's own clock, so timers and deadlines agree
        # A charge (an adapter's, or a proxy's on this loop) is an input like any other (`_charged`).
        self.meter = Meter(shipped_prices(), spec.max_cost_usd, on_charge=self._charged)
        self.core = core = RunCore(spec, run_id=self.run_id, harness=self.harness, clock=self._clock, meter=self.meter)
        self.changed = asyncio.Event()  # the core or the queue changed: each wait asks again (`_until`)
        self.unheard: dict[str, str] = {}  # call id → why the embedder's decision did not reach the harness
        self._stop_sent = False  # adapter.halt() was called after the spawn settled
        self._child_done: asyncio.Task | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.queue = CommandQueue(core, carry=lambda item: carry(self, item), act=self.act, changed=self.changed.set,
                                  stderr=self.say)
        self.feed_line, self.feed_lines, self.feed_command = (self.queue.feed_line, self.queue.feed_lines,
                                                              self.queue.feed_command)
        # What layers above reach (api.py, replay, tests): the core's own, under the old names.
        self.writer, self.census, self.run_cwd = core.writer, core.census, core.run_cwd
        self.descriptor = self.harness.descriptor
        self.check_start, self.close_reason = core.check_start, core.close_reason

    @property
    def turn(self) -> int:
        return self.core.turn

    @property
    def frame(self) -> Frame | None:
        return self.core.frame

    def price_at_endpoint(self) -> Meter:
        """A service in front of the model prices its traffic on this meter (`RunCore.price_at_endpoint`)."""
        return self.moved(self.core.price_at_endpoint)

    def tap(self, tap: Any) -> None:
        """A tap on the stream (`protocol.stream.EventTap`: the live spans), told every line as it is numbered."""
        self.writer.tap = tap

    def attach(self, intake: IntakeLink) -> None:
        """The intake that feeds this run (run/host.py's, reading stdin): told when the worker takes
        a burst, asked to catch up before the wind-up."""
        self.queue.intake = intake

    # --- inputs in, actions out -------------------------------------------------------------------
    def moved(self, input: Callable[..., Any], *args: Any) -> Any:
        """Move one input into the core, then do the actions it gave."""
        answer = input(*args)
        self.act()
        return answer

    def act(self) -> None:
        """Do the core's actions, in order (`act.ACTIONS`); those of an action's own inputs first."""
        core, write = self.core, self.write
        while batch := core.actions():
            for action in batch:
                if type(action) is Write:  # the flood's one action, done without the table's call
                    write(action.line)
                else:
                    ACTIONS[type(action)](self, action)

    def stdin_ended(self) -> None:
        self.moved(self.core.stdin_ended)

    def _charged(self, charge: Charge) -> None:
        self.moved(self.core.charged, charge)

    def arm_deadline(self) -> None:
        if self._timer is None and (due := self.core.next_deadline()) is not None:
            self._timer = asyncio.get_running_loop().call_later(max(0.0, due - self._clock()), self._deadline_fell)

    def _deadline_fell(self) -> None:
        self._timer = None
        self.moved(self.core.expire, self._clock())
        self.arm_deadline()

    # --- waits ------------------------------------------------------------------------------------
    async def _until(self, ready: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait until `ready()`, asked again whenever the core or the queue changed; False when
        `timeout` seconds passed first."""
        give_up = None if timeout is None else self._clock() + timeout
        while not ready():
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), None if give_up is None else give_up - self._clock())
            except asyncio.TimeoutError:
                return ready()
        return True

    async def spawn_settled(self) -> None:
        """Return once the adapter's start returned or failed (or nothing will be spawned)."""
        await self._until(lambda: self.core.spawn_settled)

    async def _wait_for(self, ready: Callable[[], bool]) -> str:
        """Wait until `ready()`; "child" when the child's output ended or a stop came first."""
        await self._until(lambda: ready() or self.core.winding_up)
        return "event" if ready() and not self.core.stopping else "child"

    async def _land_queued_commands(self) -> None:
        """Wait until every command queued so far was taken (bounded; a stop cuts it short)."""
        queue, target = self.queue, self.queue.fed
        await self._until(lambda: queue.finished >= target or self.core.stopping, BOUNDARY_BOUND_S)

    # --- the drive --------------------------------------------------------------------------------
    async def execute(self) -> int:
        """Run to the end; return the exit code (docs/reference/wire.md)."""
        from metaharness.adapters.process import make_non_dumpable

        make_non_dumpable()  # nothing of this user's reaches our fds, environment or memory
        try:
            await self._check_start()
        except RunRefused as refusal:
            if not self.core.stopping:  # a stop that came during the checks is the answer
                return self.refuse_start(refusal)
        worker = asyncio.create_task(self.queue.work())
        try:
            await asyncio.sleep(0)  # commands already read go first: a halt before the spawn spawns nothing
            if self.core.stopping:
                self._settle(spawned=False)
                await self.queue.drain()
                return self._wind_up(UnknownTermination())
            self.moved(self.core.spawn_begins)
            try:
                await self.adapter.start(self)
            except StartRefusal as exc:
                self._settle(spawned=False)
                await self._stop_child()
                await self.queue.drain()
                return self.refuse_start(RunRefused(f"{exc.name}: {exc.sentence}"))
            except BaseException:
                self._settle(spawned=False)
                raise
            self._child_done = asyncio.create_task(self.adapter.child.wait())
            self._child_done.add_done_callback(self._child_output_ended)
            self._settle(spawned=True)
            if self.core.stopping:  # a stop that came while the child was spawning
                await self.stop_harness()
            else:
                await self._drive()
            termination = await self._child_termination()
            await self.queue.drain()
            return self._wind_up(termination)
        finally:
            worker.cancel()
            if self._timer is not None:
                self._timer.cancel()
            if self.adapter.child is not None:
                self.adapter.child.cleanup()

    async def _check_start(self) -> None:
        """The start checks (`core.check_start`) on a thread of their own: a vendor's `--version`
        probe may take seconds, and a stop meanwhile kills it (`VersionProbes`) instead of
        waiting for it. A stop that came first skips them: nothing will be spawned."""
        from metaharness.adapters.process import VERSION_PROBES, VersionProbes

        if self.core.stopping:
            return
        probes = VersionProbes()
        context = contextvars.copy_context()
        context.run(VERSION_PROBES.set, probes)
        checking = asyncio.get_running_loop().run_in_executor(None, context.run, self.core.check_start)
        stopping = asyncio.ensure_future(self._until(lambda: self.core.stopping))
        try:
            await asyncio.wait({checking, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if not checking.done():
            probes.stop()
        await checking

    def _settle(self, *, spawned: bool) -> None:
        self.queue.spawn_settled()
        self.moved(lambda: self.core.spawn_settles(spawned=spawned))

    async def _drive(self) -> None:
        core, adapter = self.core, self.adapter
        if core.stopping:
            return
        frame, turn_input = self.moved(core.open_turn, self.spec.prompt or "")
        while True:
            ended = core.turns_ended
            if not await self._reach(adapter.begin_turn(turn_input, frame)):
                return
            self.moved(core.turn_delivered)
            while True:  # serve the turn, and any the harness starts by itself
                if await self._wait_for(lambda: core.turns_ended > ended) == "child":
                    return
                await self._land_queued_commands()
                step = self.moved(core.after_turn, adapter.turn_coming)
                if step != "serve":
                    break
                ended = core.turns_ended
            while step == "wait":  # --keep-open: idle at the boundary until a command or stdin's end
                if await self._wait_for(lambda: bool(core.boundary) or core.stdin_done) == "child":
                    return
                await self._land_queued_commands()
                step = core.after_wait()
            if step == "end" or core.stopping:
                break
            frame, turn_input = self.moved(core.open_turn)
        self.moved(core.turns_done)
        if not core.stopping:
            await adapter.finish()

    async def _reach(self, write: Awaitable[Any]) -> bool:
        """Await a write a turn needs (its frame, its input). False when the child can no longer be
        reached — it died where the run wrote to it, say at a boundary, before its output ended:
        the run stops it and winds up with the reason, never a traceback."""
        try:
            await write
        except Exception as exc:
            if not isinstance(exc, (OSError, EOFError)) and self.harness.reachable():
                raise  # not the channel: a bug, which must not pass for a dead child
            self.moved(self.core.harness_unreachable, str(exc) or type(exc).__name__)
            await self.stop_harness()
            return False
        return True

    # --- stops and the end ------------------------------------------------------------------------
    def _child_output_ended(self, _task: asyncio.Task) -> None:
        self.moved(self.core.child_output_ended)

    async def request_stop(self) -> None:
        """SIGINT/SIGTERM: stop the child and wind up (no halt command was processed).
        Any phase: before the spawn nothing is spawned, during it the child is stopped as
        soon as it exists, during wind-up the wind-up completes (a second signal stops again)."""
        self.moved(self.core.stop_requested)
        await self.stop_harness()

    async def stop_harness(self) -> None:
        """Stop the child once it exists (the core is STOPPING: halt, signal, spend cap, out of reach);
        before the spawn settled, execute() stops it as soon as it does."""
        if not self.core.spawn_settled or not self.core.spawned:
            return
        self._stop_sent = True
        try:
            await self.adapter.halt()
        except Exception as exc:
            self.say(f"metaharness: stopping the harness failed: {exc}")

    async def _child_termination(self) -> ProcessTermination:
        """The child's termination; once a stop was asked for, bounded by STOP_BOUND_S (a child
        whose output a stray descendant keeps open cannot hold the run)."""
        assert self._child_done is not None
        stop_waiter = asyncio.ensure_future(self._until(lambda: self.core.stopping))
        done, _ = await asyncio.wait({self._child_done, stop_waiter}, return_when=asyncio.FIRST_COMPLETED)
        stop_waiter.cancel()
        if self._child_done in done:
            return self._child_done.result()
        if not self._stop_sent:
            await self.stop_harness()
        done, _ = await asyncio.wait({self._child_done}, timeout=STOP_BOUND_S)
        if done:
            return self._child_done.result()
        self.say("metaharness: the harness's output did not end after it was stopped; winding up without it")
        self._child_done.remove_done_callback(self._child_output_ended)
        self._child_done.cancel()
        return UnknownTermination()

    async def _stop_child(self) -> None:
        try:
            await self.adapter.halt()
            if self.adapter.child is not None:
                await asyncio.wait_for(self.adapter.child.wait(), 10)
        except Exception:
            pass

    def refuse_start(self, refusal: RunRefused) -> int:
        return self.moved(self.core.refuse_start, refusal, self.queue.leftovers())

    def _wind_up(self, termination: ProcessTermination) -> int:
        child, keep = self.adapter.child, self.spec.retain_dir
        return self.moved(lambda: self.core.wind_up(
            termination, self.queue.leftovers(), tail=child.stderr_tail() if child is not None else "",
            retained=child.retain(keep) if keep and child is not None else ()))
