"""Hosting a run in this process: stdin lines in, event lines out, signals.

`run_blocking(spec)` is what `metaharness run` does: it reads command lines from
stdin on the run's loop (`Intake`: a chunk per readiness, bounded, so a flood neither starves
the run nor grows its memory; caught up before the wind-up, so a line written before the end
is answered; works for pipes, sockets, files, ttys and a closed stdin alike), writes every
event line to stdout (and to `--events FILE`), turns SIGINT/SIGTERM into a wind-up that
still writes `stream.closed`, and returns the exit code.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import stat
import sys
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
    """stdin → command lines for the run, with back-pressure, read on the run's own loop.

    Each time stdin is readable one chunk is read, split into lines and handed to the run as
    one burst (`Run.feed_lines`); the command worker decodes each line as it takes it, in
    time slices that yield to the loop (`CommandQueue.work`). No thread: a flood costs no
    hand-off between threads, and a read never waits, since it follows readiness — a pipe
    or a socket is also made non-blocking for the run (restored at `close`). A stdin the
    loop cannot watch (a regular file, /dev/null: their reads never wait) is read a chunk per
    loop pass instead. The lines of a burst hold backlog slots until the worker takes the
    burst (`Intake.taken`); with BACKLOG lines held reading stops, so the OS pipe fills and
    the embedder's writes block. Memory is bounded by BACKLOG lines plus one chunk's, each
    at most LINE_LIMIT.

    Before the run winds up it asks the intake to catch up (`Intake.catch_up`): a line the
    embedder wrote before the end is answered, even when the run meets the end (the child's
    death, a signal) before the loop came round to reading it. It reads whatever stdin holds
    right then (bounded by CATCH_UP_BOUND_S: a writer that never stops cannot hold the end),
    waiting for the worker whenever the backlog is full."""

    def __init__(self, loop: asyncio.AbstractEventLoop, run: Run, fd: int, backlog: int = BACKLOG,
                 chunk: int = READ_CHUNK) -> None:
        self._loop, self._run, self._fd, self._chunk, self._bound = loop, run, fd, chunk, backlog
        self._lines = _Lines()
        self._held = 0  # lines handed and not yet taken by the worker
        self._watching = False  # the loop calls `_readable` when stdin is
        self._pollable = True  # False: the loop cannot watch this stdin; it is read a chunk a pass
        self._ended = False  # stdin's end was read, or the run is over
        self._was_blocking: bool | None = None  # a pipe's or socket's mode before the run made it non-blocking
        run.attach(self)

    def start(self) -> None:
        mode = os.fstat(self._fd).st_mode
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            self._was_blocking = os.get_blocking(self._fd)
            os.set_blocking(self._fd, False)
        self._watch()

    def taken(self, lines: int) -> None:
        """The worker took a burst: its backlog slots are free (reading resumes below the bound)."""
        self._held -= lines
        if not self._ended and self._held < self._bound:
            self._watch()

    async def catch_up(self) -> None:
        """Return once what stdin holds right now was handed to the run (bounded)."""
        give_up = time.monotonic() + CATCH_UP_BOUND_S
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        while not self._ended and time.monotonic() < give_up:
            if self._held >= self._bound:  # the worker must take some first
                await asyncio.sleep(0)
                continue
            try:
                if not poller.poll(0):
                    return
            except OSError:
                return
            self._read_once()
            await asyncio.sleep(0)

    def close(self) -> None:
        """The run is over: stop reading (and give stdin back its blocking mode)."""
        self._ended = True
        self._unwatch()
        if self._was_blocking is not None:
            with contextlib.suppress(OSError):
                os.set_blocking(self._fd, self._was_blocking)
            self._was_blocking = None

    # --- reading ---------------------------------------------------------------------------
    def _watch(self) -> None:
        if self._watching:
            return
        self._watching = True
        if self._pollable:
            try:
                self._loop.add_reader(self._fd, self._readable)
                return
            except PermissionError:  # epoll refuses a regular file: its reads never wait
                self._pollable = False
        self._loop.call_soon(self._readable)

    def _unwatch(self) -> None:
        if self._watching:
            self._watching = False
            if self._pollable:
                self._loop.remove_reader(self._fd)

    def _readable(self) -> None:
        if not self._watching:  # a pass scheduled before reading stopped
            return
        if not self._read_once() or self._held >= self._bound:
            self._unwatch()
        elif not self._pollable:
            self._loop.call_soon(self._readable)

    def _read_once(self) -> bool:
        """One read and its hand-off. False: stdin ended (the end handed too)."""
        try:
            chunk = os.read(self._fd, self._chunk)
        except (BlockingIOError, InterruptedError):
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
        self._ended = True
        self._run.stdin_ended()
        return False

    def _hand(self, lines: list) -> None:
        self._held += len(lines)
        self._run.feed_lines(lines)


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

    def write(line: bytes) -> None:  # once per line: kept to the least
        if not held:
            loop.call_soon(flush)  # type: ignore[union-attr]
        held.append(line)

    def close() -> None:
        flush()
        if tee is not None:
            tee.close()

    return (emit if loop is None else write), close


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
    # Exit at once: stdout is flushed, and a thread a library left behind must not hold the exit.
    os._exit(code) if os.environ.get("METAHARNESS_HARD_EXIT", "1") == "1" else None
    return code
