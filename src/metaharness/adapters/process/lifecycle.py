"""One harness child's whole life, kept once for every adapter: spawn, read, halt, kill, wait,
the services it is pointed at, the files written for it, retain and clean-up.

What belongs here: the order of a child's end and the things that must happen exactly once in it.
What does not: any vendor's protocol — how a record is read, how a call is answered, how a turn is
stopped are the adapter's (it gets the channel from `spawn` and hands its reading loop to `read`).

Rules kept:
* the child is spawned on a socketpair channel, confined, in a session of its own (`channel.py`);
  its stderr goes to the scratch's `stderr.log`, or, for a child without a scratch, to a pipe whose
  last lines are kept — either way `stderr_tail` names the child's own last words;
* every file opened for the run (`open`) is closed and every loopback service it was pointed at
  (`serve`) is stopped once, at the end of `wait` or `kill`, the rest even when one fails;
* `wait` returns once the output was read to its end, the child was reaped and everything it left
  in process groups of its own was killed; the adapter's own end of the session (`ending`, handed
  over once at its start) runs between the reaping and the release; the answer is kept, so a
  second `wait` says the same;
* a child that `dies_with_its_output` (an ACP agent) and whose output ended while its channel's
  input was still open died: its group is killed at once, and `died` says so;
* a stop gives the child `grace` seconds to exit by itself (the adapter closed its input first),
  then kills its whole tree and the groups collected earlier (`halt`);
* the child is alive until it is known to have exited, its output ended, or the RPC channel the
  adapter spoke to it over (`channel`, where it has one) no longer reaches it (`alive`);
* `--retain-dir` keeps what the adapter said it keeps (`keep`), copied once the stream closed
  (`retain`);
* the scratch root dies with the run (`cleanup`), unless the operator chose its base.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import shutil
import signal
from pathlib import Path
from typing import IO, Any, AsyncIterator, Awaitable, Callable, Coroutine

from metaharness.adapters.process.channel import ChannelWriter, read_lines, spawn_on_channel
from metaharness.adapters.process.child import stderr_file_tail
from metaharness.adapters.process.confine import confinement
from metaharness.adapters.process.scratch import Scratch, remove_scratch
from metaharness.adapters.process.tree import (descendant_groups, is_gone, kill_group, kill_groups, kill_tree,
                                               wait_or_kill)
from metaharness.protocol.values import Exited, ProcessTermination, Signaled, UnknownTermination


class Child:
    """One harness child, from its spawn to the removal of its scratch root."""

    def __init__(self, scratch: Scratch | None = None, *, transcript: Path | str | None = None,
                 stderr_file: bool = True) -> None:
        self.scratch = scratch
        self.proc: asyncio.subprocess.Process | None = None
        self.out: asyncio.StreamReader | None = None  # the child's stdout: our end of the channel
        self.into: ChannelWriter | None = None  # the child's stdin
        self.output_ended = False
        self.termination: ProcessTermination | None = None
        self._files: list[IO[Any]] = []
        self._kept: list[tuple[Path | str, str]] = []  # what --retain-dir keeps (`keep`)
        self._services: list[Any] = []
        self._sent: IO[Any] | None = None  # the scratch's sent.jsonl, opened at the first line sent
        self._released = False
        # The JSON-RPC channel over the child's stdio, once the adapter made one: `alive` asks it too.
        self.channel: Any = None
        # The adapter's own end of the session, handed over once at its start: what it still writes
        # (a `session.ended` assembled from what it saw) once the child was reaped (`wait`).
        self.ending: Callable[[], Awaitable[None]] | None = None
        # True for an agent whose output ending while its channel's input is still open means it died
        # (ACP: `wait` then kills its group at once and says so in `died`).
        self.dies_with_its_output = False
        self.died = False
        self._reader: asyncio.Task | None = None
        self._stderr_file = stderr_file and scratch is not None
        self._stderr_task: asyncio.Task | None = None
        self._stderr_lines: collections.deque[str] = collections.deque(maxlen=40)
        # `lines` keeps what it reads here; an adapter whose protocol reads the channel keeps its own.
        self._transcript = self.open(transcript, "ab", buffering=0) if transcript is not None else None

    # --- what the run's child is given ------------------------------------------------------
    def open(self, path: Path | str, mode: str = "wb", **options: Any) -> IO[Any]:
        """A file written for the run (a transcript, the lines sent), closed at the end."""
        handle = open(path, mode, **options)
        self._files.append(handle)
        return handle

    def record_sent(self, message: dict) -> None:
        """Keep one line metaharness wrote to the child (compact JSON) in the scratch's `sent.jsonl`,
        beside the transcript of what the child wrote: the answers sent are evidence too. A line
        written after the release is not kept (the run's files are closed)."""
        if self.scratch is None or self._released:
            return
        if self._sent is None:
            self._sent = self.open(self.scratch.sent, "w")
        self._sent.write(json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._sent.flush()

    def serve(self, service: Any) -> Any:
        """A loopback service (model server, credential proxy, relay) stopped at the end."""
        self._services.append(service)
        return service

    async def loopback(self, scenario: Any, *, workdir: str | None, on_failure: Callable, meter: Any,
                       expect_key: str | None = None, log: bool = True) -> str:
        """Serve `scenario` from a per-run loopback model server; its URL (its requests logged in
        the scratch's `loopback.jsonl` with `log`)."""
        from metaharness.loopback.server import LoopbackServer

        log_path = str(self.scratch / "loopback.jsonl") if log and self.scratch is not None else None
        server = self.serve(LoopbackServer(scenario, workdir=workdir, stderr=None, on_failure=on_failure,
                                           expect_key=expect_key, log_path=log_path, meter=meter))
        return await server.start()

    async def proxy(self, upstream: str, real_key: str, *, placeholder: str, wire: str, on_refused: Callable,
                    on_failure: Callable, meter: Any) -> Any:
        """A per-run credential proxy holding the real key for `upstream` (started; the proxy)."""
        from metaharness.loopback.proxy import CredentialProxy

        proxy = self.serve(CredentialProxy(upstream, real_key, placeholder=placeholder, wire=wire,
                                           on_refused=on_refused, on_failure=on_failure, meter=meter))
        await proxy.start()
        return proxy

    # --- spawn and read -----------------------------------------------------------------------
    async def spawn(self, argv: list[str], *, env: dict[str, str], cwd: str | None
                    ) -> tuple[asyncio.StreamReader, ChannelWriter]:
        """Start the child on its channel; (its stdout, its stdin)."""
        stderr: Any = self.open(self.scratch.stderr) if self._stderr_file else asyncio.subprocess.PIPE
        self.proc, self.out, self.into = await spawn_on_channel(argv, env=env, cwd=cwd, stderr=stderr)
        if not self._stderr_file:
            self._stderr_task = asyncio.get_running_loop().create_task(self._keep_stderr())
        return self.out, self.into

    def read(self, reading: Coroutine[Any, Any, None]) -> None:
        """Run the adapter's reading loop; `wait` and `kill` return only after it has ended."""
        self._reader = asyncio.get_running_loop().create_task(self._reading(reading))

    async def _reading(self, reading: Coroutine[Any, Any, None]) -> None:
        try:
            await reading
        finally:
            self.output_ended = True

    async def lines(self) -> AsyncIterator[tuple[int, bytes]]:
        """(1-based line number, the raw line as read) until the child's output ends; each line is
        kept in the transcript first. `output_ended` is set before the loop over them ends."""
        assert self.out is not None
        try:
            async for numbered in read_lines(self.out, self._transcript):
                yield numbered
        finally:
            self.output_ended = True

    async def _keep_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        async for raw in self.proc.stderr:
            self._stderr_lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    # --- writing (for a protocol that writes lines itself; a JSON-RPC channel writes to `into`) ----
    def write(self, data: bytes) -> None:
        """Write one line (buffered; `drain` flushes it). BrokenPipeError once the child cannot hear."""
        if self.into is None or self.into.is_closing():
            raise BrokenPipeError("the harness's stdin is closed")
        if self.proc is not None and self.proc.returncode is not None:
            raise BrokenPipeError("the harness has exited")
        self.into.write(data if data.endswith(b"\n") else data + b"\n")
        if self.into.is_closing():  # a write to a dead peer does not fail: the transport closes under it
            raise BrokenPipeError("the harness's channel closed under the write")

    async def drain(self) -> None:
        if self.into is not None and not self.into.is_closing():
            try:
                await self.into.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass

    @property
    def stdin_closed(self) -> bool:
        return self.into is None or self.into.is_closing()

    def close_stdin(self) -> None:
        """End the child's input (its output still comes)."""
        if self.into is not None:
            self.into.close()

    def stderr_tail(self) -> str:
        if self._stderr_file:
            return stderr_file_tail(self.scratch.stderr)
        return "\n".join(self._stderr_lines)

    # --- state ----------------------------------------------------------------------------------
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def alive(self) -> bool:
        """False once the child is known to have exited or been killed, or its output ended, or the
        RPC channel it was given (`channel`) no longer reaches it."""
        if self.channel is not None and not self.channel.reaches_the_peer():
            return False
        return self.proc is None or not (self.output_ended or is_gone(self.proc))

    def descendant_groups(self) -> set[int]:
        """The process groups below the running child (collected now, while they are its own)."""
        return descendant_groups(self.proc.pid) if self.running() else set()

    def kill_descendants(self, groups: set[int]) -> None:
        """Kill `groups` and the process groups below the child now, never the child's own: what a
        turn started (its commands) goes, the child stays."""
        kill_groups(groups | self.descendant_groups(), spare={self.proc.pid} if self.proc is not None else set())

    # --- the end --------------------------------------------------------------------------------
    async def halt(self, grace: float, groups: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        """The child's input is closed: give it `grace` seconds, then kill its tree and `groups`."""
        if self.running():
            await wait_or_kill(self.proc, grace, groups=groups)
        else:
            kill_groups(set(groups))

    async def terminate(self, grace: float) -> None:
        """Stop at once: close the input, signal the group (SIGTERM; SIGKILL for a confined child,
        its namespace's init, which ignores SIGTERM from outside), SIGKILL after `grace`."""
        self.close_stdin()
        if not self.running():
            return
        kill_groups({self.proc.pid}, sig=signal.SIGKILL if confinement()[0] else signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), grace)
        except asyncio.TimeoutError:
            kill_tree(self.proc.pid)

    async def kill(self) -> None:
        """Stop now (a refused start): kill the tree — also when the child exited first, as its
        group outlives it — reap, let the reader end, release."""
        if self.proc is not None:
            kill_tree(self.proc.pid)
            await self.proc.wait()
        await self.output()
        await self.release()

    async def output(self) -> None:
        """Until the adapter's reading loop has ended."""
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)

    async def wait(self) -> ProcessTermination:
        """Until the output ended and the child was reaped, its tree swept; then the adapter's end
        of the session (`ending`), then the release. The termination, the same on every call."""
        if self.termination is not None:
            return self.termination
        if self.proc is None:
            await self.release()
            return UnknownTermination()
        await self.output()
        if self.dies_with_its_output:
            # The output ended: either the adapter closed the input (the agent exits at once) or it died.
            self.died = self.channel is None or not self.channel.stdin_closed
            if self.died and self.running():
                kill_group(self.proc.pid)
        code = await self.proc.wait()
        kill_tree(self.proc.pid)  # tool commands may run in groups of their own
        if self._stderr_task is not None:
            try:
                await asyncio.wait_for(self._stderr_task, 2.0)
            except (asyncio.TimeoutError, Exception):
                self._stderr_task.cancel()
        if self.ending is not None:
            await self.ending()
        await self.release()
        self.termination = Exited(code=code) if code >= 0 else Signaled(signal=-code)
        return self.termination

    async def release(self) -> None:
        """Close the run's files and stop its services, once; the rest even when one fails."""
        self._released = True
        files, self._files = self._files, []
        for handle in files:
            try:
                handle.close()
            except OSError:
                pass
        services, self._services = self._services, []
        for service in services:
            try:
                await service.stop()
            except Exception:
                pass

    # --- after the stream closed ------------------------------------------------------------
    def keep(self, source: Path | str, name: str) -> None:
        """`--retain-dir` keeps `source` (a file, or a directory as a tree) as `name`."""
        self._kept.append((source, name))

    def retain(self, directory: str) -> list[str]:
        """Copy each kept (source, name) into `directory`, in the order they were kept; one message
        per failure. A source that does not exist is skipped."""
        failures: list[str] = []
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            return [f"could not make {directory}: {exc.strerror or exc}"]
        for source, name in self._kept:
            target = os.path.join(directory, name)
            try:
                if os.path.isdir(source):
                    shutil.copytree(source, target, dirs_exist_ok=True)
                elif os.path.exists(source):
                    shutil.copy2(source, target)
            except OSError as exc:
                failures.append(f"could not copy {source} into {directory}: {exc.strerror or exc}")
        return failures

    def cleanup(self) -> None:
        if self.scratch is not None:
            remove_scratch(self.scratch.root)
