"""The `codex` adapter: Codex CLI 0.171.0 driven through `codex app-server`
(docs/guides/claude-and-codex.md).

One app-server per run, a throwaway CODEX_HOME (`launch.py`), JSON-RPC over its stdio
(`rpc.py`), notifications mapped to events (`translate.py`) and every shell call and
file change asked through approval requests under approval policy `untrusted`
(`seam.py`), its turns and steers in `turns.py`, the session's opening in `protocol.py`. This module
holds the lifecycle and the controls.

Rules kept:
* the approval policy is `untrusted` for the whole run; a thread that does not echo it
  is refused by name before any user line is written;
* the sandbox follows the frame in force (read-only when it admits no writing
  operation), the posture winning where it is stricter, and is sent on every turn;
* `replace` is refused by name, except in a relay run (`--codex-replace-relay`): there a
  PreToolUse hook forwards each call to a per-run socket (`relay.py`) before its approval,
  and the seam verifies that the approval carries what was decided (`seam.py`);
* interrupt = decline pending approvals, `turn/interrupt`, then kill every descendant
  process group but the app-server's own — `turn/interrupt` alone leaves a running
  command alive;
* a steer is never dropped silently (`turns.py`).
"""

from __future__ import annotations

import asyncio
import os

from metaharness.adapters.base import (Abandonment, ControlRefused, StartRefusal, TurnInput, frame_of, frame_operation_names,
                                      vendor_settings)
from metaharness.adapters.process import Scratch, vendor_timeout_ms
from metaharness.adapters.vendor import VendorAdapter, plan_model
from metaharness.protocol.commands import Interrupt, PermissionSet, Steer
from metaharness.protocol.descriptor import CapabilityDescriptor, harness_descriptor
from metaharness.protocol.frame import Frame
from metaharness.protocol.refusals import CommandCode, RefusalName
from metaharness.protocol.spec import RunSpec

from . import launch, protocol
from .launch import CodexOptions
from .relay import SECRET_ENV, open_relay
from .rpc import RpcChannel, RpcClosed, RpcError
from .seam import Seam
from .tools import RENDERING, TOOLS
from .translate import Translator
from .turns import Turns


