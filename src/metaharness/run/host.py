"""Hosting a run in this process: stdin lines in, event lines out, signals.

`run_blocking(spec)` is what `metaharness run` does: it reads command lines from
stdin on a thread (works for pipes, files, ttys and a closed stdin alike), writes
every event line to stdout (and to `--events FILE`), turns SIGINT/SIGTERM into a
wind-up that still writes `stream.closed`, and returns the exit code.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from typing import BinaryIO, Callable

from . import EARLY_SIGNALS as _EARLY_SIGNALS, install_early_signal_handlers
from .loop import Run
from .spec import RunSpec


def _stdin_pump(loop: asyncio.AbstractEventLoop, run: Run, stream: BinaryIO) -> None:
    try:
        for raw in iter(stream.readline, b""):
            line = raw[:-1] if raw.endswith(b"\n") else raw
            loop.call_soon_threadsafe(run.feed_line, line)
    except (OSError, ValueError):
        pass
    try:
        loop.call_soon_threadsafe(run.stdin_ended)
    except RuntimeError:
        pass  # the loop is gone: the run already ended


def make_writer(out: BinaryIO, tee_path: str | None) -> tuple[Callable[[bytes], None], Callable[[], None]]:
    tee = open(tee_path, "wb") if tee_path else None

    def write(line: bytes) -> None:
        try:
            out.write(line)
            out.flush()
        except BrokenPipeError:
            pass  # the embedder went away; keep the tee and finish the run
        if tee is not None:
            tee.write(line)
            tee.flush()

    def close() -> None:
        if tee is not None:
            tee.close()

    return write, close


async def host(spec: RunSpec, *, stdin: BinaryIO | None, stdout: BinaryIO,
               stderr: Callable[[str], None]) -> int:
    write, close = make_writer(stdout, spec.events)
    run = Run(spec, write, stderr=stderr)
    loop = asyncio.get_running_loop()
    if stdin is not None:
        threading.Thread(target=_stdin_pump, args=(loop, run, stdin), daemon=True).start()
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


def run_blocking(spec: RunSpec) -> int:
    install_early_signal_handlers()

    def to_stderr(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    stdin = sys.stdin.buffer if sys.stdin is not None and not sys.stdin.closed else None
    code = asyncio.run(host(spec, stdin=stdin, stdout=sys.stdout.buffer, stderr=to_stderr))
    sys.stdout.flush()
    # The stdin thread may still block in readline; do not wait for it.
    os._exit(code) if os.environ.get("METAHARNESS_HARD_EXIT", "1") == "1" else None
    return code
