"""The embedder's API: start a run, iterate typed events, decide calls, send commands.

Two transports, one behaviour:

* `start_run(spec)` runs the loop in this process (no extra Python start-up);
* `start_run(spec, subprocess=True)` runs `metaharness run` as a child process and
  speaks the wire to it over its stdin/stdout — one end of a Unix socketpair, not pipes,
  so no process of the same user can reopen the channel through `/proc/<pid>/fd` and
  write commands into it or read events out of it. `control_socketpair()` gives an
  embedder that spawns `metaharness run` itself the same pair.

The same call runs a recorded or a replayed run: a spec with `record` or `replay` is hosted behind
the cassette's recorder or replay server (`metaharness.cassette_host`), exactly as `metaharness run
--record/--replay` hosts it.

A start that is refused — a flag combination, a missing model or key, a frame that cannot be
read, a replay into a workspace that differs from the recording's — raises `RunRefused` (its
`name`, e.g. `NoModel`, and its `sentence`) from `start_run` and `host_stdio` alike, before any
event of a started run is read.

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

Two further pieces serve the layers built on this API (record/replay, redecide), and any embedder
with the same needs:

* a `RunService` — something started before a run that the harness is pointed at (a recorder,
  a replay server) — is given to `start_run(spec, service=…)` or `host_stdio(…, service=…)`: the
  run gets the service's spec, the service may warn into the stream and stop the run through a
  `RunControl`, and it adjusts the exit code and is closed when the stream has closed;
* `FrameJudge` and `PolicyJudge` decide a recorded call again, without running anything, with
  the very code a run decides it with (`Redecision`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import sys
from typing import Any, AsyncIterator, BinaryIO, Callable, Protocol

import msgspec

from metaharness.protocol.commands import (
    Command,
    FrameSet,
    Halt,
    Interrupt,
    MessageInject,
    PermissionSet,
    Steer,
    ToolDecide,
)
from metaharness.protocol.decode import decode_event_line, encode_command_line
from metaharness.protocol.frame import Frame
from metaharness.protocol.spec import NEGATED, REPEATABLE, RunSpec
from metaharness.protocol.values import Decision

__all__ = ["FrameJudge", "PolicyJudge", "Redecision", "RunControl", "RunHandle", "RunRefused", "RunService",
           "control_socketpair", "describe", "host_stdio", "start_refusal", "start_run", "spec_to_argv"]

_NAMED = re.compile(r"([A-Z][A-Za-z0-9]+): (.+)", re.DOTALL)


class RunRefused(Exception):
    """The run was refused at start; nothing was spawned and no model was called.

    `name` is the refusal's name (`NoModel`, `CassetteConflict`, `WorkspaceDiffers`, …, as in the
    wire reference's "Refused starts"), `sentence` the reason in one sentence, `exit_code` 2 (what
    `metaharness run` exits with), `lines` the event lines the refusal wrote (the `start/<command>`
    results, then `stream.closed`) and `stderr` what it wrote on stderr. `str(exc)` is
    `Name: sentence`."""

    def __init__(self, name: str, sentence: str, *, lines: list[bytes] | None = None,
                 stderr: list[str] | None = None, exit_code: int = 2) -> None:
        super().__init__(f"{name}: {sentence}")
        self.name, self.sentence, self.exit_code = name, sentence, exit_code
        self.lines, self.stderr = list(lines or []), list(stderr or [])

    @classmethod
    def of(cls, sentence: str, **kwargs: Any) -> "RunRefused":
        """From the run's `Name: why` sentence."""
        named = _NAMED.fullmatch(sentence.strip())
        name, why = (named.group(1), named.group(2)) if named else ("StartRefused", sentence.strip())
        return cls(name, why, **kwargs)


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
        self.stderr: list[str] = []  # what the run wrote on stderr (lines, `metaharness: …`)

    # --- commands -------------------------------------------------------------
    def _next_id(self) -> str:
        self._counter += 1
        return f"c-{self._counter}"

    async def send(self, command: Command) -> str:
        """Send a typed command (its id is replaced by the next `c-N`); returns the id."""
        return (await self.send_together(command))[0]

    async def send_together(self, *commands: Command) -> list[str]:
        """Send typed commands in one piece (ids replaced as by `send`); returns their ids.

        The run reads them as one unit, so a boundary sees all of them or none: a step's
        `message.inject` and `frame.set` sent together open the same turn."""
        commands = tuple(msgspec.structs.replace(command, id=self._next_id()) for command in commands)
        await self._send(commands)
        return [command.id for command in commands]

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

    async def _send(self, commands: tuple) -> None:  # pragma: no cover - per transport
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
    def __init__(self, spec: RunSpec, hosting: "RunService | None" = None) -> None:
        super().__init__()
        from metaharness.run.loop import Run

        from metaharness.run.host import make_writer

        self._tee, self._close_tee = make_writer(_Discard(), spec.events)  # --events FILE, as the CLI does

        def write(line: bytes) -> None:
            self._tee(line)
            self._line(line)

        self._hosting = hosting  # a service in front of the run (e.g. a cassette's, metaharness.replay)
        self._run = Run(hosting.spec if hosting else spec, write, stderr=self.stderr.append)
        if hosting is not None:
            hosting.attach(RunControl(self._run))
        self._trace_env = tap_otel(self._run, self.stderr.append)
        self._task = asyncio.ensure_future(self._execute())

    async def _started(self) -> None:
        """Return once the harness was spawned; raise RunRefused when the start was refused."""
        settled = asyncio.ensure_future(self._run.spawn_settled())
        try:
            await asyncio.wait([self._task, settled], return_when=asyncio.FIRST_COMPLETED)
            if not self._task.done() and not self._run.core.spawned:
                await asyncio.wait([self._task])  # spawn failed: the run refuses or winds up
        finally:
            settled.cancel()
        if self._task.done():
            self._task.result()  # a crash of the run is raised as it is
            refusal = self._run.core.refusal
            if refusal is not None:
                raise RunRefused.of(refusal.sentence, lines=self.lines, stderr=self.stderr,
                                    exit_code=self.exit_code or 2)

    async def _execute(self) -> None:
        hosting = self._hosting
        if self._trace_env:  # this task's own context: the harness it spawns gets the run span's
            from metaharness.protocol.trace import TRACE_ENV

            TRACE_ENV.set(self._trace_env)
        try:
            if hosting is not None and hosting.refusal is not None:
                from metaharness.run.loop import RunRefused as Refused

                self.exit_code = self._run.refuse_start(Refused(hosting.refusal))
            else:
                code = await self._run.execute()
                self.exit_code = hosting.exit_code(code) if hosting is not None else code
        finally:
            if hosting is not None:
                await hosting.close(self.stderr.append)
            self._close_tee()
            self._queue.put_nowait(None)

    async def _send(self, commands: tuple) -> None:
        # Through the same bytes as stdin, so both transports decode identically; one burst.
        self._run.feed_lines([encode_command_line(command).rstrip(b"\n") for command in commands])

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
        self._begun = asyncio.get_running_loop().create_future()  # the first line of a started run

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
                # A refused start writes only start/<command> results and stream.closed; a warning
                # may come before session.started. Anything else means the run started.
                if not self._begun.done() and not _refusal_line(line):
                    self._begun.set_result(True)
        finally:
            text = (await self._proc.stderr.read()).decode("utf-8", "replace")
            self.stderr = text.splitlines()
            self.exit_code = await self._proc.wait()
            if not self._begun.done():
                self._begun.set_result(False)
            self._queue.put_nowait(None)

    async def _started(self) -> None:
        if await self._begun or self.exit_code != 2 or any(b'"event":"session.started"' in line for line in self.lines):
            return
        said = [line[len("metaharness: "):] for line in self.stderr if line.startswith("metaharness: ")]
        named = [line for line in said if _NAMED.fullmatch(line)]
        if named:  # the refusal is the last named sentence (a cwd notice may come first)
            raise RunRefused.of(named[-1], lines=self.lines, stderr=self.stderr, exit_code=self.exit_code)

    async def _send(self, commands: tuple) -> None:
        try:
            self._in.write(b"".join(encode_command_line(command) for command in commands))  # one write
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


