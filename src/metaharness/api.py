"""The embedder's API: start a run, iterate typed events, decide calls, send commands.

Two transports, one behaviour:

* `start_run(spec)` runs the loop in this process (no extra Python start-up);
* `start_run(spec, subprocess=True)` runs `metaharness run` as a child process and
  speaks the wire to it over its stdin/stdout — one end of a Unix socketpair, not pipes,
  so no process of the same user can reopen the channel through `/proc/<pid>/fd` and
  write commands into it or read events out of it. `control_socketpair()` gives an
  embedder that spawns `metaharness run` itself the same pair.

Both hand back a `RunHandle`. Events arrive as `(Envelope, event)` pairs decoded
from the very bytes the run wrote, so an in-process embedder sees exactly what a
subprocess embedder sees. Commands sent through the handle get ids `c-1`, `c-2`, …
(docs/reference/wire.md).

    run = await start_run(RunSpec(kind="oharness", script="s.json", decisions="ask"))
    async with run:
        async for envelope, event in run:
            if isinstance(event, ToolRequested) and event.decision_required:
                await run.decide(event.call_id, Allow())
    print(run.exit_code)
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from typing import Any, AsyncIterator

import msgspec

from metaharness.protocol.commands import (
    FrameSet,
    Halt,
    Interrupt,
    MessageInject,
    PermissionSet,
    Steer,
    ToolDecide,
)
from metaharness.protocol.decode import decode_event_line, encode_command_line
from metaharness.protocol.values import Decision
from metaharness.run.spec import NEGATED, REPEATABLE, RunSpec

__all__ = ["RunHandle", "control_socketpair", "describe", "start_run", "spec_to_argv"]


def control_socketpair():
    """(yours, its): a connected AF_UNIX stream pair for a `metaharness run` you spawn
    yourself; pass `its.fileno()` as the child's stdin and stdout, close `its` after the
    spawn, and speak the wire on `yours` (`sock.shutdown(socket.SHUT_WR)` ends its input)."""
    from metaharness.adapters.process import control_socketpair as pair

    return pair()


def spec_to_argv(spec: RunSpec) -> list[str]:
    """The `metaharness run` command line that means the same as `spec`."""
    defaults = RunSpec(kind=spec.kind)
    argv = ["run", spec.kind]
    flag_of = {field: flag for flag, field in REPEATABLE.items()}
    for field in dataclasses.fields(RunSpec):
        if field.name == "kind" or field.metadata.get("library_only"):
            continue
        value = getattr(spec, field.name)
        if value == getattr(defaults, field.name):
            continue
        flag = "--" + flag_of.get(field.name, field.name.replace("_", "-"))
        if isinstance(value, bool):
            argv.append(flag if value else NEGATED[field.name])
        elif isinstance(value, list):
            for item in value:
                argv += [flag, str(item)]
        else:
            argv += [flag, str(value)]
    return argv


class RunHandle:
    """A run in progress. Iterate it for events; `exit_code` is set when it ends."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue = asyncio.Queue()
        self._counter = 0
        self.exit_code: int | None = None
        self.lines: list[bytes] = []  # every event line, as written

    # --- commands -------------------------------------------------------------
    def _next_id(self) -> str:
        self._counter += 1
        return f"c-{self._counter}"

    async def send(self, command: Any) -> str:
        """Send a typed command (its id is replaced by the next `c-N`); returns the id."""
        command = msgspec.structs.replace(command, id=self._next_id())
        await self._send(command)
        return command.id

    async def decide(self, call_id: str, decision: Decision) -> str:
        """Answer a pending call (`tool.decide`) with `Allow()`, `Deny(reason=…)`, `Replace(input=…)` or `Abstain()`."""
        return await self.send(ToolDecide(id="", call_id=call_id, decision=decision))

    async def set_frame(self, frame: dict) -> str:
        """Replace the frame in force from the next turn or step boundary (`frame.set`)."""
        return await self.send(FrameSet(id="", frame=frame))

    async def inject(self, text: str) -> str:
        """Advisory text for the model at the next turn (`message.inject`); it enforces nothing."""
        return await self.send(MessageInject(id="", text=text))

    async def steer(self, text: str) -> str:
        """Text into the running turn (`steer`); refused TOO_LATE when no turn is running."""
        return await self.send(Steer(id="", text=text))

    async def set_posture(self, posture: str) -> str:
        """Change the harness's permission posture, in its own words (`permission.set`)."""
        return await self.send(PermissionSet(id="", posture=posture))

    async def interrupt(self, reason: str) -> str:
        """Stop the running turn (`interrupt`); pending calls are denied first."""
        return await self.send(Interrupt(id="", reason=reason))

    async def halt(self, reason: str) -> str:
        """Stop the run (`halt`); its result is the line just before `stream.closed`."""
        return await self.send(Halt(id="", reason=reason))

    async def _send(self, command: Any) -> None:  # pragma: no cover - per transport
        raise NotImplementedError

    def report_step_left(self, step: Any, outcome: Any) -> None:
        """Write `step.left{step, outcome}`: how the embedder judged a step (in-process runs only)."""
        raise NotImplementedError("step.left can be reported only on an in-process run")

    async def close_input(self) -> None:
        """End of input: no more commands will come (ends a --keep-open run at its boundary)."""

    # --- events ---------------------------------------------------------------
    def _line(self, line: bytes) -> None:
        self.lines.append(line)
        self._queue.put_nowait(decode_event_line(line.rstrip(b"\n")))

    def __aiter__(self) -> AsyncIterator[tuple[Any, Any]]:
        return self._events()

    async def _events(self):
        while True:
            item = await self._queue.get()
            if item is None:
                return
            yield item

    async def wait(self) -> int:  # pragma: no cover - per transport
        """Wait for the run to end; returns its exit code (also left in `exit_code`)."""
        raise NotImplementedError

    async def __aenter__(self) -> "RunHandle":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close_input()
        await self.wait()