class CodexAdapter(VendorAdapter):
    kind = "codex"
    postures = launch.SANDBOX_WORDS
    default_posture = "workspace-write"
    replace_hint = "start the run with --codex-replace-relay to deliver replace for shell calls"
    replace_option = "codex_replace_relay"
    turn_blocks = True  # frame rendering, injects and prompt: separate text entries
    tools = TOOLS
    model_wire = "responses"
    upstream = "https://api.openai.com"
    handshake_errors = (RpcClosed, RpcError, asyncio.TimeoutError)

    def __init__(self, spec: RunSpec) -> None:
        super().__init__(spec)
        self.options = CodexOptions.of(spec)
        self.posture = spec.posture or self.default_posture
        self.frame_ops: set[str] | None = None
        self.rpc: RpcChannel | None = None
        self.translator: Translator | None = None
        self.seam: Seam | None = None
        self.thread_id: str | None = None
        self.thread_path: str | None = None
        self.work: str | None = None
        self.turns: Turns | None = None
        self._stubs_before: set[str] = set()
        self._base_url: str | None = None

    # --- static facts -------------------------------------------------------------------
    @classmethod
    def descriptor(cls) -> CapabilityDescriptor:
        return harness_descriptor("codex", launch.PIN, RENDERING, registration="unverified", replace="unverified",
                                  options=("codex_replace_relay",))

    # --- planning -----------------------------------------------------------------------
    def plan(self) -> None:
        if self.posture not in self.postures:
            raise StartRefusal(
                RefusalName.PostureRefused,
                f"the codex adapter accepts the postures read-only, workspace-write and danger-full-access, not {self.posture!r}",
            )
        self.plan_work()
        self.access = plan_model(self.spec, ("OPENAI_API_KEY", "CODEX_API_KEY"), launch.PLACEHOLDER_KEY)
        self.passed = vendor_settings(launch.PASSED_THROUGH)
        self.plan_binary(probe_timeout=30)
        self.plan_scratch()
        # The launch frame's operations (None: no frame, the posture alone sets the sandbox; an
        # unreadable one admits nothing — the loop refuses it first — so the sandbox is read-only).
        if self.spec.library_frame is not None or self.spec.frame:
            self.frame_ops = frame_operation_names(frame_of(self.spec))

    # --- start --------------------------------------------------------------------------
    def make_scratch(self) -> Scratch:
        self.work = self.spec.work_dir()
        self._stubs_before = launch.existing_stubs(self.work)
        return launch.make_scratch(self.work)

    async def launch(self) -> None:
        spec, child = self.spec, self.child
        assert child is not None and child.scratch is not None and self.binary is not None
        scratch, child.ending = child.scratch, self.exited
        child.keep(scratch.transcript, "transcript.jsonl")  # and the rollout, once Codex exited
        self._base_url = launch.provider_base_url(self.model_url) if self.model_url else None
        config = launch.config_toml(self._base_url, model=spec.model, passed=getattr(self, "passed", None))
        if self.options.replace_relay:
            budget = spec.decision_timeout_ms
            self.relay, hook = await open_relay(child, lambda payload, reply: self.seam.on_hook(payload, reply),
                                                budget, vendor_timeout_ms(budget))
            config += hook
        (scratch / launch.CODEX_HOME / "config.toml").write_text(config)
        env = launch.child_env(scratch, self.child_path, self.key_variable, self.access.key)
        if self.options.replace_relay:
            env[SECRET_ENV] = self.relay.secret  # for the hook only: never argv, never config.toml
        # JSON-RPC over a Unix socketpair (adapters/process/): nothing the agent starts can
        # reopen it through /proc to answer an approval; the app-server confined like every child.
        rpc_in, rpc_out = await child.spawn(launch.argv(self.binary), env=env, cwd=self.work)
        self.translator = Translator(self.ctx, on_turn_started=lambda turn_id: self.turns.on_started(turn_id),
                                     on_turn_completed=lambda turn: self.turns.on_completed(turn))
        self.rpc = child.channel = RpcChannel(rpc_in, rpc_out, child.open(scratch.transcript),
                                              on_request=lambda m, raw, n: self.seam.on_request(m, raw, n),
                                              on_notification=self.translator.notification, on_wire=self.record_sent)
        self.turns = Turns(self.rpc, self.translator, self.ctx, lambda: self.thread_id,
                           lambda: launch.sandbox_policy(self.frame_ops, self.posture))
        self.seam = Seam(self.rpc, self.translator, self.ctx, lambda: self.thread_id,
                         vendor_timeout_ms(spec.decision_timeout_ms), run_cwd=spec.work_dir())
        child.read(self.rpc.read_forever())

    @property
    def key_variable(self) -> str:
        return launch.key_variable(self.spec, self.access.key_name)

    def start_refused(self) -> None:
        if self.translator is not None:
            self.translator.refused()
        if self.rpc is not None:
            self.rpc.close_stdin()

    async def handshake(self) -> None:
        assert self.rpc is not None and self.translator is not None and self.child is not None
        init = await self.rpc.request("initialize", protocol.initialize_params(), timeout=60)
        self.user_agent = init.get("userAgent") if isinstance(init, dict) else None
        self.rpc.notify("initialized")
        relay = self.options.replace_relay
        result = await self.rpc.request("thread/start", launch.thread_start(
            self.work, launch.sandbox_word(self.frame_ops, self.posture), self.spec.model, relay), timeout=60)
        thread = protocol.opened(result)
        self.thread_id, self.thread_path, version = thread.id, thread.path, thread.version
        self.translator.session_started(result, str(self.child.scratch.transcript), launch.attestation(
            self.spec, version, base_url=self._base_url, key_variable=self.key_variable, work=self.work, relay=relay))
        self.reported(version)

    # --- turns ---------------------------------------------------------------------------
    @property
    def turn_coming(self) -> bool:  # type: ignore[override]
        """A steer Codex did not take up will open the next turn (`turns.py`)."""
        return self.turns is not None and self.turns.carry_coming

    async def begin_turn(self, text: TurnInput, frame: Frame | None = None) -> None:
        assert self.turns is not None
        if frame is not None:  # the frame in force from this turn: its operations set the sandbox
            self.frame_ops = frame_operation_names(frame)
        await self.turns.begin(text)

    # --- controls -----------------------------------------------------------------------
    async def _steer(self, command: Steer) -> None:
        assert self.turns is not None
        await self.turns.steer(command.text)

    async def _set_posture(self, command: PermissionSet) -> str | None:
        word = command.posture
        if word not in self.postures:
            raise ControlRefused(
                CommandCode.UNSUPPORTED_CONTROL,
                f"the codex adapter does not accept the posture {word!r}: its postures are the sandbox words "
                "read-only, workspace-write and danger-full-access, and the approval policy stays untrusted for the whole run",
            )
        self.posture = word
        return "next turn"

    def abandoning(self, cause: Abandonment) -> None:
        if cause == "interrupt" and self.seam is not None:  # a halt declines every call itself
            self.seam.interrupting = True

    async def _interrupt(self, command: Interrupt) -> None:
        assert self.rpc is not None and self.seam is not None and self.turns is not None
        self.turns.stopping = True  # the interrupted turn carries nothing
        self.seam.interrupting = False
        self.seam.decline_all()
        await self.rpc.drain()
        groups = self.child.descendant_groups() if self.child is not None else set()
        await self.turns.interrupt()
        # turn/interrupt does not stop a running command (docs/guides/claude-and-codex.md): kill its groups.
        if self.child is not None:
            self.child.kill_descendants(groups)
        if not self.rpc.reaches_the_peer():  # never `ok` for an interrupt that reached nobody
            raise BrokenPipeError("codex has exited, so the interrupt reached nothing")

    controls = {Steer: _steer, PermissionSet: _set_posture, Interrupt: _interrupt}

    async def finish(self) -> None:
        if self.seam is not None:
            await self.seam.settle()
        if self.rpc is not None:
            await self.rpc.drain()
            self.rpc.close_stdin()

    async def halt(self) -> None:
        if self.turns is not None:
            self.turns.stopping = self.turns.halted = True
        if self.seam is not None:
            self.seam.decline_all()
        groups = self.child.descendant_groups() if self.child is not None else set()
        if self.rpc is not None:
            await self.rpc.drain()
            self.rpc.close_stdin()
        if self.child is not None:
            await self.child.halt(2, groups)

    async def exited(self) -> None:
        # The sandbox leaves empty mount-point stubs after a killed command.
        if self.work:
            launch.remove_new_stubs(self.work, self._stubs_before)
        ended = self.translator.end() if self.translator is not None else None
        if ended is not None:
            self.ctx.session_ended(ended, at=None)
        if self.child is not None and self.child.scratch is not None:
            rollout = launch.keep_rollout(self.thread_path, self.child.scratch)
            if rollout:
                self.child.keep(rollout, os.path.basename(rollout))
            if self.seam is not None:
                launch.write_seam_timings(self.child.scratch, self.seam.timings)



__all__ = ["CodexAdapter", "CodexOptions"]
