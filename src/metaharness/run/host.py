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
BACKLOG = 1024  # decoded commands waiting for the worker; at the bound stdin is not read
READ_CHUNK = 64 * 1024
TOO_LONG = f"the line is longer than {LINE_LIMIT} bytes; it was not read"


class Intake:
    """stdin → command lines for the run, with back-pressure.

    A thread reads stdin in chunks (the read releases the GIL) and splits the lines, and
    hands each chunk's lines to the loop in one call; the command worker decodes each line
    as it takes it, in time slices that yield to the loop (`Run._command_worker`). Every
    line holds one of BACKLOG slots until the worker takes it (`Run.on_command_taken`);
    with every slot held the thread stops reading, so the OS pipe fills and the embedder's
    writes block. Memory is bounded by BACKLOG lines plus one line (LINE_LIMIT); a longer
    line is refused MALFORMED under `-` and skipped without being kept."""

    def __init__(self, loop: asyncio.AbstractEventLoop, run: Run, fd: int, backlog: int = BACKLOG) -> None:
        self._loop, self._run, self._fd = loop, run, fd
        self._slots = threading.Semaphore(backlog)
        run.on_command_taken = self._slots.release

    def start(self) -> None:
        threading.Thread(target=self._pump, daemon=True, name="metaharness-stdin").start()

    def _pump(self) -> None:
        from metaharness.protocol.decode import CommandRefusal

        carry = bytearray()  # the line in progress (no "\n" seen yet)
        skipping = False  # inside a line longer than LINE_LIMIT: drop its bytes up to its newline
        while True:
            try:
                chunk = os.read(self._fd, READ_CHUNK)
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                break
            lines = chunk.split(b"\n")
            tail = lines.pop()  # after the last "\n" (all of it when there is none)
            batch: list | None = []
            for index, line in enumerate(lines):
                if index == 0:
                    if skipping:
                        skipping = False  # the end of the long line: nothing of it was kept
                        continue
                    if carry:
                        carry += line
                        line, carry = bytes(carry), bytearray()
                # Decoded by the worker as it takes the line, in its time slices (one CPU-bound
                # thread, so no GIL contention delays the loop's timers).
                batch = self._slot(batch)
                if batch is None:
                    return
                batch.append(CommandRefusal("-", TOO_LONG) if len(line) > LINE_LIMIT else line)
            if not skipping:
                carry += tail
                if len(carry) > LINE_LIMIT:
                    batch = self._slot(batch)
                    if batch is None:
                        return
                    batch.append(CommandRefusal("-", TOO_LONG))
                    carry, skipping = bytearray(), True
            if batch and not self._hand(batch):
                return
        if carry and not skipping:  # a final line without "\n" is still a line
            self._slots.acquire()
            if not self._hand([bytes(carry)]):
                return
        self._hand(None)

    def _slot(self, batch: list) -> list | None:
        """Take a backlog slot for one more command; when none is free, hand over what this
        chunk decoded so far (so the worker can free slots), then wait. None: the loop is gone."""
        if self._slots.acquire(blocking=False):
            return batch
        if batch and not self._hand(batch):
            return None
        self._slots.acquire()
        return []

    def _hand(self, batch) -> bool:
        try:
            if batch is None:
                self._loop.call_soon_threadsafe(self._run.stdin_ended)
            else:
                self._loop.call_soon_threadsafe(self._run.feed_lines, batch)
            return True
        except RuntimeError:
            return False  # the loop is gone: the run already ended


def make_writer(out: BinaryIO, tee_path: str | None, *, loop: asyncio.AbstractEventLoop | None = None
                ) -> tuple[Callable[[bytes], None], Callable[[], None]]:
    """(write, close). With `loop`, the lines written during one pass of the loop go out in
    one flush at its end (a burst of command results costs one write, not one per line);
    without it each line is flushed at once."""
    tee = open(tee_path, "wb") if tee_path else None
    flush_due = False

    def flush() -> None:
        nonlocal flush_due
        flush_due = False
        try:
            out.flush()
        except BrokenPipeError:
            pass  # the embedder went away; keep the tee and finish the run
        if tee is not None:
            tee.flush()

    def write(line: bytes) -> None:
        nonlocal flush_due
        try:
            out.write(line)
        except BrokenPipeError:
            pass
        if tee is not None:
            tee.write(line)
        if loop is None:
            flush()
        elif not flush_due:
            flush_due = True
            loop.call_soon(flush)

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