class _InProcessRun(RunHandle):
    def __init__(self, spec: RunSpec, hosting: Any = None) -> None:
        super().__init__()
        from metaharness.run.loop import Run

        from metaharness.run.host import make_writer

        self.stderr: list[str] = []
        self._tee, self._close_tee = make_writer(_Discard(), spec.events)  # --events FILE, as the CLI does

        def write(line: bytes) -> None:
            self._tee(line)
            self._line(line)

        self._hosting = hosting  # a --record/--replay run: the cassette's service (metaharness.replay)
        self._run = Run(hosting.spec if hosting else spec, write, stderr=self.stderr.append)
        if hosting is not None:
            hosting.attach(self._run)
        self._task = asyncio.ensure_future(self._execute())

    async def _execute(self) -> None:
        hosting = self._hosting
        try:
            if hosting is not None and hosting.refusal is not None:
                from metaharness.run.loop import RunRefused

                self.exit_code = self._run.refuse_start(RunRefused(hosting.refusal))
            else:
                code = await self._run.execute()
                self.exit_code = hosting.exit_code(code) if hosting is not None else code
        finally:
            if hosting is not None:
                await hosting.close(self.stderr.append)
            self._close_tee()
            self._queue.put_nowait(None)

    async def _send(self, command: Any) -> None:
        # Through the same bytes as stdin, so both transports decode identically.
        self._run.feed_line(encode_command_line(command).rstrip(b"\n"))

    async def close_input(self) -> None:
        self._run.stdin_ended()

    def report_step_left(self, step: Any, outcome: Any) -> None:
        from metaharness.protocol.events import StepLeft

        self._run.emit(StepLeft(step=step, outcome=outcome))

    async def wait(self) -> int:
        await self._task
        assert self.exit_code is not None
        return self.exit_code


class _Discard:
    def write(self, data: bytes) -> None:
        pass

    def flush(self) -> None:
        pass


class _SubprocessRun(RunHandle):
    def __init__(self, spec: RunSpec) -> None:
        super().__init__()
        self._spec = spec
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task | None = None
        self._out: asyncio.StreamReader | None = None
        self._in: Any = None
        self.stderr_text = ""

    async def _start(self) -> None:
        from metaharness.adapters.process import open_channel

        yours, its = control_socketpair()
        try:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "metaharness", *spec_to_argv(self._spec),
                stdin=its.fileno(), stdout=its.fileno(), stderr=asyncio.subprocess.PIPE,
                env=os.environ.copy(),
            )
        finally:
            its.close()
        self._out, self._in = await open_channel(yours)
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self._proc and self._proc.stderr
        try:
            async for line in self._out:
                self._line(line)
        finally:
            self.stderr_text = (await self._proc.stderr.read()).decode("utf-8", "replace")
            self.exit_code = await self._proc.wait()
            self._queue.put_nowait(None)

    async def _send(self, command: Any) -> None:
        try:
            self._in.write(encode_command_line(command))
            await self._in.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass

    async def close_input(self) -> None:
        if self._in is not None and not self._in.is_closing():
            self._in.close()  # half-close: the run reads end of input, its events still come

    async def wait(self) -> int:
        assert self._reader is not None
        await self._reader
        assert self.exit_code is not None
        return self.exit_code


def describe(kind: str) -> dict:
    """The capability descriptor of an adapter kind (what `metaharness capabilities KIND` prints)."""
    from metaharness.adapters import adapter_class

    return adapter_class(kind).descriptor().to_wire()


async def start_run(spec: RunSpec, *, subprocess: bool = False) -> RunHandle:
    """Start a run; in this process by default, or as a `metaharness run` child."""
    if subprocess:
        handle = _SubprocessRun(spec)
        await handle._start()
        return handle
    if spec.record or spec.replay:
        from metaharness.replay.session import open_hosting

        return _InProcessRun(spec, await open_hosting(spec))
    return _InProcessRun(spec)
