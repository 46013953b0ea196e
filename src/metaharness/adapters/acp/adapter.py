"""`AcpAdapter` — one ACP agent per run, every tool call asked and decided, fail-closed.

What belongs here: the lifecycle every ACP agent shares — plan (the vendor start's
(`adapters/vendor.py`) and ACP's own refusals), spawn with a scratch home, `initialize`,
`session/new`, the controls, and wind-up — carried out as the session's sans-IO rules
(`protocol.py`) say; the turns, one `session/prompt` each, are `turns.py`'s. Each vendor (one
module of this package per ACP kind in the registry) is a subclass that fills in the contract
of `contract.py`: how it is pinned, how a permission request becomes a call and how a call
resolves, and which mode it must stay in.

Rules kept:
* the agent's mode is fixed at `session/new`; a `current_mode_update` to any other mode ends
  the run (the pinned mode is what makes every tool ask);
* `--script` serves the model from a per-run loopback; `--credentials none` takes
  `--model-endpoint`; other credential modes are refused by name;
* a child whose stdout ends while its stdin is still open died: no `session.ended` is
  written (the loop reports NO_TERMINAL_RECORD and abandons every pending call — nothing the
  child asked about ran, as it can no longer run anything);
* `steer` and `permission.set` have no ACP carriage and are refused by name; `replace`
  cannot travel either (the seam refuses it).
"""

from __future__ import annotations

import asyncio
from typing import Any

from metaharness.adapters.base import Abandonment, ControlRefused, StartRefusal
from metaharness.adapters.process import Scratch, vendor_timeout_ms
from metaharness.adapters.vendor import VendorAdapter, plan_model
from metaharness.protocol.commands import Interrupt, Steer
from metaharness.protocol.events import SessionStarted
from metaharness.protocol.frame import Frame
from metaharness.protocol.refusals import CommandCode, RefusalName, WarningCode
from metaharness.protocol.spec import RunSpec
from metaharness.protocol.values import TranscriptRef

from . import launch, protocol
from .contract import AcpVendor
from .protocol import Session
from .rpc import RpcChannel, RpcClosed, RpcError
from .seam import Seam
from .translate import Translator, session_model
from .turns import Turns

HANDSHAKE_TIMEOUT_S = 120.0  # opencode's session/new takes seconds; a loaded machine more


