"""A harness child process speaking one JSON object per line on its control channel.

What belongs here: spawn in its own process group, read stdout line by line (with the 1-based
transcript line number, for `opaque`/`source_line`), write lines to stdin, keep a tail of stderr
for NO_TERMINAL_RECORD, optionally tee the raw stdout into a transcript file, and stop the whole
process group.

Rule kept: the control channel (the child's stdin and stdout) is one end of a Unix socketpair,
never a pipe: a socket cannot be reopened through `/proc/<pid>/fd/N` (open fails with ENXIO), so
nothing the agent starts can write into the channel or read from it. Every child is spawned
confined and with a parent-death signal (confine.py).
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import socket
from typing import Any, AsyncIterator

from metaharness.adapters.process.confine import prctl_function, confined_argv, confinement, parent_death_signal
from metaharness.protocol.values import Exited, Signaled, UnknownTermination
from metaharness.protocol.trace import with_trace

STDOUT_LIMIT = 64 * 1024 * 1024  # vendors write large single records (file contents)


def control_socketpair() -> tuple[socket.socket, socket.socket]:
    """(ours, the child's): a connected AF_UNIX stream pair; the child's end is inheritable."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs.set_inheritable(True)
    return ours, theirs


class ChannelWriter:
    """The writing half of a socket channel with the StreamWriter calls the adapters use;
    `close()` half-closes (the child reads end of input, its output still comes)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._closed = False

    def write(self, data: bytes) -> None:
        if self._closed:
            raise BrokenPipeError("the control channel's writing half is closed")
        self._writer.write(data)

    async def drain(self) -> None:
        await self._writer.drain()

    def is_closing(self) -> bool:
        return self._closed or self._writer.is_closing()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._writer.can_write_eof():
                self._writer.write_eof()
            else:
                self._writer.close()
        except (OSError, RuntimeError):
            pass

    async def wait_closed(self) -> None:
        return None


async def open_channel(ours: socket.socket) -> tuple[asyncio.StreamReader, ChannelWriter]:
    reader, writer = await asyncio.open_unix_connection(sock=ours, limit=STDOUT_LIMIT)
    return reader, ChannelWriter(writer)


async def spawn_on_channel(argv: list[str], *, env: dict[str, str] | None, cwd: str | None,
                           stderr: Any = asyncio.subprocess.PIPE
                           ) -> tuple[asyncio.subprocess.Process, asyncio.StreamReader, ChannelWriter]:
    """Spawn `argv` (confined where possible) with a socketpair as its stdin and stdout, in
    its own process group, with a parent-death signal, the run's W3C trace context (TRACEPARENT)
    in its environment when one is in force. Returns (process, reader, writer)."""
    prctl_function()  # resolved here, so the preexec_fn only calls it
    ours, theirs = control_socketpair()
    try:
        proc = await asyncio.create_subprocess_exec(
            *confined_argv(argv), stdin=theirs.fileno(), stdout=theirs.fileno(), stderr=stderr,
            env=with_trace(env), cwd=cwd, start_new_session=True, preexec_fn=parent_death_signal,
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    reader, writer = await open_channel(ours)
    return proc, reader, writer


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
        self._out: asyncio.StreamReader | None = None  # the child's stdout (our end of the socket)
        self._in: ChannelWriter | None = None  # the child's stdin

    async def spawn(self) -> None:
        # Its own process group (a halt reaches every descendant), a socketpair for the channel.
        self.proc, self._out, self._in = await spawn_on_channel(self.argv, env=self.env, cwd=self.cwd)
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
        assert self._out is not None
        number = 0
        while True:
            try:
                raw = await self._out.readline()
            except (asyncio.LimitOverrunError, ValueError):
                raw = await self._out.read(STDOUT_LIMIT)
            except OSError:
                break
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
        if self._in is None or self.stdin_closed or self._in.is_closing():
            raise BrokenPipeError("the harness's stdin is closed")
        if self.proc is not None and self.proc.returncode is not None:
            raise BrokenPipeError("the harness has exited")
        self._in.write(data if data.endswith(b"\n") else data + b"\n")
        if self._in.is_closing():  # a write to a dead peer does not fail: the transport closes under it
            raise BrokenPipeError("the harness's channel closed under the write")

    async def drain(self) -> None:
        if self._in is not None and not self.stdin_closed:
            try:
                await self._in.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass

    def close_stdin(self) -> None:
        if self._in is not None and not self.stdin_closed:
            self.stdin_closed = True
            self._in.close()

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
        # A confined child is its namespace's init, which ignores SIGTERM from outside: stop it for good.
        self.kill_group(signal.SIGKILL if confinement()[0] else signal.SIGTERM)
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
