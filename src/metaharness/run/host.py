"""Hosting a run in this process: stdin lines in, event lines out, signals.

`run_blocking(spec)` is what `metaharness run` does: it reads command lines from
stdin on a thread (`Intake`: off the loop, bounded, so a flood neither starves the run
nor grows its memory; caught up before the wind-up, so a line written before the end is
answered; works for pipes, sockets, files, ttys and a closed stdin alike), writes every
event line to stdout (and to `--events FILE`), turns SIGINT/SIGTERM into a wind-up that
still writes `stream.closed`, and returns the exit code.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import sys
import threading
import time
from typing import Awaitable, BinaryIO, Callable

from metaharness.protocol.spec import RunSpec

from . import EARLY_SIGNALS as _EARLY_SIGNALS, install_early_signal_handlers
from .loop import Run


LINE_LIMIT = 16 * 1024 * 1024  # a longer stdin line is refused unread: memory stays bounded
BACKLOG = 1024  # lines handed to the worker and not yet taken; at the bound stdin is not read
READ_CHUNK = 64 * 1024
CATCH_UP_BOUND_S = 2.0  # at the end, how long reading what stdin already holds may take
TOO_LONG = f"the line is longer than {LINE_LIMIT} bytes; it was not read"


class _Slots:
    """A count of lines in the backlog, taken and freed a burst at a time (one lock round
    per burst, not per line). `take` waits while the count is at or over the bound, so the
    backlog holds at most `bound` lines plus one burst."""

    def __init__(self, bound: int) -> None:
        self._bound, self._held = bound, 0
        self._cond = threading.Condition(threading.Lock())

    def take(self, n: int) -> None:
        with self._cond:
            while self._held >= self._bound:
                self._cond.wait()
            self._held += n

    def free(self, n: int) -> None:
        with self._cond:
            self._held -= n
            self._cond.notify()


class _Lines:
    """Splits stdin's chunks into lines, however the reads cut them: a line split across
    reads is joined, a last line without "\\n" is still a line, and a line over LINE_LIMIT
    is refused MALFORMED under `-` and its bytes dropped up to its newline, never kept."""

    def __init__(self) -> None:
        self._carry = bytearray()  # the line in progress (no "\n" seen yet)
        self._skipping = False  # inside a line longer than LINE_LIMIT

    def feed(self, chunk: bytes) -> list:
        from metaharness.protocol.decode import CommandRefusal

        lines: list = chunk.split(b"\n")
        tail = lines.pop()  # after the last "\n" (all of it when there is none)
        if lines:
            if self._skipping:  # the end of the long line: nothing of it was kept
                self._skipping = False
                del lines[0]
            elif self._carry:
                self._carry += lines[0]
                lines[0], self._carry = bytes(self._carry), bytearray()
            if lines and max(map(len, lines)) > LINE_LIMIT:
                lines = [CommandRefusal("-", TOO_LONG) if len(line) > LINE_LIMIT else line for line in lines]
        if not self._skipping:
            self._carry += tail
            if len(self._carry) > LINE_LIMIT:
                lines.append(CommandRefusal("-", TOO_LONG))
                self._carry, self._skipping = bytearray(), True
        return lines

    def end(self) -> list:
        return [bytes(self._carry)] if self._carry and not self._skipping else []


class Intake:
    """stdin → command lines for the run, with back-pressure.

    A thread reads stdin in chunks (the read releases the GIL), splits the lines, and
    hands each chunk's lines to the loop as one burst (`Run.feed_lines`); the command worker
    decodes each line as it takes it, in time slices that yield to the loop
    (`Run._command_worker`). The lines of a burst hold backlog slots until the worker takes
    the burst (`Intake.taken`); with BACKLOG lines held the thread stops reading, so
    the OS pipe fills and the embedder's writes block. Memory is bounded by BACKLOG lines
    plus one chunk's, each at most LINE_LIMIT.

    Before the run winds up it asks the thread to catch up (`Intake.catch_up`): a line
    the embedder wrote before the end is answered, even when the run meets the end (the
    child's death, a signal) before the thread was scheduled to read it. The thread reads
    whatever stdin holds right then (bounded by CATCH_UP_BOUND_S: a writer that never
    stops cannot hold the end), hands it, and answers; the answer comes after the bursts,
    the loop's callbacks keeping their order. A byte on a pipe of its own wakes the thread
    from its wait for stdin; closing that pipe (`close`) ends the thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, run: Run, fd: int, backlog: int = BACKLOG,
                 chunk: int = READ_CHUNK) -> None:
        self._loop, self._run, self._fd, self._chunk = loop, run, fd, chunk
        self._slots = _Slots(backlog)
        self._lines = _Lines()
        self._wake_r, self._wake_w = os.pipe()
        self._asked: list[asyncio.Future] = []  # catch-ups not answered yet, oldest first
        self._gone = False  # the thread ended or was told to: nothing more to catch up
        run.attach(self)

    def taken(self, lines: int) -> None:
        """The worker took a burst: its backlog slots are free (reading resumes at the bound)."""
        self._slots.free(lines)

    def start(self) -> None:
        self.thread = threading.Thread(target=self._pump, daemon=True, name="metaharness-stdin")
        self.thread.start()

    async def catch_up(self) -> None:
        """Return once every line stdin held when asked was handed to the run (bounded)."""
        if self._gone:
            return
        asked = self._loop.create_future()
        self._asked.append(asked)
        try:
            os.write(self._wake_w, b"?")
            await asyncio.wait_for(asyncio.shield(asked), CATCH_UP_BOUND_S + 1.0)
        except (OSError, asyncio.TimeoutError):
            pass

    def close(self) -> None:
        """End the thread (it may be waiting for stdin); once the run is over."""
        self._gone = True
        self._answered(len(self._asked))
        with contextlib.suppress(OSError):
            os.close(self._wake_w)

    def _answered(self, count: int) -> None:
        done, self._asked = self._asked[:count], self._asked[count:]
        for asked in done:
            if not asked.done():
                asked.set_result(None)

    def _pump(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        try:
            while True:
                ready = {fd for fd, _mask in poller.poll()}
                if self._wake_r in ready:
                    asked = len(os.read(self._wake_r, 4096))
                    if not asked:  # close(): the run is over
                        return
                    going = self._read_what_is_there(poller)
                    self._loop.call_soon_threadsafe(self._answered, asked)
                    if not going:
                        return
                elif self._fd in ready and not self._read_once():
                    return
        except RuntimeError:  # the loop is gone: the run already ended
            return
        finally:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._thread_ended)
            os.close(self._wake_r)

    def _thread_ended(self) -> None:
        self._gone = True
        self._answered(len(self._asked))

    def _read_what_is_there(self, poller: select.poll) -> bool:
        """A catch-up: read while stdin has bytes (or its end) ready. False: stdin ended."""
        give_up = time.monotonic() + CATCH_UP_BOUND_S
        while time.monotonic() < give_up:
            if not any(fd == self._fd for fd, _mask in poller.poll(0)):
                return True
            if not self._read_once():
                return False
        return True

    def _read_once(self) -> bool:
        """One read and its hand-off. False: stdin ended (the end handed too)."""
        try:
            chunk = os.read(self._fd, self._chunk)
        except InterruptedError:
            return True
        except OSError:
            chunk = b""
        if chunk:
            lines = self._lines.feed(chunk)
            if lines:
                self._hand(lines)
            return True
        last = self._lines.end()  # a final line without "\n" is still a line
        if last:
            self._hand(last)
        self._hand(None)
        return False

    def _hand(self, lines: list | None) -> None:
        """Give the loop one burst (None: stdin ended), after waiting for backlog room.
        RuntimeError: the loop is gone."""
        if lines is None:
            self._loop.call_soon_threadsafe(self._run.stdin_ended)
        else:
            self._slots.take(len(lines))
            self._loop.call_soon_threadsafe(self._run.feed_lines, lines)


