"""`ClaudeAdapter` — Claude Code 2.1.328 under metaharness (docs/guides/claude-and-codex.md).

What belongs here: the lifecycle glue between the run loop and one Claude process —
planning refusals, the hermetic spawn (launch.py), the `initialize` capability check,
the stdout reader feeding the translator (translate.py) and the call seam (seam.py),
and the controls: turns and injects as user lines, steer, `set_permission_mode`,
interrupt, halt — each carried out as the session's sans-IO rules (protocol.py) say.

Rules kept: the per-call seam is confirmed before the first user line (else the start
is refused by name); decisions reach the child before any control; every stdout line
is kept verbatim in the scratch transcript; the session never ends while a user line
the adapter wrote is still unconsumed; halt always ends with the whole process tree
killed.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, Callable, ClassVar

from metaharness.adapters.base import Abandonment, ControlRefused, TurnInput
from metaharness.adapters.process import Scratch
from metaharness.adapters.vendor import VendorAdapter, plan_model
from metaharness.protocol.commands import Interrupt, PermissionSet, Steer
from metaharness.protocol.descriptor import CapabilityDescriptor, harness_descriptor
from metaharness.protocol.frame import Frame
from metaharness.protocol.refusals import CommandCode, Sentence
from metaharness.protocol.spec import RunSpec

from . import launch
from .protocol import Session, turn_blocks
from .seam import CallSeam, ChannelClosed, ControlChannel, user_line
from .tools import RENDERING, TOOLS
from .translate import Translator

INITIALIZE_TIMEOUT_S = 30.0
CONTROL_TIMEOUT_S = 10.0


class ClaudeAdapter(VendorAdapter):
    kind: ClassVar[str] = "claude"
    postures: ClassVar[tuple[str, ...]] = launch.SET_POSTURES
    default_posture: ClassVar[str | None] = "default"
    turn_blocks: ClassVar[bool] = True  # one text block per frame rendering / inject / prompt
    tools = TOOLS
    model_wire = "anthropic"
    upstream = "https://api.anthropic.com"
    reads_lines = True
    handshake_errors = (asyncio.TimeoutError, ChannelClosed, ConnectionError, BrokenPipeError)

    def __init__(self, spec: RunSpec) -> None:
        super().__init__(spec)
        self.channel: ControlChannel | None = None
        self.seam: CallSeam | None = None
        self.translator: Translator | None = None
        self.session: Session | None = None
        self.init_reply: dict[str, Any] | None = None
        self._result_seen = asyncio.Event()

    # --- static facts ------------------------------------------------------------------
    @classmethod
    def descriptor(cls) -> CapabilityDescriptor:
        return harness_descriptor("claude", launch.PINNED_VERSION, RENDERING, registration="delivered",
                                  replace="delivered")

    # --- planning (no spawn) -----------------------------------------------------------
    def plan(self) -> None:
        spec = self.spec
        launch.check_posture(spec.posture or self.default_posture)
        self.plan_binary(needs_node=False, probe_timeout=30,
                         probe_env={"HOME": "/nonexistent", **{s: "1" for s in launch.PHONE_HOME_SWITCHES}})
        self.access = plan_model(spec, ("ANTHROPIC_API_KEY",), launch.PLACEHOLDER_KEY, launch.per_run_placeholder)
        self.plan_scratch()
        launch.check_memory(spec)

    # --- start ---------------------------------------------------------------------------
    def make_scratch(self) -> Scratch:
        return launch.make_scratch()

    async def launch(self) -> None:
        spec, child, ctx = self.spec, self.child, self.ctx
        assert child is not None and child.scratch is not None and ctx is not None and self.binary is not None
        scratch, cwd = child.scratch, ctx.run_cwd
        child.keep(scratch.transcript, "claude-transcript.jsonl")
        posture = spec.posture or self.default_posture
        env = launch.build_env(scratch, self.child_path, base_url=self.model_url, api_key=self.access.key,
                               bypass_as_root=posture == "bypassPermissions" and os.getuid() == 0)
        argv = launch.build_argv(self.binary, posture=posture, model=spec.model)  # type: ignore[arg-type]
        self.translator = Translator(transcript_path=str(scratch.transcript),
                                     hermetic=launch.attestation(spec, cwd, self.model_url),
                                     credential_source=spec.credentials)
        self.session = Session(self.translator)
        # The stdio control channel is a Unix socketpair (adapters/process/): nothing the
        # agent starts can reopen it through /proc to answer a hook or change the mode.
        await child.spawn(argv, env=env, cwd=cwd)
        self.channel = ControlChannel(child.write)
        self.seam = CallSeam(self.channel, ctx.present, cwd=None)
        child.read(self._read_stdout())

    def start_refused(self) -> None:
        if self.session is not None:
            self.session.ended = True
        self._close_stdin()

    async def handshake(self) -> None:
        """The `initialize` request registers the per-call hook; its reply must confirm it."""
        assert self.channel is not None and self.ctx is not None
        request_id = self.channel.next_request_id()
        request = launch.initialize_request(request_id, launch.hook_timeout_s(self.spec.decision_timeout_ms))
        _, future = self.channel.send_request(request["request"], request_id)
        reply = await asyncio.wait_for(asyncio.shield(future), INITIALIZE_TIMEOUT_S)
        self.init_reply = launch.check_initialize_reply(reply)
        self.reported(self.init_reply.get("claude_code_version"))

    # --- reading ---------------------------------------------------------------------------
    async def _read_stdout(self) -> None:
        assert self.child is not None and self.translator is not None
        try:
            async for number, raw in self.child.lines():
                read_ns = time.perf_counter_ns()
                for item in self.translator.feed(raw, number):
                    DISPATCH[item[0]](self, item, read_ns)
        finally:
            if self.channel is not None:
                self.channel.fail_waiting("claude's output ended")
            self._finish_session()

    def _on_result(self) -> None:
        self._result_seen.set()
        self._maybe_close()

    def _finish_session(self) -> None:
        """End of the child's output: the last `result` is the session's terminal record."""
        if self.ctx is not None and self.session is not None:
            for item in self.session.ended_items():
                DISPATCH[item[0]](self, item, 0)

    # --- turns and controls -----------------------------------------------------------------
    def _write_user(self, kind: str, blocks: list[str]) -> None:
        assert self.channel is not None and self.translator is not None
        self.translator.expect_replay(kind, blocks)
        self.channel.write(user_line(blocks))

    async def begin_turn(self, text: TurnInput, frame: Frame | None = None) -> None:
        try:
            self._write_user("prompt", turn_blocks(text))
        except (ChannelClosed, ConnectionError, BrokenPipeError):
            pass  # the child is gone; the loop sees its output end

    @property
    def turn_coming(self) -> bool:  # type: ignore[override]
        return self.session is not None and self.session.turn_coming()

    async def _steer(self, command: Steer) -> None:
        if self.translator is None or not self.translator.in_turn:
            raise ControlRefused(CommandCode.TOO_LATE, Sentence.NOTHING_TO_STEER)
        try:
            self._write_user("steer", [command.text])
        except (ChannelClosed, ConnectionError, BrokenPipeError):
            raise ControlRefused(CommandCode.TOO_LATE, "the run is ending") from None

    async def _set_posture(self, command: PermissionSet) -> str | None:
        word = command.posture
        if word not in self.postures:
            raise ControlRefused(CommandCode.UNSUPPORTED_CONTROL, f"the claude adapter does not accept the posture {word!r}")
        assert self.channel is not None
        await self.channel.set_permission_mode(word, CONTROL_TIMEOUT_S)

    # The interrupt goes out before the abandonment denies (protocol.py, `INTERRUPT_WHEN`); the
    # denies follow, and the reply is awaited by the interrupt's control (`_interrupt`) or halt().
    def abandoning(self, cause: Abandonment) -> None:
        self._send_interrupt(cause)

    def _send_interrupt(self, moment: str) -> None:
        if self.session is None or self.channel is None or not self.session.interrupts(moment, self.channel.interrupt_out):
            return
        if self.channel.send_interrupt():
            self._result_seen.clear()  # the turn's `result` after the interrupt is awaited by halt()

    async def _interrupt_replied(self, timeout: float) -> bool:
        """Send the interrupt unless it went out already; wait for its reply (False: not sent)."""
        assert self.channel is not None
        self._send_interrupt("interrupt")
        return await self.channel.interrupt_replied(timeout)

    async def _interrupt(self, command: Interrupt) -> None:
        assert self.channel is not None and self.seam is not None
        try:
            self.seam.deny_unanswered("the run was interrupted before this call was decided, so nothing ran")
            output_ended = self.child is not None and self.child.output_ended
            if not output_ended and await self._interrupt_replied(CONTROL_TIMEOUT_S):
                return
        except asyncio.TimeoutError:
            return  # a child that is ending runs no further turn either
        except (ChannelClosed, ConnectionError):
            pass
        raise BrokenPipeError("Claude Code has exited, so the interrupt reached nothing")  # never `ok` then

    controls = {Steer: _steer, PermissionSet: _set_posture, Interrupt: _interrupt}

    async def finish(self) -> None:
        if self.session is not None:
            self.session.closing = True
        self._maybe_close()

    def _maybe_close(self) -> None:
        if self.session is not None and self.session.may_close():
            self._close_stdin()

    def _close_stdin(self) -> None:
        if self.channel is not None and not self.channel.closed:
            self.channel.closed = True
            if self.child is not None:
                self.child.close_stdin()

    async def halt(self) -> None:
        child = self.child
        if child is None:
            return
        if child.running() and self.channel is not None and not self.channel.closed:
            if self.seam is not None:
                self.seam.deny_unanswered("the run was halted before this call was decided, so nothing ran")
            if self.session is not None and self.session.interrupts("halt", self.channel.interrupt_out):
                try:
                    await self._interrupt_replied(2.0)
                    await asyncio.wait_for(self._result_seen.wait(), 2.0)
                except (ChannelClosed, asyncio.TimeoutError, ConnectionError, BrokenPipeError):
                    pass
        self._close_stdin()
        await child.halt(2.0)


# The translator's items (translate.py) → where each goes: the run context, the call seam, the
# control channel.
DISPATCH: dict[str, Callable[[ClaudeAdapter, tuple, int], None]] = {
    "control": lambda adapter, item, read_ns: adapter.seam.on_control(item[1], read_ns),
    "emit": lambda adapter, item, read_ns: adapter.ctx.emit(item[1], at=item[2]),
    "call": lambda adapter, item, read_ns: adapter.seam.on_tool_use(item[1], item[2], item[3], item[4], read_ns),
    "session_started": lambda adapter, item, read_ns: adapter.ctx.session_started(item[1], at=item[2]),
    "turn_started": lambda adapter, item, read_ns: adapter.ctx.turn_started(at=item[1]),
    "turn_ended": lambda adapter, item, read_ns: adapter.ctx.turn_ended(item[1], at=item[2]),
    "result": lambda adapter, item, read_ns: adapter._on_result(),
    "session_ended": lambda adapter, item, read_ns: adapter.ctx.session_ended(item[1], at=item[2]),
    "opaque": lambda adapter, item, read_ns: adapter.ctx.opaque(item[4], vendor_type=item[1], vendor_subtype=item[2],
                                                                source_line=item[3]),
}
