"""Hosting a run in this process: stdin lines in, event lines out, signals.

`run_blocking(spec)` is what `metaharness run` does: it reads command lines from
stdin on a thread that also decodes them (`Intake`: off the loop, bounded, so a flood
neither starves the run nor grows its memory; works for pipes, sockets, files, ttys and
a closed stdin alike), writes
every event line to stdout (and to `--events FILE`), turns SIGINT/SIGTERM into a
wind-up that still writes `stream.closed`, and returns the exit code.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from typing import Awaitable, BinaryIO, Callable

from . import EARLY_SIGNALS as _EARLY_SIGNALS, install_early_signal_handlers
from .loop import Run
from .spec import RunSpec


LINE_LIMIT = 16 * 1024 * 1024  # a longer stdin line is refused unread: memory stays bounded
BACKLOG = 1024  # lines handed to the worker and not yet taken; at the bound stdin is not read
READ_CHUNK = 64 * 1024
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


class Intake:
    """stdin → command lines for the run, with back-pressure.

    A thread reads stdin in chunks (the read releases the GIL), splits the lines, and
    hands each chunk's lines to the loop as one burst (`Run.feed_lines`); the command worker
    decodes each line as it takes it, in time slices that yield to the loop
    (`Run._command_worker`). The lines of a burst hold backlog slots until the worker takes
    the burst (`Run.on_command_taken`); with BACKLOG lines held the thread stops reading, so
    the OS pipe fills and the embedder's writes block. Memory is bounded by BACKLOG lines
    plus one chunk's, each at most LINE_LIMIT; a longer line is refused MALFORMED under `-`
    and skipped without being kept."""

    def __init__(self, loop: asyncio.AbstractEventLoop, run: Run, fd: int, backlog: int = BACKLOG,
                 chunk: int = READ_CHUNK) -> None:
        self._loop, self._run, self._fd, self._chunk = loop, run, fd, chunk
        self._slots = _Slots(backlog)
        run.on_command_taken = self._slots.free

    def start(self) -> None:
        threading.Thread(target=self._pump, daemon=True, name="metaharness-stdin").start()

    def _pump(self) -> None:
        from metaharness.protocol.decode import CommandRefusal

        too_long = CommandRefusal("-", TOO_LONG)
        carry = bytearray()  # the line in progress (no "\n" seen yet)
        skipping = False  # inside a line longer than LINE_LIMIT: drop its bytes up to its newline
        while True:
            try:
                chunk = os.read(self._fd, self._chunk)
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                break
            lines: list = chunk.split(b"\n")
            tail = lines.pop()  # after the last "\n" (all of it when there is none)
            if lines:
                if skipping:  # the end of the long line: nothing of it was kept
                    skipping = False
                    del lines[0]
                elif carry:
                    carry += lines[0]
                    lines[0], carry = bytes(carry), bytearray()
                if lines and max(map(len, lines)) > LINE_LIMIT:
                    lines = [too_long if len(line) > LINE_LIMIT else line for line in lines]
            if not skipping:
                carry += tail
                if len(carry) > LINE_LIMIT:
                    lines.append(too_long)
                    carry, skipping = bytearray(), True
            if lines and not self._hand(lines):
                return
        if carry and not skipping:  # a final line without "\n" is still a line
            if not self._hand([bytes(carry)]):
                return
        self._hand(None)

    def _hand(self, lines: list | None) -> bool:
        """Give the loop one burst (None: stdin ended), after waiting for backlog room.
        False: the loop is gone (the run already ended)."""
        try:
            if lines is None:
                self._loop.call_soon_threadsafe(self._run.stdin_ended)
            else:
                self._slots.take(len(lines))
                self._loop.call_soon_threadsafe(self._run.feed_lines, lines)
            return True
        except RuntimeError:
            return False


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
    if stdin is not None:
        Intake(loop, run, stdin.fileno()).start()
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
