"""A harness child process speaking one JSON object per line on stdio.

Shared by every adapter: spawn in its own process group, read stdout line by line
(with the 1-based transcript line number, for `opaque`/`source_line`), write lines
to stdin, keep a tail of stderr for NO_TERMINAL_RECORD, optionally tee the raw
stdout into a transcript file, and stop the whole process group.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
from typing import AsyncIterator

from metaharness.protocol.values import Exited, Signaled, UnknownTermination

STDOUT_LIMIT = 64 * 1024 * 1024  # vendors write large single records (file contents)


class ChildProcess:
    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
                 transcript_path: str | None = None) -> None:
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.transcript_path = transcript_path
        self.proc: asyncio.subprocess.Process | None = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self._stderr_task: asyncio.Task | None = None
        self._transcript = None
        self.stdin_closed = False

    async def spawn(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,  # its own process group, so a halt reaches every descendant
            limit=STDOUT_LIMIT,
        )
        if self.transcript_path:
            self._transcript = open(self.transcript_path, "wb")
        self._stderr_task = asyncio.create_task(self._read_stderr())

    async def _read_stderr(self) -> None:
        assert self.proc and self.proc.stderr
        async for raw in self.proc.stderr:
            self._stderr_tail.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr_tail)

    async def lines(self) -> AsyncIterator[tuple[int, bytes]]:
        """(1-based line number, raw line without its terminator) until EOF."""
        assert self.proc and self.proc.stdout
        number = 0
        while True:
            try:
                raw = await self.proc.stdout.readline()
            except (asyncio.LimitOverrunError, ValueError):
                raw = await self.proc.stdout.read(STDOUT_LIMIT)
            if not raw:
                break
            number += 1
            if self._transcript is not None:
                self._transcript.write(raw if raw.endswith(b"\n") else raw + b"\n")
                self._transcript.flush()
            line = raw.rstrip(b"\n")
            if line.endswith(b"\r"):
                line = line[:-1]
            yield number, line

    def write(self, data: bytes) -> None:
        """Write one line (synchronously buffered; the loop drains it)."""
        if self.proc is None or self.proc.stdin is None or self.stdin_closed:
            raise BrokenPipeError("the harness's stdin is closed")
        if self.proc.stdin.is_closing():
            raise BrokenPipeError("the harness's stdin is closed")
        self.proc.stdin.write(data if data.endswith(b"\n") else data + b"\n")

    async def drain(self) -> None:
        if self.proc and self.proc.stdin and not self.stdin_closed:
            try:
                await self.proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass

    def close_stdin(self) -> None:
        if self.proc and self.proc.stdin and not self.stdin_closed:
            self.stdin_closed = True
            try:
                self.proc.stdin.close()
            except Exception:
                pass

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                pass

    async def terminate(self, grace: float = 2.0) -> None:
        """Close stdin, SIGTERM the group, SIGKILL it after `grace` seconds."""
        self.close_stdin()
        if self.proc is None or self.proc.returncode is not None:
            return
        self.kill_group(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), grace)
        except asyncio.TimeoutError:
            self.kill_group(signal.SIGKILL)

    async def wait(self):
        if self.proc is None:
            return UnknownTermination()
        code = await self.proc.wait()
        if self._stderr_task is not None:
            try:
                await asyncio.wait_for(self._stderr_task, 2)
            except (asyncio.TimeoutError, Exception):
                pass
        if self._transcript is not None:
            self._transcript.close()
            self._transcript = None
        if code < 0:
            return Signaled(signal=-code)
        return Exited(code=code)
