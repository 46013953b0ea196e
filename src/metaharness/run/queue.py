"""The run's command queue and its one worker: every command a run reads, taken in arrival order.

What belongs here: the queue (stdin's lines in bursts, the library's typed commands), the worker
that decodes each line as it takes it and hands it to the core (`core.take`), the guard that
answers a command whose processing wrote no answer, the counts a boundary waits on (`fed`,
`finished`), the commands left untaken at the end (`leftovers`), and the intake's link. What a
command means is `commands.py`'s; carrying one to the child is the driver's (`carry`).

Rules it keeps:
* The worker yields to the loop every WORKER_SLICE_S, so a burst of commands never delays a
  deadline or the child's records; a command is taken in every slice, however short.
* The queue holds lists: each item is one burst of stdin lines (run/host.py's Intake hands a
  chunk's lines at once) or one command, so a flood costs one queue operation per burst.
* A command taken before the spawn settled is known as such (`core.read_before_spawn`), even
  when it is taken later, behind a held permission.set.
"""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable, Iterator, Protocol

from metaharness.protocol.commands import Command
from metaharness.protocol.decode import CommandLine, decode_command_line

from . import commands
from .core import RunCore

WORKER_SLICE_S = 0.002  # the command worker yields to the loop at least this often
WORKER_YIELD_PASSES = 4  # loop passes the worker gives the rest of the run at each yield
DRAIN_BOUND_S = 5.0  # at the end, how long the commands already queued may take


class IntakeLink(Protocol):
    """What the run tells the intake feeding it (run/host.py's `Intake`)."""

    def taken(self, lines: int) -> None:
        """The worker took a burst of `lines`: their backlog slots are free."""

    async def catch_up(self) -> None:
        """Return once what stdin holds right now was handed to the run (bounded)."""


class NoIntake:
    """No intake: the run is fed by the library API alone."""

    def taken(self, lines: int) -> None: ...

    async def catch_up(self) -> None: ...