def _refusal_line(line: bytes) -> bool:
    """Whether a line can belong to a refused start's output (or precede session.started)."""
    try:
        event = msgspec.json.decode(line)
    except msgspec.DecodeError:
        return False
    name = event.get("event") if isinstance(event, dict) else None
    if name == "command.result":
        return str(event.get("id", "")).startswith("start/")
    return name in ("stream.closed", "warning")


def describe(kind: str) -> dict:
    """The capability descriptor of an adapter kind (what `metaharness capabilities KIND` prints)."""
    from metaharness.adapters import adapter_class

    return adapter_class(kind).descriptor().to_wire()


def start_refusal(spec: RunSpec) -> str | None:
    """The sentence a run of `spec` would be refused with at start, or None: the run's own start
    checks, in their order, with nothing spawned — so a layer above can refuse before it writes
    anything of its own (the workflow host checks before its ledger)."""
    from metaharness.adapters import adapter_class
    from metaharness.run.harness import Harness
    from metaharness.run.start import RunRefused as StartRefused, check_start

    try:
        check_start(spec, Harness(adapter_class(spec.kind)(spec), spec), spec.work_dir())
    except StartRefused as refusal:
        return refusal.sentence
    return None


async def start_run(spec: RunSpec, *, subprocess: bool = False, service: "RunService | None" = None) -> RunHandle:
    """Start a run — plain, recorded (`spec.record`) or replayed (`spec.replay`) — in this process
    by default, or as a `metaharness run` child; return once its harness was spawned.

    Raises `RunRefused` when the start is refused (nothing was spawned; the refusal's lines are on
    the exception, and in `spec.events` when given). With a `service` (in process only) the run is
    given `service.spec` instead of `spec` and is served by it (a `RunService`); a `record`/`replay`
    spec gets its cassette's service here without one."""
    if subprocess:
        if service is not None:
            raise ValueError("a RunService hosts an in-process run only; a subprocess run hosts its own")
        handle: Any = _SubprocessRun(spec)
        await handle._start()
    else:
        if service is None and (spec.record or spec.replay):
            from metaharness.cassette_host import open_hosting

            service = await open_hosting(spec)
        handle = _InProcessRun(spec, service)
    await handle._started()
    return handle


