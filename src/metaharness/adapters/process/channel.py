"""A harness child process speaking one JSON object per line on its control channel.

What belongs here: the channel itself — the socketpair, its writing half, the reading of its
lines (`read_lines`, the one loop every reader of a child's output runs), and the spawn of a
child on it in its own process group. The child's life after the spawn (stopping, waiting) is
`lifecycle.py`'s.

Rule kept: the control channel (the child's stdin and stdout) is one end of a Unix socketpair,
never a pipe: a socket cannot be reopened through `/proc/<pid>/fd/N` (open fails with ENXIO), so
nothing the agent starts can write into the channel or read from it. Every child is spawned
confined and with a parent-death signal (confine.py).
"""

from __future__ import annotations

import asyncio
import socket
from typing import IO, Any, AsyncIterator

from metaharness.adapters.process.confine import prctl_function, confined_argv, parent_death_signal
from metaharness.protocol.trace import with_trace

STDOUT_LIMIT = 64 * 1024 * 1024  # vendors write large single records (file contents)


async def read_lines(reader: asyncio.StreamReader, transcript: IO[bytes] | None = None, *,
                     flush: bool = False) -> AsyncIterator[tuple[int, bytes]]:
    """(1-based line number, the raw line as read) until the output ends, each kept in
    `transcript` first. A line above STDOUT_LIMIT is cut to what arrived, never fatal; a reset
    channel is the end of the output, as an end of file is."""
    number = 0
    while True:
        try:
            raw = await reader.readline()
        except (asyncio.LimitOverrunError, ValueError):
            raw = await reader.read(STDOUT_LIMIT)
        except OSError:
            return
        if not raw:
            return
        number += 1
        if transcript is not None:
            transcript.write(raw if raw.endswith(b"\n") else raw + b"\n")
            if flush:
                transcript.flush()
        yield number, raw


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
