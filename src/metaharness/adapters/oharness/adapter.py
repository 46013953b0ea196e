"""`OHarnessAdapter` — our own harness as a child process (seam `owned_tool`).

What belongs here: the lifecycle and the controls. Each record the child writes is
read here and handed to translate.py (events) or seam.py (a `tool_call` becomes a
presented call; a decision goes back as a `decision` line); controls become
`user`/`frame`/`steer`/`set_mode`/`interrupt` lines (the frame line carries the frame's
rendering); halt closes stdin and kills the process group.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from metaharness.adapters.base import Abandonment, Adapter, RunContext, StartRefusal, Tool, path_at
from metaharness.adapters.process import Child, Scratch, ScratchRefused, new_scratch
from metaharness.permissions import MODES
from metaharness.protocol.commands import Interrupt, PermissionSet, Steer
from metaharness.protocol.descriptor import CapabilityDescriptor, harness_descriptor
from metaharness.protocol.frame import Frame, render
from metaharness.protocol.refusals import RefusalName, WarningCode
from metaharness.protocol.spec import RunSpec
from metaharness.protocol.values import Decision

from . import launch, seam, translate

RENDERING: dict[str, str | None] = {
    "dir.list": "glob", "file.edit": "edit", "file.read": "read", "file.write": "write",
    "mcp.call": None, "search": "grep", "shell": "bash", "skill.load": "skill",
    "subagent.spawn": "agent", "task.todo": "todo", "web.read": "webfetch",
}
# Which input key holds the path a tool acts on (its subject), and the subject when the key is absent.
PATH_KEYS = {"read": ("path", None), "write": ("path", None), "edit": ("path", None),
             "glob": ("path", "."), "grep": ("path", ".")}
TOOLS: dict[str, Tool] = {
    tool: Tool(op, path_at(*PATH_KEYS[tool], when_absent_only=True) if tool in PATH_KEYS else None)
    for op, tool in RENDERING.items() if tool
}

_encode = msgspec.json.Encoder(order="deterministic").encode


class OHarnessAdapter(Adapter):
    kind: ClassVar[str] = "oharness"
    postures: ClassVar[tuple[str, ...]] = MODES
    default_posture: ClassVar[str | None] = None  # the configured mode (docs/reference/permissions.md)
    tools = TOOLS

    def __init__(self, spec: RunSpec) -> None:
        super().__init__(spec)
        self._ctx = None
        # Set by abandoning("interrupt"): the abandonment denies carry the interrupt with them, so
        # oharness stops the turn as it reads the deny, before any further model request.
        self._interrupt_with_decisions = False
        self._interrupt_carried = False
        self._turn_open, self._turns_ended = False, 0  # from the child's records: where a stop finds it

    @classmethod
    def descriptor(cls) -> CapabilityDescriptor:
        return harness_descriptor("oharness", _version(), RENDERING, registration="delivered", replace="delivered")

    def plan(self) -> None:
        """Refuse what oharness would refuse, before anything is spawned."""
        from metaharness.adapters.base import StartRefusal
        from metaharness.protocol.models import DEFAULT_MODEL, NO_MODEL, ModelSpellingError, missing_key, split_model

        if self.spec.model is None and self.spec.script is None:
            raise StartRefusal(RefusalName.NoModel, NO_MODEL)
        spelling = self.spec.model or DEFAULT_MODEL
        try:
            provider, _ = split_model(spelling)
        except ModelSpellingError as exc:
            raise StartRefusal(RefusalName.ModelInvalid, str(exc)) from None
        if sentence := missing_key(provider, launch.child_env(self.spec) or os.environ):  # the child's own env
            raise StartRefusal(RefusalName.NoApiKey, sentence)
        if self.spec.script:
            from metaharness.adapters.base import load_script

            if provider != "scripted":
                raise StartRefusal(RefusalName.ModelInvalid, f"--script drives the scripted model only, not {spelling!r}")
            load_script(self.spec.script)

    async def start(self, ctx: RunContext) -> None:
        self._ctx = ctx
        try:
            session = Scratch(Path(new_scratch("oharness-session-")))  # the child's session directory
        except ScratchRefused as exc:
            raise StartRefusal(RefusalName.ScratchRefused, str(exc)) from None
        # Its stderr to a pipe: a file there would be kept as part of the session by --retain-dir.
        self.child = Child(session, stderr_file=False)
        # The session (transcript and decision trail) is deleted with the run; --retain-dir keeps a copy.
        self.child.keep(session.root, "oharness-session")
        await self.child.spawn(launch.argv(self.spec, str(session.root)), cwd=self.spec.cwd or None,
                               env=launch.child_env(self.spec))
        self.child.read(self._read())

    async def _read(self) -> None:
        assert self.child is not None and self._ctx is not None
        ctx = self._ctx
        async for number, raw in self.child.lines():
            line = raw.rstrip(b"\n").removesuffix(b"\r")
            if not line.strip():
                continue
            try:
                record = msgspec.json.decode(line)
                if not isinstance(record, dict) or not isinstance(record.get("type"), str):
                    raise ValueError("not a record")
                action = self._translate(record)
            except (msgspec.DecodeError, ValueError, KeyError, TypeError):
                # A record that cannot be read is kept as opaque, never dropped.
                ctx.opaque(line, vendor_type=_type_of(line), vendor_subtype=None, source_line=number)
                continue
            action(ctx)

    def _translate(self, record: dict):
        """The context call a record stands for (raises on a record it cannot read)."""
        kind = record["type"]
        if kind == "init":
            event = translate.session_started(record)
            # The child's session directory dies with the run: name where the transcript is
            # kept (--retain-dir), or nothing, never a file that is about to be deleted.
            event.transcript = translate.TranscriptRef(path=self._kept_transcript())
            return lambda ctx: ctx.session_started(event)
        if kind == "turn_start":
            self._turn_open = True
            return lambda ctx: ctx.turn_started()
        if kind == "turn_end":
            self._turn_open, self._turns_ended = False, self._turns_ended + 1
            stop_reason = record.get("stop_reason")
            return lambda ctx: ctx.turn_ended(stop_reason)
        if kind == "tool_call":
            call = seam.presented_call(record)
            return lambda ctx: ctx.present(call)
        if kind == "result":
            event = translate.session_ended(record)
            return lambda ctx: ctx.session_ended(event)
        if kind == "model_error":
            event = translate.model_failure(record)
            return lambda ctx: ctx.emit(event)
        if kind == "error":
            event = _warning(WarningCode.VENDOR_ERROR, str(record.get("message")))
            return lambda ctx: ctx.emit(event)
        event = translate.simple_event(record)
        if event is None:
            raise ValueError("unmapped record")
        if kind == "tool_result" and record.get("refused") is True:
            # oharness's own permission gate refused the call (its manual mode with nobody to ask, a
            # deny rule): said as the vendors' own refusals are, so it is counted apart from metaharness's
            refusal = _warning(WarningCode.VENDOR_PERMISSION_DENIED,
                               f"{record.get('call_id')}: oharness refused the call: {record.get('content')}")
            return lambda ctx: (ctx.emit(event), ctx.emit(refusal))
        if kind == "usage":  # oharness reports every response's usage in-process: the run prices it
            model = _model_part(record.get("model"))
            counts = record.get("usage") if isinstance(record.get("usage"), dict) else {}
            return lambda ctx: (ctx.emit(event), ctx.meter.charge(model, counts))
        return lambda ctx: ctx.emit(event)

    def deliver(self, call_id: str, decision: Decision, decided_by: str) -> None:
        if self._interrupt_with_decisions:
            self._interrupt_carried = True
        self._send(seam.decision_line(call_id, decision, decided_by, interrupt=self._interrupt_with_decisions))

    def abandoning(self, cause: Abandonment) -> None:
        if cause == "interrupt":  # the interrupt travels with its denies; a stop closes stdin after them
            self._interrupt_with_decisions = True

    def _send(self, obj: dict) -> None:
        assert self.child is not None
        self.child.write(_encode(obj))

    async def _send_now(self, obj: dict) -> None:
        self._send(obj)
        assert self.child is not None
        await self.child.drain()

    async def begin_turn(self, text: str, frame: Frame | None = None) -> None:
        if frame is not None:  # shown in oharness's system prompt from this turn on
            await self._send_now({"type": "frame", "text": render(frame)})
        await self._send_now({"type": "user", "text": text})

    async def _steer(self, command: Steer) -> None:
        await self._send_now({"type": "steer", "text": command.text})

    async def _set_posture(self, command: PermissionSet) -> str | None:
        await self._send_now({"type": "set_mode", "mode": command.posture})
        return None

    async def _interrupt(self, command: Interrupt) -> None:
        carried, self._interrupt_carried, self._interrupt_with_decisions = self._interrupt_carried, False, False
        if carried:  # the deny lines already stopped the turn; a second stop could hit the next one
            assert self.child is not None
            await self.child.drain()
            return
        await self._send_now({"type": "interrupt"})

    controls = {Steer: _steer, PermissionSet: _set_posture, Interrupt: _interrupt}

    async def finish(self) -> None:
        if self.child is not None:
            self.child.close_stdin()

    async def halt(self) -> None:
        if self.child is None:
            return
        if self._turns_ended and not self._turn_open and self.child.proc is not None:
            # At a boundary after a turn a stop is a clean end, as on every vendor: at the end of
            # its input oharness writes its result (the session.ended) and exits. Killing it at
            # once raced that record, so a SIGTERM between turns closed `completed` or `error` by
            # luck. Mid-turn, or before any turn, it is stopped at once (no further model request).
            self.child.close_stdin()
            try:
                await asyncio.wait_for(self.child.proc.wait(), 1.0)
            except asyncio.TimeoutError:
                pass
        await self.child.terminate(grace=1.0)

    def _kept_transcript(self) -> str | None:
        if not self.spec.retain_dir:
            return None
        return os.path.join(os.path.abspath(self.spec.retain_dir), "oharness-session", "transcript.jsonl")



def _type_of(line: bytes) -> str | None:
    try:
        value = msgspec.json.decode(line)
    except msgspec.DecodeError:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) else None


def _warning(code: str, message: str):
    from metaharness.protocol.events import WarningEvent

    return WarningEvent(code=code, message=message)


def _version() -> str:
    return f"oharness {launch.PINNED_VERSION}"


def _model_part(spelling: object) -> str | None:
    """`PROVIDER:MODEL` → MODEL, the name the price table knows."""
    return spelling.partition(":")[2] or spelling if isinstance(spelling, str) else None