class CommandQueue:
    """`act()` does the core's actions after each command taken; a `Carry` among them sets
    `carrying`, which the worker then awaits as `carry(command)` (steer, permission.set,
    interrupt, halt) before it takes the next command; `changed()` is called when a burst was
    done with."""

    def __init__(self, core: RunCore, *, carry: Callable[[Command], Awaitable[None]], act: Callable[[], None],
                 changed: Callable[[], None], stderr: Callable[[str], None]) -> None:
        self._core, self._carry, self._act, self._changed, self._stderr = core, carry, act, changed, stderr
        self._queue: asyncio.Queue = asyncio.Queue()
        self.intake: IntakeLink = NoIntake()
        self.carrying: Command | None = None  # the command the core asked to carry (`Carry`), until it is
        self._batch: list | None = None  # the burst the worker is in; its rest from _batch_next
        self._batch_next = 0
        self.fed = self._taken = 0  # bursts put and taken
        self.finished = 0  # bursts done with (a boundary waits for every one fed before it)
        self._fed_before_spawn: int | None = None  # bursts read before the spawn settled (None: not yet)

    # --- feeding ---------------------------------------------------------------------------
    def feed_line(self, raw: bytes) -> None:
        """One stdin line (without its newline), in arrival order."""
        decoded = decode_command_line(raw)
        if decoded is not None:
            self._put([decoded])

    def feed_lines(self, items: list) -> None:
        """stdin lines (bytes, decoded as the worker takes them) or refusals, in arrival
        order (run/host.py's Intake). The list is the queue's from here on."""
        if items:
            self._put(items)

    def feed_command(self, command: Command) -> None:
        """A command from the library API (already typed)."""
        self._put([command])

    def _put(self, batch: list) -> None:
        self.fed += 1
        self._queue.put_nowait(batch)

    def spawn_settled(self) -> None:
        """What was fed until now was read before the spawn settled."""
        self._fed_before_spawn = self.fed

    # --- the worker ------------------------------------------------------------------------
    async def work(self) -> None:
        # Looked up once: the loop below runs once per line of a flood.
        core, queue, writer, take, act, decode = (self._core, self._queue, self._core.writer, self._core.take, self._act,
                                                  decode_command_line)
        clock = time.perf_counter
        slice_end = clock() + WORKER_SLICE_S
        while True:
            if queue.empty():  # waiting for work yields too: a fresh slice once it comes
                batch = await queue.get()
                slice_end = clock() + WORKER_SLICE_S
            else:
                batch = queue.get_nowait()
            self.intake.taken(len(batch))
            self._taken += 1
            core.read_before_spawn = self._fed_before_spawn is None or self._taken <= self._fed_before_spawn
            self._batch = batch
            index = 0
            try:
                while index < len(batch):  # answering the leftovers may cut the batch short
                    item = batch[index]
                    index += 1
                    if type(item) is bytes:
                        item = decode(item)  # None: a blank line, no command, no answer
                    if item is not None and not writer.closed:
                        # inline, not a coroutine of its own: this runs once per line of a flood
                        core.inflight = item
                        core.inflight_answered = False
                        try:
                            take(item)  # synchronous, but for the commands the child must hear
                            act()
                            if self.carrying is not None:
                                command, self.carrying = self.carrying, None
                                # `leftovers` reads the burst's rest only while the worker waits
                                self._batch_next = index
                                await self._carry(command)
                        except Exception as exc:  # a bug must not leave a command unanswered
                            self._internal_error(item, exc)
                        else:
                            if not core.inflight_answered:
                                commands.unanswered(core, item, "metaharness could not carry it")
                        finally:
                            core.inflight = None
                            if core.out:  # most lines left nothing more to do
                                act()
                    if clock() >= slice_end:
                        # A burst never holds the loop: timers, the child's records and signals
                        # run between slices, however long the backlog is. Several passes, since
                        # reading one record takes a few (readable → the adapter's task → the
                        # flush of its line).
                        self._batch_next = index
                        for _pass in range(WORKER_YIELD_PASSES):
                            await asyncio.sleep(0)
                        slice_end = clock() + WORKER_SLICE_S
            finally:
                self._batch = None
                self._batch_done()

    def _internal_error(self, item: CommandLine, exc: Exception) -> None:
        core = self._core
        if not core.writer.closed and isinstance(getattr(item, "id", None), str):
            self._stderr(f"metaharness: internal error on command {item.id}: {exc!r}")
            commands.unanswered(core, item, f"metaharness could not carry it: {type(exc).__name__}")

    def _batch_done(self) -> None:
        self._queue.task_done()
        self.finished += 1
        self._changed()

    # --- the end ---------------------------------------------------------------------------
    async def drain(self) -> None:
        """At the end every line already written to stdin is answered: the intake reads what
        stdin holds right then, then the commands already queued may take DRAIN_BOUND_S."""
        await self.intake.catch_up()
        await asyncio.sleep(0)
        try:
            await asyncio.wait_for(self._queue.join(), DRAIN_BOUND_S)
        except asyncio.TimeoutError:
            pass

    async def join(self) -> None:
        """Return once every burst fed so far was done with."""
        await self._queue.join()

    def leftovers(self) -> Iterator[CommandLine]:
        """The commands not yet taken — the rest of the burst the worker is in, then every
        queued burst — one by one (blank lines skipped)."""
        rest: list = []
        if self._batch is not None:
            rest = self._batch[self._batch_next:]
            del self._batch[self._batch_next:]
        while not self._queue.empty():
            batch = self._queue.get_nowait()
            self.intake.taken(len(batch))
            self._taken += 1
            rest.extend(batch)
            self._batch_done()
        for item in rest:
            if type(item) is bytes:
                item = decode_command_line(item)
                if item is None:
                    continue
            yield item