class AcpAdapter(AcpVendor, VendorAdapter):
    handshake_errors = (RpcClosed, RpcError, asyncio.TimeoutError)

    # --- shared -------------------------------------------------------------------------
    def __init__(self, spec: RunSpec) -> None:
        super().__init__(spec)
        self.work: str | None = None
        self.rpc: RpcChannel | None = None
        self.seam: Seam | None = None
        self.translator: Translator | None = None
        self.session = Session()
        self.initial_mode: str | None = None
        self.agent_info: dict = {}
        self.turns: Turns | None = None

    def plan(self) -> None:
        self.plan_work()
        if self.spec.deny_only:
            raise StartRefusal(RefusalName.DenyOnlyUnavailable, (
                f"--deny-only needs a harness permission pipeline that decides an abstained call, and {self.kind} is "
                "pinned to ask metaharness about every call, so an abstain would grant"))
        self.access = plan_model(self.spec, (), None)
        self.vendor_plan()
        self.plan_binary()  # its version is read only under --strict-version: `initialize` names it
        self.plan_scratch()

    # --- start --------------------------------------------------------------------------
    def make_scratch(self) -> Scratch:
        self.work = self.spec.work_dir()
        return launch.make_scratch(self.kind, self.work)

    async def launch(self) -> None:
        child = self.child
        assert child is not None and child.scratch is not None and self.binary is not None
        scratch = child.scratch
        child.ending, child.dies_with_its_output = self.exited, True
        for source in (scratch.transcript, scratch.sent):
            child.keep(source, f"{self.kind}-{source.name}")
        base_url = (self.model_url or "").rstrip("/")
        env = {**launch.child_env(scratch, self.child_path), **self.vendor_env(scratch, base_url)}
        # The ACP channel is a socketpair (the agent's shell cannot reopen it through /proc) and
        # the agent runs confined where the platform allows, with a parent-death signal.
        agent_out, agent_in = await child.spawn(self.vendor_argv(self.binary), env=env, cwd=self.work)
        self.translator = Translator(self.ctx, on_arguments=lambda call_id: self.seam.arguments_arrived(call_id),
                                     on_mode=self._mode_changed, name_of=self.tool_name_of,
                                     takes_cost=self.prices_its_model)
        self.rpc = child.channel = RpcChannel(agent_out, agent_in, child.open(scratch.transcript),
                                              on_request=lambda m, raw, n: self.seam.on_request(m, raw, n),
                                              on_notification=self.translator.notification,
                                              on_unreadable=self._unreadable, on_wire=self.record_sent)
        self.seam = Seam(self.rpc, self.ctx, self.kind, vendor_timeout_ms(self.spec.decision_timeout_ms),
                         call_of=self._call_of, settled=self._settled, cancel_turn=self._cancel_turn,
                         hold_s=self.hold_s, takeup_s=self.takeup_s)
        child.read(self.rpc.read_forever())

    def start_refused(self) -> None:
        self.session.ended = True
        self._close_stdin()
        if self.seam is not None:
            self.seam.stop_timers()

    async def _probed_version(self) -> str | None:
        """`--version`, for an agent whose `initialize` names none (the pinned ones all do: a
        probe on every run would start the vendor twice, seconds of CPU for Node agents)."""
        assert self.binary is not None
        return await asyncio.to_thread(launch.binary_version, self.binary, self.child_path, timeout=30)

    async def handshake(self) -> None:
        assert self.rpc is not None and self.translator is not None and self.child is not None
        init = await self.rpc.request("initialize", protocol.initialize_params(), timeout=HANDSHAKE_TIMEOUT_S)
        self.agent_info = (init or {}).get("agentInfo") or {} if isinstance(init, dict) else {}
        result = await self.rpc.request("session/new", {"cwd": self.work, "mcpServers": []},
                                        timeout=HANDSHAKE_TIMEOUT_S)
        self.session.id = protocol.opened(result, self.binary_name)
        self.check_session(result)
        version = self.agent_info.get("version") or self.version or await self._probed_version()
        self.ctx.session_started(SessionStarted(
            adapter=self.kind, harness_version=version, session_id=self.session.id,
            model=self.spec.model or session_model(result), permission_mode=self.initial_mode, cwd=self.work,
            transcript=TranscriptRef(path=str(self.child.scratch.transcript)),
            hermetic=launch.attestation(self.binary_name, self.pin, version, (self.model_url or "").rstrip("/"),
                                        self.work, self.vendor_rows()),
        ))
        self.reported(version)
        endpoint = None if self.access.scenario is not None or not self.model_url else self.model_url.rstrip("/")
        self.turns = Turns(self.rpc, self.translator, self.ctx, session_id=self.session.id,
                           binary_name=self.binary_name, endpoint=endpoint, provider=self.model_provider,
                           model_failed=self.model_failed)

    def _unreadable(self, raw: bytes, line: int) -> None:
        self.ctx.opaque(raw, vendor_type=None, vendor_subtype=None, source_line=line)

    # --- seam hooks -----------------------------------------------------------------------
    def _call_of(self, tool_call: dict, final: bool) -> tuple[str, Any, str | None] | None:
        assert self.translator is not None
        self.translator.flush()
        self.translator.call(str(tool_call.get("toolCallId"))).asked = True
        return self.call_of(tool_call, final)

    def _turn_running(self) -> bool:
        return self.turns is not None and self.turns.running

    def _settled(self, call_id: str) -> bool:
        call = self.translator.calls.get(call_id) if self.translator else None
        return protocol.settled(self._turn_running(), call.status if call is not None else None)

    def _cancel_turn(self) -> None:
        params = self.session.cancel()
        if self.rpc is not None and params is not None and not self.rpc.stdin_closed:
            try:
                self.rpc.notify("session/cancel", params)
            except RpcClosed:
                pass

    def _mode_changed(self, mode: str) -> None:
        if self.mode_allowed(mode):
            return
        error = self.session.mode_changed(self.binary_name, mode, self.initial_mode)
        self.ctx.warn(WarningCode.VENDOR_ERROR, f"{error}, which may stop it asking, so the run ends")
        if self.seam is not None:
            self.seam.cancel_all()
        self._close_stdin()
        if self.child is not None and self.child.running():
            launch.kill_group(self.child.proc.pid)

    # --- turns ----------------------------------------------------------------------------
    async def begin_turn(self, text: str, frame: Frame | None = None) -> None:
        assert self.turns is not None
        await self.turns.begin(text)

    # --- controls -------------------------------------------------------------------------
    async def _steer(self, command: Steer) -> None:
        raise ControlRefused(CommandCode.UNSUPPORTED_CONTROL, "ACP has no way to add a message to a running turn; "
                                                    "message.inject reaches the next turn")

    def abandoning(self, cause: Abandonment) -> None:
        # The abandonment denies of an interrupt or a stop come next. The cancel goes out first: an
        # agent that read a reject before the cancel hands it to the model — one more model
        # request — before it sees the cancel (Gemini CLI did, on a loaded machine).
        self._cancel_turn()
        self.session.cancel_sent = True
        if self.seam is not None:
            self.seam.cancelling = True

    async def _interrupt(self, command: Interrupt) -> None:
        if self.seam is not None:
            self.seam.cancel_all()
        if not self.session.cancel_sent:
            self._cancel_turn()
        self.session.cancel_sent = False
        if self.seam is not None:
            self.seam.cancelling = False
        if self.rpc is not None:
            await self.rpc.drain()
        if self.rpc is None or not self.rpc.reaches_the_peer():  # never `ok` for a cancel sent to nobody
            raise BrokenPipeError("the agent has exited, so the cancel reached nothing")

    controls = {Steer: _steer, Interrupt: _interrupt}  # no posture: ACP agents take none

    async def finish(self) -> None:
        if self.turns is not None:
            await self.turns.done()
        self._close_stdin()

    def _close_stdin(self) -> None:
        if self.rpc is not None:
            self.rpc.close_stdin()

    async def halt(self) -> None:
        self.session.stopped(self._turn_running(), self.translator.turns_completed if self.translator else 0)
        if self.seam is not None:
            self.seam.cancel_all()
        self._cancel_turn()
        if self.rpc is not None:
            await self.rpc.drain()
        self._close_stdin()
        if self.child is not None:
            await self.child.halt(2)

    async def exited(self) -> None:
        # The child's `wait` read the end (`dies_with_its_output`): closed by us (finish, halt, a mode
        # change, the seam's escalation — the agent exits at once) or died.
        self.session.died = self.child is not None and self.child.died
        if self.turns is not None:
            await self.turns.done()
        if self.translator is not None and self.session.ending():
            self.ctx.session_ended(self.translator.session_ended(error=self.session.end_error))
        if self.seam is not None:
            self.seam.stop_timers()



__all__ = ["AcpAdapter"]