def make_writer(out: BinaryIO, tee_path: str | None, *, loop: asyncio.AbstractEventLoop | None = None
                ) -> tuple[Callable[[bytes], None], Callable[[], None]]:
    """(write, close). With `loop`, the lines written during one pass of the loop are kept
    and go out in one write and one flush at its end (a burst of command results costs one
    write, not one per line, even to an unbuffered stdout); the flush is a callback of the
    next pass, and the loop never waits while a callback is ready, so no line is held while
    the run waits. Without `loop` each line is written and flushed at once."""
    tee = open(tee_path, "wb") if tee_path else None
    held: list[bytes] = []

    def emit(data: bytes) -> None:
        try:
            out.write(data)
            out.flush()
        except BrokenPipeError:
            pass  # the embedder went away; keep the tee and finish the run
        if tee is not None:
            tee.write(data)
            tee.flush()

    def flush() -> None:
        if held:
            data = b"".join(held)
            held.clear()
            emit(data)

    def write(line: bytes) -> None:
        if loop is None:
            emit(line)
            return
        if not held:
            loop.call_soon(flush)
        held.append(line)

    def close() -> None:
        flush()
        if tee is not None:
            tee.close()

    return write, close


async def host(spec: RunSpec, *, stdin: BinaryIO | None, stdout: BinaryIO,
               stderr: Callable[[str], None], attach: Callable[[Run], None] | None = None) -> int:
    """Host one run; `attach(run)` lets a layer above (record/replay) reach the run before it starts."""
    loop = asyncio.get_running_loop()
    write, close = make_writer(stdout, spec.events, loop=loop)
    run = Run(spec, write, stderr=stderr)
    if attach is not None:
        attach(run)
    intake = Intake(loop, run, stdin.fileno()) if stdin is not None else None
    if intake is not None:
        intake.start()
    else:
        run.stdin_ended()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, lambda: asyncio.ensure_future(run.request_stop()))
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    if _EARLY_SIGNALS:  # a signal that came before the loop existed still stops the run
        asyncio.ensure_future(run.request_stop())
    try:
        return await run.execute()
    finally:
        if intake is not None:
            intake.close()
        close()


def run_blocking(spec: RunSpec, hoster: Callable[..., Awaitable[int]] | None = None) -> int:
    """Host `spec` with `hoster` (default `host`, same keywords) and exit with its code."""
    install_early_signal_handlers()

    def to_stderr(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    stdin = sys.stdin.buffer if sys.stdin is not None and not sys.stdin.closed else None
    code = asyncio.run((hoster or host)(spec, stdin=stdin, stdout=sys.stdout.buffer, stderr=to_stderr))
    sys.stdout.flush()
    # The stdin thread may still block in readline; do not wait for it.
    os._exit(code) if os.environ.get("METAHARNESS_HARD_EXIT", "1") == "1" else None
    return code
