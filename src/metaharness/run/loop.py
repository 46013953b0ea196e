"""The run driver: the asyncio around the run core — it moves inputs in and does actions out, nothing else.

What belongs here: `Run`, the adapter's `RunContext` (each report moved into the core), and the
waiting the core cannot do: the start checks and the spawn (`spawn.py`), the turns' steps the core asks for (`BeginTurn`, `Land`, `Finish`: awaited one at a time, through
`act.py`'s `STEPS`), the one deadline timer, the child's end. After every input it moves in, the
core's actions are done (`act`, through `act.py`'s `ACTIONS`). Every rule is the core's
(`core.py`, `phase.py`, …): when a turn opens, is served, lands or finishes, when the child is
stopped. Commands are taken by the queue's worker (`queue.py`).

Rules it keeps (the timing ones):
* No phase of its own: it waits for a step the core asked for, or for what the core says (the
  spawn settled, a stop), asked again whenever the core says one may be over (`Wake`).
* At the end every line already written to stdin is answered (`CommandQueue.drain`); after a
  stop the child's output may take STOP_BOUND_S to end, then the run winds up without it.
* One timer at a time, armed for the core's next deadline (`Arm`), expiring what is due.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, Callable

from metaharness.adapters.base import Adapter
from metaharness.loopback.pricing import Meter, shipped_prices
from metaharness.protocol.spec import RunSpec
from metaharness.protocol.values import ProcessTermination, UnknownTermination

from .act import ACTIONS, STEPS, carry
from .actions import Write
from .core import RunCore
from .harness import Harness
from .queue import CommandQueue, IntakeLink
from .spawn import bring_up
from .start import RunRefused  # noqa: F401  (re-exported: api.py and replay refuse starts through it)

STOP_BOUND_S = 15.0  # after a stop, how long the child's output may take to end


def _report(name: str) -> Callable[..., Any]:
    """One input of the core's (`RunCore.<name>`: a report of the adapter's `RunContext`, …), moved in."""

    def moved(run: "Run", *args: Any, **kwargs: Any) -> Any:
        answer = getattr(run.core, name)(*args, **kwargs)
        run.act()
        return answer

    moved.__name__ = moved.__qualname__ = name
    return moved


class Run:
    """One run of one harness. Use `execute()`; see `metaharness.api` for embedders."""

    # The adapter's reports: `Run` is its `RunContext` (api.py and the cassette host report through it too).
    session_started, turn_started, turn_ended = _report("session_started"), _report("turn_started"), _report("turn_ended")
    emit, present, record_call = _report("emit"), _report("present"), _report("record_call")
    session_ended, warn, opaque = _report("session_ended"), _report("warn"), _report("opaque")
    # A service in front of the model prices its traffic on this meter (`RunCore.price_at_endpoint`).
    stdin_ended, price_at_endpoint, _charged = _report("stdin_ended"), _report("price_at_endpoint"), _report("charged")

    def __init__(self, spec: RunSpec, write: Callable[[bytes], None], *, run_id: str | None = None,
                 adapter: Adapter | None = None, stderr: Callable[[str], None] | None = None) -> None:
        from metaharness.adapters import adapter_class

        self.spec, self.write, self.say = spec, write, stderr or (lambda text: None)  # stdout's lines, stderr's
        self.run_id = run_id or spec.run_id or f"{spec.kind}-{os.getpid()}"
        self.adapter: Adapter = adapter or adapter_class(spec.kind)(spec)
        self.harness = Harness(self.adapter, spec)
        self.clock = time.monotonic  # the loop's own clock, so timers and deadlines agree
        # A charge (an adapter's, or a proxy's on this loop) is an input like any other (`_charged`).
        self.meter = Meter(shipped_prices(), spec.max_cost_usd, on_charge=self._charged)
        self.core = core = RunCore(spec, run_id=self.run_id, harness=self.harness, clock=self.clock, meter=self.meter)
        self.changed = asyncio.Event()  # the core or the queue changed: each wait asks again (`until`)
        self.unheard: dict[str, str] = {}  # call id → why the embedder's decision did not reach the harness
        self.step: Any = None  # the turns' step the core asked for (`BeginTurn`, `Land`, `Finish`), until done
        self.stop_task: asyncio.Future | None = None  # the last stop of the child (`StopHarness`)
        self._child_done: asyncio.Task | None = None
        self.worker: asyncio.Task | None = None  # the queue's worker, taking commands (`spawn.bring_up` starts it)
        self.timer: asyncio.TimerHandle | None = None  # the one deadline timer (`Arm`)
        self.queue = CommandQueue(core, carry=lambda item: carry(self, item), act=self.act, changed=self.changed.set,
                                  stderr=self.say)
        self.feed_line, self.feed_lines, self.feed_command = (self.queue.feed_line, self.queue.feed_lines,
                                                              self.queue.feed_command)
        # What layers above reach (api.py, replay, tests): the core's own, under the old names.
        self.writer, self.census, self.run_cwd = core.writer, core.census, core.run_cwd
        self.descriptor = self.harness.descriptor
        self.check_start, self.close_reason = core.check_start, core.close_reason

    turn = property(lambda self: self.core.turn)
    frame = property(lambda self: self.core.frame)

    def tap(self, tap: Any) -> None:
        """A tap on the stream (`protocol.stream.EventTap`: the live spans), told every line as it is numbered."""
        self.writer.tap = tap

    def attach(self, intake: IntakeLink) -> None:
        """The intake feeding this run (run/host.py's): told of each burst taken, asked to catch up at the end."""
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

    async def until(self, ready: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait until `ready()`, asked again whenever the core or the queue changed; False after `timeout`."""
        give_up = None if timeout is None else self.clock() + timeout
        while not ready():
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), None if give_up is None else give_up - self.clock())
            except asyncio.TimeoutError:
                return ready()
        return True

    async def spawn_settled(self) -> None:
        """Return once the adapter's start returned or failed (or nothing will be spawned)."""
        await self.until(lambda: self.core.spawn_settled)

    async def until_stopping(self, work: "asyncio.Future[Any]") -> bool:
        """Await `work` or a stop, whichever comes first; True when `work` is done."""
        stopping = asyncio.ensure_future(self.until(lambda: self.core.stopping))
        try:
            await asyncio.wait({work, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        return work.done()

    # --- the run ----------------------------------------------------------------------------------
    async def execute(self) -> int:
        """Run to the end; return the exit code (docs/reference/wire.md)."""
        from metaharness.adapters.process import make_non_dumpable

        make_non_dumpable()  # nothing of this user's reaches our fds, environment or memory
        try:
            if (ended := await bring_up(self)) is not None:  # checked, spawned; or ended there
                return ended
            self._child_done = asyncio.create_task(self.adapter.child.wait())
            self._child_done.add_done_callback(self._child_output_ended)
            self.settle(spawned=True)  # the core opens the first turn, or stops the child
            while await self.until(lambda: self.step is not None or self.core.winding_up) and self.step is not None:
                step, self.step = self.step, None  # the turns' steps, one at a time, until the core asks none
                await STEPS[type(step)](self, step)
            termination = await self._child_termination()
            await self.queue.drain()
            return self.wind_up(termination)
        finally:
            if self.worker is not None:
                self.worker.cancel()
            if self.timer is not None:
                self.timer.cancel()
            if self.adapter.child is not None:
                self.adapter.child.cleanup()

    def settle(self, *, spawned: bool) -> None:
        self.queue.spawn_settled()
        self.moved(lambda: self.core.spawn_settles(spawned=spawned))

    # --- stops and the end ------------------------------------------------------------------------
    def _child_output_ended(self, _task: asyncio.Task) -> None:
        self.moved(self.core.child_output_ended)

    async def request_stop(self) -> None:
        """SIGINT/SIGTERM, in any phase: the core stops the child (once it exists) and winds up."""
        self.moved(self.core.stop_requested)
        if self.stop_task is not None:
            await self.stop_task

    async def _child_termination(self) -> ProcessTermination:
        """The child's termination; after a stop, bounded by STOP_BOUND_S (a stray descendant may hold its output)."""
        child_done = self._child_done
        assert child_done is not None
        if not await self.until_stopping(child_done):
            done, _ = await asyncio.wait({child_done}, timeout=STOP_BOUND_S)
            if not done:
                self.say("metaharness: the harness's output did not end after it was stopped; winding up without it")
                child_done.remove_done_callback(self._child_output_ended)
                child_done.cancel()
                return UnknownTermination()
        return child_done.result()

    def refuse_start(self, refusal: RunRefused) -> int:
        return self.moved(self.core.refuse_start, refusal, self.queue.leftovers())

    def wind_up(self, termination: ProcessTermination) -> int:
        child, keep = self.adapter.child, self.spec.retain_dir
        return self.moved(lambda: self.core.wind_up(
            termination, self.queue.leftovers(), tail=child.stderr_tail() if child is not None else "",
            retained=child.retain(keep) if keep and child is not None else ()))
