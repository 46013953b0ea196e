"""`AcpAdapter` — one ACP agent per run, every tool call asked and decided, fail-closed.

What belongs here: the lifecycle every ACP agent shares — plan (the vendor start's
(`adapters/vendor.py`) and ACP's own refusals), spawn with a scratch home, `initialize`,
`session/new`, one `session/prompt` per turn, the controls, and wind-up. Each vendor (one
module of this package per ACP kind in the registry) is a subclass that fills in the contract
of `contract.py`: how it is pinned, how a permission request becomes a call and how a call
resolves, and which mode it must stay in.

Rules kept:
* no client capability is advertised (no `fs`, no `terminal`): the agent does its own I/O,
  and each such I/O is a tool call it must ask about;
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

from metaharness.adapters.base import ControlRefused, StartRefusal, own_version
from metaharness.adapters.process import Scratch
from metaharness.adapters.vendor import VendorAdapter, plan_model
from metaharness.protocol.events import SessionStarted
from metaharness.protocol.failures import ModelFailure, bounded
from metaharness.protocol.refusals import CommandCode, RefusalName, WarningCode
from metaharness.protocol.spec import RunSpec
from metaharness.protocol.values import TranscriptRef

from . import launch, reach
from .contract import AcpVendor
from .rpc import RpcChannel, RpcClosed, RpcError
from .seam import Seam
from .translate import Translator, failure_text, session_model

HANDSHAKE_TIMEOUT_S = 120.0  # opencode's session/new takes seconds; a loaded machine more
PROTOCOL_VERSION = 1


class AcpAdapter(AcpVendor, VendorAdapter):
    handshake_errors = (RpcClosed, RpcError, asyncio.TimeoutError)

    # --- shared -------------------------------------------------------------------------
    def __init__(self, spec: RunSpec) -> None:
        super().__init__(spec)
        self.work: str | None = None
        self.rpc: RpcChannel | None = None
        self.seam: Seam | None = None
        self.translator: Translator | None = None
        self.session_id: str | None = None
        self.initial_mode: str | None = None
        self.agent_info: dict = {}
        self._prompt: asyncio.Task | None = None
        self._end_error: str | None = None
        self._cancel_sent = False  # interrupting() sent the turn's cancel ahead of its denies
        self._ended = False  # no session.ended to write (written, or a refused start)
        self._died = False  # the output ended while the agent's stdin was still open

    def plan(self) -> None:
        self.plan_work()
        if self.spec.deny_only:
            raise StartRefusal(RefusalName.DenyOnlyUnavailable, (
                f"--deny-only needs a harness permission pipeline that decides an abstained call, and {self.kind} is "
                "pinned to ask metaharness about every call, so an abstain would grant"))
        self.access = plan_model(self.spec, (), None)
        self.vendor_plan()
        self.plan_binary(probe=True)  # its version, should the agent's `initialize` name none
        self.plan_scratch()

    # --- start --------------------------------------------------------------------------
    def make_scratch(self) -> Scratch:
        self.work = self.spec.work_dir()
        return launch.make_scratch(self.kind, self.work)

    async def launch(self) -> None:
        child = self.child
        assert child is not None and child.scratch is not None and self.binary is not None
        scratch = child.scratch
        base_url = (self.model_url or "").rstrip("/")
        env = {**launch.child_env(scratch, self.child_path), **self.vendor_env(scratch, base_url)}
        # The ACP channel is a socketpair (the agent's shell cannot reopen it through /proc) and
        # the agent runs confined where the platform allows, with a parent-death signal.
        agent_out, agent_in = await child.spawn(self.vendor_argv(self.binary), env=env, cwd=self.work)
        self.translator = Translator(self.ctx, on_arguments=lambda call_id: self.seam.arguments_arrived(call_id),
                                     on_mode=self._mode_changed, name_of=self.tool_name_of,
                                     takes_cost=self.prices_its_model)
        self.rpc = RpcChannel(agent_out, agent_in, child.open(scratch.transcript),
                              on_request=lambda m, raw, n: self.seam.on_request(m, raw, n),
                              on_notification=self.translator.notification,
                              on_unreadable=self._unreadable, on_wire=self.record_sent)
        self.seam = Seam(self.rpc, self.ctx, self.kind, self.vendor_timeout_ms(self.spec.decision_timeout_ms),
                         call_of=self._call_of, settled=self._settled, cancel_turn=self._cancel_turn,
                         hold_s=self.hold_s, takeup_s=self.takeup_s)
        child.read(self.rpc.read_forever())

    def start_refused(self) -> None:
        self._ended = True
        self._close_stdin()
        if self.seam is not None:
            self.seam.stop_timers()

    async def handshake(self) -> None:
        assert self.rpc is not None and self.translator is not None and self.scratch is not None
        init = await self.rpc.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
            "clientInfo": {"name": "metaharness", "version": own_version()},
        }, timeout=HANDSHAKE_TIMEOUT_S)
        self.agent_info = (init or {}).get("agentInfo") or {} if isinstance(init, dict) else {}
        result = await self.rpc.request("session/new", {"cwd": self.work, "mcpServers": []},
                                        timeout=HANDSHAKE_TIMEOUT_S)
        if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
            raise StartRefusal(RefusalName.VendorCapability, f"{self.binary_name} answered session/new without a session id")
        self.session_id = result["sessionId"]
        self.check_session(result)
        version = self.agent_info.get("version") or self.version
        self.ctx.session_started(SessionStarted(
            adapter=self.kind, harness_version=version, session_id=self.session_id,
            model=self.spec.model or session_model(result), permission_mode=self.initial_mode, cwd=self.work,
            transcript=TranscriptRef(path=str(self.scratch.transcript)),
            hermetic=launch.attestation(self.binary_name, self.pin, version, (self.model_url or "").rstrip("/"),
                                        self.work, self.vendor_rows()),
        ))
        self.reported(version)

    def _unreadable(self, raw: bytes, line: int) -> None:
        self.ctx.opaque(raw, vendor_type=None, vendor_subtype=None, source_line=line)

    # --- seam hooks -----------------------------------------------------------------------
    def _call_of(self, tool_call: dict, final: bool) -> tuple[str, Any, str | None] | None:
        assert self.translator is not None
        self.translator.flush()
        self.translator.call(str(tool_call.get("toolCallId"))).asked = True
        return self.call_of(tool_call, final)

    def _settled(self, call_id: str) -> bool:
        if self._prompt is None or self._prompt.done():
            return True  # the turn is over: nothing of it can still run
        call = self.translator.calls.get(call_id) if self.translator else None
        return call is not None and call.status in ("completed", "failed")

    def _cancel_turn(self) -> None:
        if self.rpc is not None and self.session_id is not None and not self.rpc.stdin_closed:
            try:
                self.rpc.notify("session/cancel", {"sessionId": self.session_id})
            except RpcClosed:
                pass

    def _mode_changed(self, mode: str) -> None:
        if self.mode_allowed(mode):
            return
        self._end_error = f"{self.binary_name} switched to mode {mode!r}; the pinned mode is {self.initial_mode!r}"
        self.ctx.warn(WarningCode.VENDOR_ERROR, f"{self._end_error}, which may stop it asking, so the run ends")
        if self.seam is not None:
            self.seam.cancel_all()
        self._close_stdin()
        if self.child is not None and self.child.running():
            launch.kill_group(self.child.proc.pid)

    # --- turns ----------------------------------------------------------------------------
    async def begin_turn(self, text: str) -> None:
        assert self.rpc is not None
        self.ctx.turn_started()
        future = self.rpc.send_request("session/prompt", {"sessionId": self.session_id,
                                                          "prompt": [{"type": "text", "text": text}]})
        await self.rpc.drain()
        self._prompt = asyncio.get_running_loop().create_task(self._await_prompt(future))

    async def _await_prompt(self, future: asyncio.Future) -> None:
        assert self.translator is not None
        try:
            result = await future
        except RpcError as exc:
            self.translator.flush()
            self.translator.last_error = f"{self.binary_name} failed the prompt: {failure_text(exc)}"
            await self._unreachable_endpoint(self.translator.last_error)
            self.ctx.warn(WarningCode.VENDOR_ERROR, self.translator.last_error)
            self.ctx.turn_ended("error")
            return
        except RpcClosed:
            return  # the child went away; the stream's end says so
        self.ctx.turn_ended(self.translator.prompt_result(result))

    async def _unreachable_endpoint(self, sentence: str) -> None:
        """A direct endpoint (no loopback in between to see the request): when the agent failed a
        prompt and the endpoint cannot be reached now, that is the model failure, named by kind."""
        if self.access.scenario is not None or not self.model_url:
            return
        kind = await reach.probe(self.model_url.rstrip("/"))
        if kind is not None:
            self.model_failed(ModelFailure(provider=self.model_provider, kind=kind, provider_message=bounded(sentence)))

    # --- controls -------------------------------------------------------------------------
    async def steer(self, text: str) -> None:
        raise ControlRefused(CommandCode.UNSUPPORTED_CONTROL, "ACP has no way to add a message to a running turn; "
                                                    "message.inject reaches the next turn")

    def interrupting(self) -> None:
        # The interrupt's abandonment denies come next, then interrupt(). The cancel goes out
        # first: an agent that read a reject before the cancel hands it to the model — one more
        # model request — before it sees the cancel (Gemini CLI did, on a loaded machine).
        self._cancel_turn()
        self._cancel_sent = True
        if self.seam is not None:
            self.seam.cancelling = True

    def stopping(self) -> None:
        # A stop's abandonment denies come next, then halt(): the cancel goes first, as for an interrupt.
        self.interrupting()

    async def interrupt(self) -> None:
        if self.seam is not None:
            self.seam.cancel_all()
        if not self._cancel_sent:
            self._cancel_turn()
        self._cancel_sent = False
        if self.seam is not None:
            self.seam.cancelling = False
        if self.rpc is not None:
            await self.rpc.drain()
        if self.rpc is None or not self.rpc.reaches_the_peer():  # never `ok` for a cancel sent to nobody
            raise BrokenPipeError("the agent has exited, so the cancel reached nothing")

    def alive(self) -> bool:
        return self.child is not None and self.child.proc is not None and super().alive() \
            and self.rpc is not None and self.rpc.reaches_the_peer()

    async def finish(self) -> None:
        if self._prompt is not None and not self._prompt.done():
            await asyncio.gather(self._prompt, return_exceptions=True)
        self._close_stdin()

    def _close_stdin(self) -> None:
        if self.rpc is not None:
            self.rpc.close_stdin()

    async def halt(self) -> None:
        # A stop (halt, SIGTERM/SIGINT) while a turn runs, or before any turn ran, is no clean end
        # of the session; the session.ended assembled when the agent exits must say so, or the
        # stream closes `completed` for a run a signal cut short (the agent answers the cancel
        # with stopReason `cancelled`, which alone reads as a clean end). The other harnesses
        # close such a run `error`; a stop at a boundary after a turn stays a clean end.
        turn_running = self._prompt is not None and not self._prompt.done()
        if self._end_error is None and (turn_running or self.translator is None
                                        or self.translator.turns_completed == 0):
            self._end_error = ("the run was stopped before its turn ended" if turn_running
                               else "the run was stopped before its first turn")
        if self.seam is not None:
            self.seam.cancel_all()
        self._cancel_turn()
        if self.rpc is not None:
            await self.rpc.drain()
        self._close_stdin()
        if self.child is not None:
            await self.child.halt(2)

    async def wait(self):
        if self.child is not None and self.child.termination is None:
            await self.child.output()
            # stdout ended: either we closed stdin (finish, halt, a mode change, the seam's
            # escalation — the agent exits at once) or it died.
            self._died = self.rpc is None or not self.rpc.stdin_closed
            if self._died and self.child.running():
                launch.kill_group(self.child.proc.pid)
        return await super().wait()

    async def exited(self) -> None:
        if self._prompt is not None and not self._prompt.done():
            await asyncio.gather(self._prompt, return_exceptions=True)
        if self.translator is not None and not self._ended and not self._died:
            self._ended = True
            self.ctx.session_ended(self.translator.session_ended(error=self._end_error))
        if self.seam is not None:
            self.seam.stop_timers()

    def kept(self) -> list[tuple[Any, str]]:
        if self.scratch is None:
            return []
        return [(source, f"{self.kind}-{source.name}") for source in (self.scratch.transcript, self.scratch.sent)]


__all__ = ["AcpAdapter"]