# --- services in front of a run -----------------------------------------------------------


class RunControl:
    """What a `RunService` may do to the run it serves: warn into its stream, ask it to stop."""

    def __init__(self, run: Any) -> None:
        self._run = run

    def warn(self, code: str, message: str) -> None:
        """Write a `warning` event (code, message) into the run's stream."""
        from metaharness.protocol.events import WarningEvent

        self._run.emit(WarningEvent(code=code, message=message))

    def stop(self) -> None:
        """Stop the run as a SIGTERM would: pending calls are denied, the stream closes."""
        asyncio.ensure_future(self._run.request_stop())

    def price_here(self) -> Any:
        """The service prices the model traffic passing it: it is given the run's meter (call
        `meter.charge(model, usage)` per answer, answer `meter.refusal()` when it is not None), and
        the run counts its traffic as seen, so `max_cost_usd` is kept rather than refused."""
        return self._run.price_at_endpoint()


class RunService(Protocol):
    """A service started before a run and pointed at by it (a model recorder or replayer).

    `spec` is what the run is given; a non-None `refusal` (one sentence, `Name: why`) refuses the
    run at start instead, written like any start refusal; `attach` is called before the run
    starts; `exit_code` maps the run's exit code; `close` is awaited after the stream closed."""

    spec: RunSpec
    refusal: str | None

    def attach(self, control: RunControl) -> None: ...

    def exit_code(self, code: int) -> int: ...

    async def close(self, stderr: Callable[[str], None]) -> None: ...


async def host_stdio(spec: RunSpec, *, stdin: BinaryIO | None, stdout: BinaryIO, stderr: Callable[[str], None],
                     service: RunService | None = None) -> int:
    """Host one run as `metaharness run` does — command lines from `stdin`, event lines to `stdout`
    (and `--events FILE`), SIGINT/SIGTERM as a stop — and return its exit code. A `record`/`replay`
    spec is hosted behind its cassette's service; with a `service` the run is given `service.spec`,
    or refused with `service.refusal`; the service is closed after.

    A refused start is written as `metaharness run` writes it (the sentence on `stderr`, the
    `start/…` results and `stream.closed` on `stdout`), then raised as `RunRefused`."""
    from metaharness.run.host import host, make_writer
    from metaharness.run.loop import Run, RunRefused as Refused

    if service is None and (spec.record or spec.replay):
        from metaharness.cassette_host import open_hosting

        service = await open_hosting(spec)
    from metaharness.protocol.trace import TRACE_ENV

    hosted: list[Any] = []
    traced: list[Any] = []

    def attach(run: Any) -> None:
        hosted.append(run)
        if service is not None:
            service.attach(RunControl(run))
        if trace_env := tap_otel(run, stderr):
            traced.append(TRACE_ENV.set(trace_env))

    def refused(run: Any) -> None:
        if run.core.refusal is not None:
            raise RunRefused.of(run.core.refusal.sentence)

    try:
        if service is None:
            code = await host(spec, stdin=stdin, stdout=stdout, stderr=stderr, attach=attach)
            refused(hosted[0])
            return code
        try:
            if service.refusal is not None:
                write, close = make_writer(stdout, service.spec.events)
                run = Run(service.spec, write, stderr=stderr)
                try:
                    run.refuse_start(Refused(service.refusal))
                finally:
                    close()
                refused(run)
            code = await host(service.spec, stdin=stdin, stdout=stdout, stderr=stderr, attach=attach)
            refused(hosted[0])
            return service.exit_code(code)
        finally:
            await service.close(stderr)
    finally:
        for token in reversed(traced):
            TRACE_ENV.reset(token)


