"""The run loop — the one place a run's rules live (docs/reference/wire.md).

It owns: the stream writer (and so `seq`), the order of lines, the decision of
every call per decision mode, deadlines, the census, pending calls and their
abandonment, command processing (one `command.result` per command), turn
boundaries (`frame.set`, `message.inject`, `--keep-open`, `--max-turns`),
run-start refusals, and wind-up ending in exactly one `stream.closed`.

Adapters report what the harness did through the `RunContext` methods below and
never write lines themselves. Everything here runs on one asyncio loop; every
context method is synchronous, so the order the adapter reports in is the order
written.

Phases and stops: a command that must reach the child (steer, permission.set,
interrupt) waits until the spawn settled, and is refused TOO_LATE once the child is
gone; every stop (halt, SIGINT/SIGTERM) goes through `_stop_harness` and wakes every
wait of the run, whatever its phase. The command worker decodes stdin lines as it
takes them and yields to the loop every WORKER_SLICE_S, so a burst of commands never
delays a deadline or the child's records.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import msgspec

from metaharness.adapters.base import Adapter, ControlRefused, PresentedCall, StartRefusal
from metaharness.protocol import frame as frames
from metaharness.protocol.commands import (
    COMMAND_NAMES,
    FrameSet,
    Halt,
    Interrupt,
    MessageInject,
    PermissionSet,
    Steer,
    ToolDecide,
    command_name,
)
from metaharness.protocol.decode import CommandRefusal, decode_command_line
from metaharness.protocol.events import (
    CommandResult,
    Injection,
    SessionEnded,
    SessionStarted,
    StepEntered,
    ToolDecided,
    ToolRequested,
    ToolResult,
    TurnEnded,
    TurnStarted,
    WarningEvent,
)
from metaharness.protocol.stream import EventWriter
from metaharness.protocol.values import (
    Abstain,
    Allow,
    Deny,
    Exited,
    HermeticAttestation,
    Ok,
    Replace,
    UnknownTermination,
    refused,
)

from . import decide as texts
from metaharness.protocol.census import Census
from .spec import RunSpec

CANONICAL_COMMANDS = COMMAND_NAMES
STOP_BOUND_S = 15.0  # after a stop, how long the child's output may take to end
WORKER_SLICE_S = 0.002  # the command worker yields to the loop at least this often
WORKER_YIELD_PASSES = 4  # loop passes the worker gives the rest of the run at each yield
_KEY_ENCODER = msgspec.json.Encoder(order="deterministic")


@dataclass
class _Pending:
    call: PresentedCall
    requested_at: float
    deliver: list[Callable] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None
    policy: Any = None  # the policy verdict of a forwarded call


@dataclass
class _Boundary:
    """What takes effect at the next turn boundary."""

    frame: Any = None
    frame_command: str | None = None
    superseded: list[str] = field(default_factory=list)
    injects: list[tuple[str, str]] = field(default_factory=list)  # (command id, text)

    def __bool__(self) -> bool:
        return self.frame is not None or bool(self.injects)


class RunRefused(Exception):
    def __init__(self, sentence: str, results: list[tuple[str, str, str]] | None = None) -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.results = results or []  # (id, code, reason)


def call_digest(call_id: str, name: str, input: Any) -> str:
    return hashlib.sha256(_KEY_ENCODER.encode({"call_id": call_id, "input": input, "name": name})).hexdigest()


class Run:
    """One run of one harness. Use `execute()`; see `metaharness.api` for embedders."""

    def __init__(
        self,
        spec: RunSpec,
        write: Callable[[bytes], None],
        *,
        run_id: str | None = None,
        adapter: Adapter | None = None,
        stderr: Callable[[str], None] | None = None,
    ) -> None:
        from metaharness.adapters import adapter_class

        self.spec = spec
        self.run_id = run_id or spec.run_id or f"{spec.kind}-{os.getpid()}"
        self.writer = EventWriter(write, self.run_id)
        self.adapter: Adapter = adapter or adapter_class(spec.kind)(spec)
        self.descriptor = self.adapter.descriptor()
        self.run_cwd = os.path.abspath(spec.cwd or os.getcwd())
        self._stderr = stderr or (lambda text: None)
        self.census = Census()
        self.frame: Any = None  # the frame in force
        self._admitted: list = []
        self._scope: list = []
        self._boundary = _Boundary()
        self._pending: dict[str, _Pending] = {}
        self._presented: dict[str, str] = {}  # call_id → digest, every call presented for decision
        self._decided: dict[str, tuple[Any, str]] = {}  # call_id → (decision, decided_by) delivered
        self._ran_undecided: set[str] = set()  # presented, never decided, and a result came
        self._no_frame_warned = False
        self._session_started = False
        self._session_ended: SessionEnded | None = None
        self._held: list[tuple[Any, str | None]] = []
        self._boundary_lines: list[Any] = []
        self.turn = 0
        self.turn_running = False
        self._winding_up = False
        self._halt_id: str | None = None
        self._halted = False
        self._budget_stop = False
        self._stdin_ended = False
        self._wake = asyncio.Event()  # a turn ended, a boundary command came, stdin ended, halt
        self._turn_done = asyncio.Event()
        self._child_done: asyncio.Task | None = None
        self._commands: asyncio.Queue = asyncio.Queue()
        self._policy = None
        self._interrupting = False
        self._deferred_turn_end: tuple[str | None, str | None] | None = None
        # Phases the commands depend on (docs/reference/wire.md): a command that must
        # reach the child waits until the spawn settled; a stop (halt, SIGINT/SIGTERM) wakes
        # every wait of the run, so no phase can hold it.
        self._spawn_settled = asyncio.Event()
        self._spawned = False  # the adapter's start() returned: a child exists
        self._stop = asyncio.Event()
        self._stop_sent = False  # adapter.halt() was called after the spawn settled
        self._inflight: Any = None  # the command the worker is processing
        self._inflight_answered = False
        self.on_command_taken: Callable[[int], None] = lambda n: None  # frees n intake slots (host.py)
        self._batch: list | None = None  # the queue item the worker is in; its rest from _batch_next
        self._batch_next = 0

    # ------------------------------------------------------------------ lines
    def _line(self, event: Any, at: str | None = None) -> None:
        self.writer.write(event, at)

    def warn(self, code: str, message: str) -> None:
        self._line(WarningEvent(code=code, message=message))

    def _call_warn(self, code: str, message: str) -> None:
        # About a call: held with the call's own lines until session.started.
        self.emit(WarningEvent(code=code, message=message))

    def _result(self, command_id: str, outcome: Any) -> None:
        if self._inflight is not None and command_id == getattr(self._inflight, "id", None):
            self._inflight_answered = True
        self._line(CommandResult(id=command_id, outcome=outcome))

    # ------------------------------------------------------- run-start checks
    def _required_commands(self) -> list[str]:
        required = {"interrupt", "halt"}
        if self.spec.decisions in ("ask", "observe", "policy") or self._launch_frame_given():
            required.add("tool.decide")
        required.update(c for c in self.spec.required_commands if c != "replace")
        return [c for c in CANONICAL_COMMANDS if c in required] + sorted(
            c for c in required if c not in CANONICAL_COMMANDS
        )

    def _launch_frame_given(self) -> bool:
        return self.spec.frame is not None or self.spec.library_frame is not None

    def replace_delivered(self) -> bool:
        return self.descriptor.get("replace") == "delivered" or (
            self.spec.kind == "codex" and self.spec.codex_replace_relay
        )

    def check_start(self) -> None:
        """The start checks that refuse a run (see docs/reference/wire.md); raises RunRefused."""
        spec = self.spec
        # step 2: configuration
        if spec.record or spec.replay:
            raise RunRefused("CassetteUnhosted: --record and --replay are served by the layer that hosts a run "
                             "(metaharness run, or metaharness.api.start_run), and this run was started without it")
        if spec.codex_replace_relay and spec.kind != "codex":
            raise RunRefused(f"--codex-replace-relay is a codex option and this run is {spec.kind}")
        if spec.posture is not None and spec.posture not in self.adapter.postures:
            raise RunRefused(
                f"the {spec.kind} adapter does not accept the posture {spec.posture!r} "
                f"(it accepts {', '.join(self.adapter.postures)})"
            )
        if spec.decisions == "policy":
            self._policy = self._load_policy()
        # step 3: frame resolution
        if spec.frame is not None and spec.library_frame is not None:
            raise RunRefused("FrameConflict: a library frame and --frame were both given; give one")
        launch_frame = None
        if spec.frame is not None:
            try:
                launch_frame = frames.load_frame(spec.frame)
            except frames.FrameRefusal as exc:
                raise RunRefused(f"{exc.name}: {exc.sentence(spec.frame)}") from None
        elif spec.library_frame is not None:
            launch_frame = spec.library_frame
            if not isinstance(launch_frame, frames.Frame):
                try:
                    launch_frame = frames.seal(launch_frame)
                except frames.FrameRefusal as exc:
                    raise RunRefused(f"FrameInvalid: the library frame is not a sealed frame: {exc.detail}") from None
        # step 4
        if launch_frame is not None and spec.decisions == "observe":
            raise RunRefused("ObserveWithFrame: observe mode records every call and cannot enforce a frame")
        # step 5
        if self.descriptor["decision_modes"].get(spec.decisions, "absent") != "delivered":
            raise RunRefused(
                f"the {spec.kind} adapter does not deliver decision mode {spec.decisions!r}"
            )
        # step 6: required commands
        results = []
        commands = self.descriptor["commands"]
        for name in self._required_commands():
            status = commands.get(name, {"refused": "UNSUPPORTED_CONTROL"})
            if status != "honoured":
                code = status.get("refused", "UNSUPPORTED_CONTROL") if isinstance(status, dict) else "UNSUPPORTED_CONTROL"
                results.append((
                    f"start/{name}", code,
                    f"this run's configuration needs {name} and the {spec.kind} adapter refuses it",
                ))
        if "replace" in spec.required_commands and not self.replace_delivered():
            results.append((
                "start/replace", "UNSUPPORTED_CONTROL",
                f"this run's configuration needs replace and the {spec.kind} adapter cannot deliver it",
            ))
        if results:
            names = ", ".join(r[0].removeprefix("start/") for r in results)
            hint = self.adapter.replace_hint if results[-1][0] == "start/replace" else None
            raise RunRefused(f"the {spec.kind} adapter cannot honour what this run requires: {names}"
                             + (f"; {hint}" if hint else ""), results)
        # step 7: the adapter's own launch planning
        try:
            self.adapter.plan()
        except StartRefusal as exc:
            raise RunRefused(f"{exc.name}: {exc.sentence}") from None
        if launch_frame is not None:
            self._boundary.frame = launch_frame

    def _load_policy(self):
        try:
            from metaharness.run.policy import PolicyDecider
        except ImportError:
            raise RunRefused("decision mode 'policy' is not available in this build") from None
        try:
            return PolicyDecider(self.spec, self.run_cwd)
        except ValueError as exc:
            raise RunRefused(str(exc)) from None

    def refuse_start(self, refusal: RunRefused) -> int:
        self._stderr(f"metaharness: {refusal.sentence}")
        self._winding_up = True
        for command_id, code, reason in refusal.results:
            self._result(command_id, refused(code, reason))
        self._answer_leftovers()  # every line read before stream.closed is answered
        self.writer.close("error", UnknownTermination())
        return 2

    # --------------------------------------------------------------- context
    # (the RunContext the adapter reports through)

    def session_started(self, event: SessionStarted, *, at: str | None = None) -> None:
        if self._session_started:
            self.warn("VENDOR_NOTICE", "the harness reported a second opening record; it was not written again")
            return
        event.hermetic = self._attestation(event.hermetic)
        if event.available_operations is msgspec.UNSET and event.offered_tools:
            ops = self._operations_of_tools(event.offered_tools)
            if ops:
                event.available_operations = ops
        self._line(event, at)
        self._session_started = True
        # Order at start: session.started, then held lines, then the launch frame's boundary lines.
        held, self._held = self._held, []
        for held_event, held_at in held:
            self._line(held_event, held_at)
        self._flush_boundary_lines()

    def _attestation(self, given: HermeticAttestation) -> HermeticAttestation:
        given.mode = self.spec.hermetic  # type: ignore[assignment]
        given.decisions = self.spec.decisions  # type: ignore[assignment]
        given.deny_only = self.spec.deny_only
        if self.spec.hermetic == "off":
            given.imposed, given.unavailable = [], []
        return given

    def _operations_of_tools(self, tools: list[str]) -> list[str]:
        names: set[str] = set()
        for tool in tools:
            try:
                resolution = self.adapter.resolve(tool, {}, None)
            except Exception:  # a resolver that needs input cannot say; skip it
                continue
            names.update(op[0] for op in resolution.operations)
        return sorted(names)  # canonical order: mcp.call sorts between file.write and search

    def emit(self, event: Any, *, at: str | None = None) -> None:
        if (type(event) is ToolResult and event.call_id in self._presented and event.call_id not in self._decided
                and event.call_id not in self._ran_undecided):
            self._undecided_result(event.call_id)
        if not self._session_started:
            self._held.append((event, at))
        else:
            self._line(event, at)

    def turn_started(self, *, at: str | None = None) -> None:
        self.turn += 1
        self.turn_running = True
        event = TurnStarted(turn=self.turn, frame_digest=self.frame.digest if self.frame is not None else None)
        if self._session_started:
            self._flush_boundary_lines()
        self.emit(event, at=at)

    def turn_ended(self, stop_reason: str | None, *, at: str | None = None) -> None:
        if self._interrupting:
            # The interrupt's command.result precedes the turn.ended it causes,
            # whichever the harness reports first.
            self._deferred_turn_end = (stop_reason, at)
            return
        self.emit(TurnEnded(turn=self.turn, stop_reason=stop_reason), at=at)
        self.turn_running = False
        self._abandon_all("the turn ended")
        self._turn_done.set()
        self._wake.set()

    def session_ended(self, event: SessionEnded, *, at: str | None = None) -> None:
        if self._session_ended is not None:
            return
        # Decisions still open cannot be counted after the census is written.
        self._abandon_all("the stream ended")
        event.census = self.census.snapshot()
        self._session_ended = event
        self.emit(event, at=at)

    def record_call(self, call_id: str, name: str, input: Any, *, at: str | None = None) -> None:
        self.emit(ToolRequested(call_id=call_id, name=name, input=input, decision_required=False, seam="none"), at=at)

    def opaque(self, raw_line: bytes, *, vendor_type: str | None, vendor_subtype: str | None,
               source_line: int | None) -> None:
        from metaharness.protocol.events import Opaque

        line = raw_line.rstrip(b"\n")
        if line.endswith(b"\r"):
            line = line[:-1]
        self.emit(Opaque(vendor_type=vendor_type, vendor_subtype=vendor_subtype,
                         digest=hashlib.sha256(line).hexdigest(), source_line=source_line))

    # --------------------------------------------------------------- calls
    def present(self, call: PresentedCall) -> None:
        digest = call_digest(call.call_id, call.name, call.input)
        known = self._presented.get(call.call_id)
        resolution = self.adapter.resolve(call.name, call.input, call.cwd)
        op_names = list(dict.fromkeys(op[0] for op in sorted(resolution.operations)))
        subjects = [s for s, _ in resolution.subjects]

        def requested(required: bool, seam: str, deadline: int | None = None, policy: Any = msgspec.UNSET) -> None:
            self.emit(ToolRequested(
                call_id=call.call_id, name=call.name, input=call.input,
                operations=op_names or msgspec.UNSET, subjects=subjects or msgspec.UNSET,
                decision_required=required, deadline_ms=deadline, seam=seam, policy=policy,  # type: ignore[arg-type]
            ), at=call.at)

        if known is not None:
            if known == digest:
                requested(False, call.seam)
                pending = self._pending.get(call.call_id)
                if pending is not None:
                    pending.deliver.append(call.deliver)
                elif call.call_id in self._decided:
                    decision, decided_by = self._decided[call.call_id]
                    call.deliver(decision, decided_by)
                return
            requested(False, call.seam)
            self._call_warn("REQUEST_MUTATED", f"{call.call_id} was presented again with a different input")
            self._decide(call, [call.deliver], Deny(reason=texts.MUTATED), "adapter", call.seam, None)
            return
        self._presented[call.call_id] = digest

        if self._winding_up and self._halted:
            requested(False, call.seam)
            self._decide(call, [call.deliver], Deny(reason=texts.ABANDONED.format(why="the run was halted")),
                         "adapter", call.seam, None)
            return

        mode = self.spec.decisions
        if mode == "observe":
            requested(False, call.seam)
            self._decide(call, [call.deliver], Allow(), "observe", call.seam, None)
        elif mode == "ask":
            self._ask(call, requested)
        elif mode == "policy":
            self._decide_by_policy(call, resolution, requested)
        else:
            self._decide_by_frame(call, resolution, requested)

    def _frame_decision(self, call: PresentedCall, resolution) -> tuple[Any, bool]:
        return texts.frame_verdict(self._admitted, self._scope, call.name, resolution.operations, resolution.subjects)

    def _decide_by_frame(self, call: PresentedCall, resolution, requested) -> None:
        if self.frame is None:
            if not self._no_frame_warned:
                self._no_frame_warned = True
                self._call_warn("NO_FRAME_IN_FORCE", texts.NO_FRAME_WARNING)
            requested(False, "none")
            self._decide(call, [call.deliver], Abstain(), "adapter", "none", None)
            return
        decision, uncovered = self._frame_decision(call, resolution)
        if uncovered:
            self._call_warn("UNCOVERED_TOOL", f"{call.name} renders to no operation, so no frame can admit it")
        requested(False, call.seam)
        self._decide(call, [call.deliver], decision, "frame", call.seam, None)

    def _decide_by_policy(self, call: PresentedCall, resolution, requested) -> None:
        policy = self._policy
        verdict = policy.verdict(call.name, call.input, call.cwd or self.run_cwd)
        frame_reason = None
        if verdict.behavior != "deny" and self.frame is not None:  # deny rules are reported first
            decision, uncovered = self._frame_decision(call, resolution)
            if uncovered:
                self._call_warn("UNCOVERED_TOOL", f"{call.name} renders to no operation, so no frame can admit it")
            if isinstance(decision, Deny):
                frame_reason = decision.reason
        outcome = policy.decision(verdict, frame_reason)
        if outcome.decision == "forward":
            self._ask(call, requested, policy=(verdict, outcome))
            return
        requested(False, call.seam)
        self._decide(call, [call.deliver], policy.as_decision(outcome), outcome.decided_by, call.seam, None)
        policy.record(call.call_id, outcome)

    def _ask(self, call: PresentedCall, requested, policy: Any = None) -> None:
        deadline = self.spec.decision_timeout_ms
        wire = self._policy.wire_policy(policy[1]) if policy is not None else msgspec.UNSET
        requested(True, call.seam, deadline, wire)
        pending = _Pending(call=call, requested_at=time.monotonic(), deliver=[call.deliver], policy=policy)
        self._pending[call.call_id] = pending
        loop = asyncio.get_running_loop()
        pending.timer = loop.call_later(deadline / 1000, self._expire, call.call_id)

    def _expire(self, call_id: str) -> None:
        pending = self._pending.get(call_id)
        if pending is None:
            return
        n = self.spec.decision_timeout_ms
        reason = texts.DEADLINE.format(n=n, m=self.adapter.vendor_timeout_ms(n))
        self._close_pending(call_id, Deny(reason=reason), "deadline")

    def _close_pending(self, call_id: str, decision: Any, decided_by: str) -> None:
        pending = self._pending.pop(call_id)
        if pending.timer is not None:
            pending.timer.cancel()
        latency = int((time.monotonic() - pending.requested_at) * 1000)
        if pending.policy is not None:
            # A forwarded policy ask: the engine resolves the answer; the trail records it.
            verdict = pending.policy[0]
            answer = None if decided_by == "deadline" else decision
            resolved = self._policy.answer(verdict, answer)
            if decided_by == "embedder":
                decision = self._policy.as_decision(resolved, decision)
            self._policy.record(pending.call.call_id, resolved)
        self._decide(pending.call, pending.deliver, decision, decided_by, pending.call.seam, latency)

    def _undecided_result(self, call_id: str) -> None:
        """A result for a call metaharness presented and never decided: say exactly that.
        The call is closed without a decision (no tool.decided, no census count), so nothing
        later claims that it did not run."""
        pending = self._pending.pop(call_id, None)
        if pending is not None and pending.timer is not None:
            pending.timer.cancel()
        self._ran_undecided.add(call_id)
        self.emit(WarningEvent(code="UNDECIDED_CALL_RAN", message=(
            f"{call_id} produced a result though metaharness never decided it: "
            "something other than this run's embedder let it run")))

    def _abandon_all(self, why: str) -> None:
        for call_id in list(self._pending):
            self._close_pending(call_id, Deny(reason=texts.ABANDONED.format(why=why)), "adapter")
            self._call_warn("PENDING_CALL_ABANDONED", f"{call_id} was never decided by the embedder")

    def _decide(self, call: PresentedCall, deliver: list[Callable], decision: Any, decided_by: str,
                seam: str, latency: int | None) -> None:
        decision = texts.as_delivered(decision, self.spec.deny_only)
        self._decided[call.call_id] = (decision, decided_by)
        for fn in deliver:  # the child hears the decision before the line is written
            try:
                fn(decision, decided_by)
            except Exception as exc:  # a child that went away cannot run the call either
                self._stderr(f"metaharness: could not deliver the decision for {call.call_id}: {exc}")
        self.emit(ToolDecided(call_id=call.call_id, decision=decision, decided_by=decided_by,  # type: ignore[arg-type]
                               seam=seam, latency_ms=latency))  # type: ignore[arg-type]
        self.census.count(decision, decided_by, seam)

    # ------------------------------------------------------------- commands
    # The queue holds lists: each item is one burst of stdin lines (run/host.py's Intake hands
    # a chunk's lines at once) or one command, so a flood costs one queue operation per burst.
    def feed_line(self, raw: bytes) -> None:
        """One stdin line (without its newline), in arrival order."""
        decoded = decode_command_line(raw)
        if decoded is not None:
            self._commands.put_nowait([decoded])

    def feed_lines(self, items: list) -> None:
        """stdin lines (bytes, decoded as the worker takes them) or refusals, in arrival
        order (run/host.py's Intake). The list is the run's from here on."""
        if items:
            self._commands.put_nowait(items)

    def feed_command(self, command: Any) -> None:
        """A command from the library API (already typed)."""
        self._commands.put_nowait([command])

    def stdin_ended(self) -> None:
        self._stdin_ended = True
        self._wake.set()

    async def _command_worker(self) -> None:
        clock = time.perf_counter
        slice_end = clock() + WORKER_SLICE_S
        while True:
            if self._commands.empty():  # waiting for work yields too: a fresh slice once it comes
                batch = await self._commands.get()
                slice_end = clock() + WORKER_SLICE_S
            else:
                batch = self._commands.get_nowait()
            self.on_command_taken(len(batch))
            self._batch = batch
            index = 0
            try:
                while index < len(batch):  # _answer_leftovers may cut the batch short
                    if clock() >= slice_end:
                        # A burst never holds the loop: timers, the child's records and signals
                        # run between slices, however long the backlog is (issue 19). Several
                        # passes, since reading one record takes a few (readable → the
                        # adapter's task → the flush of its line).
                        self._batch_next = index
                        for _pass in range(WORKER_YIELD_PASSES):
                            await asyncio.sleep(0)
                        slice_end = clock() + WORKER_SLICE_S
                        continue
                    item = batch[index]
                    index += 1
                    self._batch_next = index
                    if type(item) is bytes:
                        item = decode_command_line(item)
                        if item is None:  # a blank line: no command, no answer
                            continue
                    self._inflight, self._inflight_answered = item, False
                    try:
                        if self.writer.closed:
                            continue
                        await self._process(item)
                    except Exception as exc:  # a bug must not leave a command unanswered
                        if not self.writer.closed and isinstance(getattr(item, "id", None), str):
                            self._stderr(f"metaharness: internal error on command {item.id}: {exc!r}")
                            self._unanswered(item, f"metaharness could not carry it: {type(exc).__name__}")
                    else:
                        if not self._inflight_answered:
                            self._unanswered(item, "metaharness could not carry it")
                    finally:
                        self._inflight = None
            finally:
                self._batch = None
                self._commands.task_done()

    def _unanswered(self, item: Any, reason: str) -> None:
        """The last guard of command processing: a command whose processing wrote no result gets one.
        A halt is answered at wind-up, right before `stream.closed`."""
        if self._inflight_answered or self.writer.closed or isinstance(item, Halt):
            return
        if isinstance(item, CommandRefusal) or not isinstance(getattr(item, "id", None), str):
            return
        self._result(item.id, refused("TOO_LATE" if self._winding_up else "UNSUPPORTED_CONTROL", reason))

    def _unreachable(self, cid: str) -> None:
        why = "the run is ending" if self._winding_up or not self._spawned else \
            "the harness has exited, so nothing can reach it"
        self._result(cid, refused("TOO_LATE", why))

    async def _child_reachable(self) -> bool:
        """Wait until the spawn settled; True when a child can still be reached."""
        if not self._spawn_settled.is_set():
            await self._spawn_settled.wait()
        return self._spawned and not self._winding_up and self.adapter.alive()

    async def _process(self, item: Any) -> None:
        if isinstance(item, CommandRefusal):
            self._result(item.id, refused("MALFORMED", item.reason))
            return
        name = command_name(item)
        cid = item.id
        if cid == "-":
            self._result("-", refused("MALFORMED", 'the id "-" is reserved for lines whose id could not be read'))
            return
        # step 2: well-formedness
        new_frame = None
        if isinstance(item, ToolDecide) and isinstance(item.decision, Deny) and not item.decision.reason.strip():
            self._result(cid, refused("MALFORMED", "malformed tool.decide: a deny needs a non-empty reason; "
                                                   "it is the only part the model can act on"))
            return
        if isinstance(item, FrameSet):
            try:
                new_frame = frames.frame_from_command(item.frame)
            except frames.FrameCommandError as exc:
                self._result(cid, refused("MALFORMED", exc.reason))
                return
        # step 3: capability
        status = self.descriptor["commands"].get(name, {"refused": "UNSUPPORTED_CONTROL"})
        if status != "honoured":
            code = status.get("refused", "UNSUPPORTED_CONTROL") if isinstance(status, dict) else "UNSUPPORTED_CONTROL"
            self._result(cid, refused(code, f"the {self.spec.kind} adapter refuses {name}"))
            return
        # step 4: run configuration
        if isinstance(item, FrameSet) and self.spec.decisions == "observe":
            self._result(cid, refused("UNSUPPORTED_CONTROL",
                                      "frame.set cannot be honoured in an observe run: observe enforces nothing"))
            return
        if isinstance(item, ToolDecide) and isinstance(item.decision, Replace):
            if self.spec.deny_only:
                self._result(cid, refused("UNSUPPORTED_CONTROL",
                                          "this run is deny-only and replace would grant; answer deny or abstain"))
                return
            pending = self._pending.get(item.call_id)
            if not self.replace_delivered() or (pending is not None and not pending.call.can_replace):
                self._result(cid, refused(
                    "UNSUPPORTED_CONTROL",
                    f"the {self.spec.kind} adapter cannot deliver replace for this call; deny with a reason instead",
                ))
                return
            why = pending.call.replace_refusal(item.decision.input) if pending is not None and pending.call.replace_refusal else None
            if why is not None:
                self._result(cid, refused("UNSUPPORTED_CONTROL", why))
                return
        if isinstance(item, PermissionSet) and item.posture not in self.adapter.postures:
            self._result(cid, refused(
                "UNSUPPORTED_CONTROL",
                f"the {self.spec.kind} adapter does not accept the posture {item.posture!r}",
            ))
            return
        # step 5: execute (never during wind-up)
        if self._winding_up:
            if isinstance(item, ToolDecide) and item.call_id in self._presented:
                reason = f"{item.call_id} was decided or its window closed; a decision cannot be replayed"
            else:
                reason = "the run is ending"
            self._result(cid, refused("TOO_LATE", reason))
            return
        if isinstance(item, ToolDecide):
            self._tool_decide(item)
        elif isinstance(item, FrameSet):
            self._frame_set(cid, new_frame)
        elif isinstance(item, MessageInject):
            self._boundary.injects.append((cid, item.text))
            self._result(cid, Ok(applies_at="next turn"))
            self._wake.set()
        elif isinstance(item, Steer):
            if not self.turn_running:
                self._result(cid, refused("TOO_LATE", "no turn is running, so there is nothing to steer; "
                                                       "message.inject reaches the next turn"))
                return
            if not await self._child_reachable():
                self._unreachable(cid)
                return
            await self._control(cid, self.adapter.steer(item.text))
        elif isinstance(item, PermissionSet):
            # Before the child exists the posture is held until it does (delivered, then ok).
            if not await self._child_reachable():
                self._unreachable(cid)
                return
            await self._control(cid, self.adapter.set_posture(item.posture))
        elif isinstance(item, Interrupt):
            if not self._spawn_settled.is_set() and not self._winding_up:
                # Taken before the child exists: no turn can be running, so there is nothing to
                # stop (still ok). Carried later it would stop a turn begun after it.
                self._result(cid, Ok(applies_at=None))
                return
            if not await self._child_reachable():
                self._unreachable(cid)
                return
            self._interrupting = True
            self.adapter.interrupting()
            self._abandon_all("the run was interrupted")
            try:
                await self._control(cid, self.adapter.interrupt())
            finally:
                self._interrupting = False
                if self._deferred_turn_end is not None:
                    stop_reason, at = self._deferred_turn_end
                    self._deferred_turn_end = None
                    self.turn_ended(stop_reason, at=at)
        elif isinstance(item, Halt):
            self._abandon_all("the run was halted")
            self._halt_id = cid
            self._halted = True
            self._winding_up = True
            await self._stop_harness()

    async def _control(self, cid: str, awaitable) -> None:
        try:
            applies_at = await awaitable
        except ControlRefused as exc:
            self._result(cid, refused(exc.code, exc.reason))
            return
        except (OSError, EOFError) as exc:  # the child's channel closed under the control
            self._result(cid, refused("TOO_LATE", f"the harness can no longer be reached: {exc or type(exc).__name__}"))
            return
        self._result(cid, Ok(applies_at=applies_at if isinstance(applies_at, str) else None))

    def _tool_decide(self, item: ToolDecide) -> None:
        pending = self._pending.get(item.call_id)
        if pending is None:
            if item.call_id in self._presented:
                reason = f"{item.call_id} was decided or its window closed; a decision cannot be replayed"
                self._result(item.id, refused("TOO_LATE", reason))
            else:
                self._result(item.id, refused("UNKNOWN_CALL", f"{item.call_id} does not correlate to an open request"))
            return
        self._close_pending(item.call_id, item.decision, "embedder")
        self._result(item.id, Ok(applies_at=None))

    def _frame_set(self, cid: str, new_frame: Any) -> None:
        same_step = self.frame is not None and self.frame.step == new_frame.step
        if self._boundary.frame_command is not None:
            self._boundary.superseded.append(self._boundary.frame_command)
        self._boundary.frame = new_frame
        self._boundary.frame_command = cid
        self._result(cid, Ok(applies_at="next turn" if same_step else "next step"))
        self._wake.set()

    # -------------------------------------------------------------- boundaries
    def _take_boundary(self) -> list[str]:
        """Apply what waits for this boundary; return the text blocks that open the turn
        (the frame's rendering, then each inject in arrival order)."""
        boundary, self._boundary = self._boundary, _Boundary()
        lines: list[Any] = []
        pieces: list[str] = []
        for superseded in boundary.superseded:
            self.warn("COMMAND_NOT_APPLIED", f"frame.set {superseded} was superseded by a later frame.set before its boundary")
        if boundary.frame is not None:
            new = boundary.frame
            if self.frame is None or self.frame.step != new.step:
                lines.append(StepEntered(step=new.step, frame_digest=new.digest))
            text = frames.render(new)
            lines.append(Injection(text=text, origin="frame"))
            pieces.append(text)
            self._enforce(new)
        for _cid, text in boundary.injects:
            lines.append(Injection(text=text, origin="message.inject"))
            pieces.append(text)
        self._boundary_lines.extend(lines)
        if self._session_started:
            self._flush_boundary_lines()
        return pieces

    def _turn_input(self, blocks: list[str]) -> Any:
        """What begin_turn receives: the non-empty blocks as a list for an adapter that
        keeps them apart (`turn_blocks`), else one string joined with a blank line."""
        blocks = [b for b in blocks if b]
        return blocks if getattr(self.adapter, "turn_blocks", False) else "\n\n".join(blocks)

    def _enforce(self, frame: Any) -> None:
        self.frame = frame
        self._admitted, self._scope = texts.frame_terms(frame)

    def _flush_boundary_lines(self) -> None:
        lines, self._boundary_lines = self._boundary_lines, []
        for line in lines:
            self._line(line)

    # ------------------------------------------------------------------ drive
    async def execute(self) -> int:
        """Run to the end; return the exit code (docs/reference/wire.md)."""
        from metaharness.adapters.process import make_non_dumpable

        make_non_dumpable()  # nothing of this user's reaches our fds, environment or memory
        try:
            self.check_start()
        except RunRefused as refusal:
            return self.refuse_start(refusal)
        worker = asyncio.create_task(self._command_worker())
        try:
            await asyncio.sleep(0)  # commands already read go first: a halt before the spawn spawns nothing
            if self._stop.is_set():
                self._spawn_settled.set()
                await self._drain_commands()
                return self._wind_up(UnknownTermination())
            try:
                await self.adapter.start(self)
            except StartRefusal as exc:
                self._winding_up = True
                self._spawn_settled.set()
                await self._stop_child()
                await self._drain_commands()
                return self.refuse_start(RunRefused(f"{exc.name}: {exc.sentence}"))
            except BaseException:
                self._spawn_settled.set()
                raise
            self._child_done = asyncio.create_task(self.adapter.wait())
            self._child_done.add_done_callback(self._child_output_ended)
            self._spawned = True
            self._spawn_settled.set()
            if self._stop.is_set():  # a stop that came while the child was spawning
                await self._stop_harness()
            else:
                await self._drive()
            termination = await self._child_termination()
            await self._drain_commands()
            return self._wind_up(termination)
        finally:
            worker.cancel()
            self.adapter.cleanup()

    def _child_output_ended(self, _task: asyncio.Task) -> None:
        # Wind-up begins when the child's output ends; a command read from here on is TOO_LATE.
        self._winding_up = True
        self._wake.set()

    async def _stop_harness(self) -> None:
        """Stop the child once it exists; every stop (halt, signal) comes through here."""
        self._stop.set()
        self._wake.set()
        if not self._spawn_settled.is_set():
            return  # execute() stops it as soon as the spawn settles
        if not self._spawned:
            return
        self._stop_sent = True
        try:
            await self.adapter.halt()
        except Exception as exc:
            self._stderr(f"metaharness: stopping the harness failed: {exc}")

    async def _child_termination(self) -> Any:
        """The child's termination; once a stop was asked for, bounded by STOP_BOUND_S (a child
        whose output a stray descendant keeps open cannot hold the run)."""
        assert self._child_done is not None
        while True:
            stop_waiter = asyncio.ensure_future(self._stop.wait())
            done, _ = await asyncio.wait({self._child_done, stop_waiter}, return_when=asyncio.FIRST_COMPLETED)
            stop_waiter.cancel()
            if self._child_done in done:
                return self._child_done.result()
            if not self._stop_sent:
                await self._stop_harness()
            done, _ = await asyncio.wait({self._child_done}, timeout=STOP_BOUND_S)
            if done:
                return self._child_done.result()
            self._stderr("metaharness: the harness's output did not end after it was stopped; winding up without it")
            self._child_done.remove_done_callback(self._child_output_ended)
            self._child_done.cancel()
            self._winding_up = True
            return UnknownTermination()

    async def _stop_child(self) -> None:
        try:
            await self.adapter.halt()
            await asyncio.wait_for(self.adapter.wait(), 10)
        except Exception:
            pass

    async def _drive(self) -> None:
        prompt = self.spec.prompt or ""
        if self._stop.is_set():
            return
        opening = self._take_boundary()
        if self.frame is not None:
            await self.adapter.set_frame_text(frames.render(self.frame))
        self._turn_done.clear()
        await self.adapter.begin_turn(self._turn_input([*opening, prompt]))
        while True:
            outcome = await self._wait_for(self._turn_done)
            if outcome == "child" or self._stop.is_set():
                return
            if self.turn_running or getattr(self.adapter, "turn_coming", lambda: False)():
                # The harness started (or will start) a turn of its own: serve it fully
                # (decisions, commands) and take the boundary when it ends.
                self._turn_done.clear()
                continue
            if self.spec.max_turns is not None and self.turn >= self.spec.max_turns:
                self._budget_stop = True
                break
            if not self._boundary and self.spec.keep_open:
                while not self._boundary and not self._stdin_ended and not self._stop.is_set():
                    self._wake.clear()
                    if await self._wait_for(self._wake) == "child":
                        return
                if self._stop.is_set():
                    return
            if not self._boundary or self._stop.is_set():
                break
            frame_before = self.frame
            blocks = self._take_boundary()
            if self.frame is not frame_before:
                await self.adapter.set_frame_text(frames.render(self.frame))
            self._turn_done.clear()
            await self.adapter.begin_turn(self._turn_input(blocks))
        self._winding_up = True
        if not self._stop.is_set():
            await self.adapter.finish()

    async def _wait_for(self, event: asyncio.Event) -> str:
        """Wait for `event`; "child" when the child's output ended or a stop came first."""
        if self._stop.is_set():
            return "child"
        waiter = asyncio.create_task(event.wait())
        stop_waiter = asyncio.create_task(self._stop.wait())
        done, _ = await asyncio.wait({waiter, stop_waiter, self._child_done}, return_when=asyncio.FIRST_COMPLETED)
        stop_waiter.cancel()
        if waiter in done and not self._stop.is_set():
            return "event"
        waiter.cancel()
        return "child"

    async def request_stop(self) -> None:
        """SIGINT/SIGTERM: stop the child and wind up (no halt command was processed).
        Any phase: before the spawn nothing is spawned, during it the child is stopped as
        soon as it exists, during wind-up the wind-up completes (a second signal stops again)."""
        if not self._winding_up:
            self._winding_up = True
            self._abandon_all("the stream ended")
        await self._stop_harness()

    async def _drain_commands(self) -> None:
        await asyncio.sleep(0)
        try:
            await asyncio.wait_for(self._commands.join(), 5)
        except asyncio.TimeoutError:
            pass

    def _answer_leftovers(self) -> None:
        """Answer the command in flight (if its processing could not finish) and every
        command still queued: all were read before `stream.closed`."""
        item = self._inflight
        if item is not None and not self._inflight_answered and not isinstance(item, Halt):
            self._answer_late(item)
        rest: list = []
        if self._batch is not None:  # the rest of the burst the worker is in
            rest = self._batch[self._batch_next:]
            del self._batch[self._batch_next:]
        while not self._commands.empty():
            batch = self._commands.get_nowait()
            self.on_command_taken(len(batch))
            rest.extend(batch)
            self._commands.task_done()
        for item in rest:
            if type(item) is bytes:
                item = decode_command_line(item)
                if item is None:
                    continue
            self._answer_late(item)

    def _wind_up(self, termination: Any) -> int:
        self._winding_up = True
        self._abandon_all("the run was halted" if self._halted else "the stream ended")
        if not self._session_started:
            held, self._held = self._held, []
            for event, at in held:
                self._line(event, at)
        if self._session_ended is None:
            tail = getattr(self.adapter, "stderr_tail", lambda: "")()
            message = "the harness ended without a terminal record"
            if tail and tail.strip():
                message += f"; its stderr: {tail.strip()}"
            self.warn("NO_TERMINAL_RECORD", message)
        if self.spec.retain_dir:
            for failure in self.adapter.retain(self.spec.retain_dir):
                self.warn("RETAIN_FAILED", failure)
        leftover = self._boundary
        for superseded in leftover.superseded:
            self.warn("COMMAND_NOT_APPLIED", f"frame.set {superseded} never took effect: the run wound up first")
        if leftover.frame_command is not None:
            self.warn("COMMAND_NOT_APPLIED", f"frame.set {leftover.frame_command} never took effect: the run wound up first")
        for cid, _text in leftover.injects:
            self.warn("COMMAND_NOT_APPLIED", f"message.inject {cid} never took effect: the run wound up first")
        # Lines still queued (read before this point) are answered before the marker.
        self._answer_leftovers()
        if self._halt_id is not None:
            self._result(self._halt_id, Ok(applies_at=None))
        if self._policy is not None and (kept := self._policy.close()):
            self._stderr(f"metaharness: the policy decision trail is in {kept}")
        reason = self.close_reason()
        self.writer.close(reason, termination if termination is not None else UnknownTermination())
        return 0 if self._session_ended is not None else 3

    def _answer_late(self, item: Any) -> None:
        if isinstance(item, CommandRefusal):
            self._result(item.id, refused("MALFORMED", item.reason))
        elif isinstance(item, ToolDecide) and item.call_id in self._presented:
            self._result(item.id, refused("TOO_LATE", f"{item.call_id} was decided or its window closed; "
                                                      "a decision cannot be replayed"))
        else:
            self._result(item.id, refused("TOO_LATE", "the run is ending"))

    def close_reason(self) -> str:
        if self._halt_id is not None:
            return "steer-halt"
        if self._budget_stop:
            return "budget"
        ended = self._session_ended
        if ended is None:
            return "error"
        if "budget-exhausted" in (ended.subtype, ended.stop_reason, ended.terminal_reason):
            return "budget"
        if ended.is_error is True:
            return "error"
        if ended.is_error is False or ended.subtype == "success":
            return "completed"
        return "error"


def termination_of(returncode: int | None) -> Any:
    from metaharness.protocol.values import Signaled

    if returncode is None:
        return UnknownTermination()
    if returncode < 0:
        return Signaled(signal=-returncode)
    return Exited(code=returncode)