def tap_otel(run: Any, stderr: Callable[[str], None]) -> dict[str, str] | None:
    """Live OpenTelemetry export of `run` when `--otel` (or the standard OTEL_* variables) asks for it:
    a tap on its event writer (metaharness.export.otel), nothing of OpenTelemetry imported otherwise.
    Returns the W3C env carrier (TRACEPARENT…) of the run span, for the harness it spawns."""
    from metaharness.export.otlp import live_target, otel_installed

    url, named = live_target(run.spec.otel)
    if url is None:
        return None
    if not otel_installed():
        if not named:  # asked for by name, the run's start checks refuse it (OtelUnavailable)
            stderr("metaharness: the OTEL_EXPORTER_OTLP_* variables are set but the otel extra is not installed, "
                   "so this run's spans are not sent (pip install 'metaharness[otel]')")
        return None
    from metaharness.export.otel import LiveTap

    try:
        tap = LiveTap(run.spec.kind, run.run_id, url, stderr=stderr)
    except Exception as exc:  # noqa: BLE001 (the spans are not the run: a tap that cannot start is said, once)
        stderr(f"metaharness: no spans are sent to {url}: {exc}")
        return None
    run.tap(tap)
    return tap.carrier


# --- deciding a recorded call again -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Redecision:
    """How a run would decide one call, computed without running it."""

    decision: Decision | None  # as delivered (a deny-only run's allow is abstain); None: asked of the embedder
    decided_by: str  # "frame", "policy", … — "embedder" when the call would be asked
    reason: str | None = None  # asked: the policy's reason for asking


class _Resolvers:
    """A call's operations and subjects as the recorded harness's own tool table resolves them in
    its run directory, so a frame reads a recorded call as it read the live one."""

    def resolve(self, kind: str, cwd: str, name: str, input: Any) -> Any:
        from metaharness.adapters import adapter_class
        from metaharness.adapters.base import resolve_tool

        return resolve_tool(adapter_class(kind).tools, name, input, None, RunSpec(kind=kind, cwd=cwd).work_dir())


class FrameJudge:
    """Frame mode as a run decides it with `frame` (a sealed frame, `protocol.frame.load_frame`) in force."""

    def __init__(self, frame: Frame) -> None:
        from metaharness.run import decide

        self._decide = decide
        self._terms = decide.frame_terms(frame)
        self._resolvers = _Resolvers()

    def decide(self, kind: str, cwd: str, name: str, input: Any, *, deny_only: bool = False) -> Redecision:
        """The decision for tool `name` with `input`, called by a `kind` harness working in `cwd`."""
        resolution = self._resolvers.resolve(kind, cwd, name, input)
        decision, _uncovered = self._decide.frame_verdict(*self._terms, name, resolution.operations,
                                                          resolution.subjects)
        return Redecision(self._decide.as_delivered(decision, deny_only), "frame")


class PolicyJudge:
    """Policy mode as a run decides it with only these documents (and mode) and no frame in force;
    `decide` raises ValueError when the documents are refused as a policy run would refuse them."""

    def __init__(self, policy_files: list[str], policy_mode: str | None = None) -> None:
        self.policy_files, self.policy_mode = list(policy_files), policy_mode
        self._deciders: dict[tuple[str, str], Any] = {}

    def _decider(self, kind: str, cwd: str) -> Any:
        from metaharness.run.policy import PolicyDecider

        if (kind, cwd) not in self._deciders:
            # Only the given documents: the settings of whoever asks are no part of the question.
            spec = RunSpec(kind=kind, cwd=cwd, decisions="policy", policy_files=self.policy_files,
                           policy_mode=self.policy_mode, policy_scopes="none", no_decision_trail=True)
            self._deciders[(kind, cwd)] = PolicyDecider(spec, cwd)
        return self._deciders[(kind, cwd)]

    def decide(self, kind: str, cwd: str, name: str, input: Any, *, deny_only: bool = False) -> Redecision:
        """The decision for tool `name` with `input`, called by a `kind` harness working in `cwd`."""
        from metaharness.run.decide import as_delivered

        policy = self._decider(kind, cwd)
        outcome = policy.decision(policy.verdict(name, input, cwd), None)
        if outcome.decision == "forward":
            return Redecision(None, "embedder", (outcome.policy or {}).get("reason"))
        return Redecision(as_delivered(policy.as_decision(outcome), deny_only), outcome.decided_by)

    def close(self) -> None:
        for decider in self._deciders.values():
            decider.close()
