"""`ClaudeAdapter` — Claude Code 2.1.328 under metaharness (docs/guides/claude-and-codex.md).

What belongs here: the lifecycle glue between the run loop and one Claude process —
planning refusals, the hermetic spawn (launch.py), the `initialize` capability check,
the stdout reader feeding the translator (translate.py) and the call seam (seam.py),
and the controls: turns and injects as user lines, steer, `set_permission_mode`,
interrupt, halt.

Rules kept: the per-call seam is confirmed before the first user line (else the start
is refused by name); decisions reach the child before any control; every stdout line
is kept verbatim in the scratch transcript; the session never ends while a user line
the adapter wrote is still unconsumed; halt always ends with the whole process tree
killed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from typing import Any, ClassVar

from metaharness.adapters.base import (Adapter, ControlRefused, RunContext, StartRefusal, Tool, TurnInput, path_at,
                                      plan_loopback_script, rendering_of, stop_services)
from metaharness.adapters.process import (ScratchRefused, binary_version, is_gone, kill_tree, remove_scratch,
                                         spawn_on_channel, wait_or_kill)
from metaharness.protocol.descriptor import CapabilityDescriptor, harness_descriptor
from metaharness.protocol.refusals import CommandCode, RefusalName, Sentence
from metaharness.protocol.spec import RunSpec
from metaharness.protocol.values import (
    Decision,
    Exited,
    HermeticAttestation,
    ImposedRow,
    ProcessTermination,
    Signaled,
    UnavailableRow,
    UnknownTermination,
)

from . import launch
from .seam import CallSeam, ChannelClosed, ControlChannel, user_line
from .translate import Translator

# The tool table (docs/reference/frame.md): Agent and Task both spawn a subagent.
FILE_PATH = path_at("file_path")
TOOLS: dict[str, Tool] = {
    "Read": Tool("file.read", FILE_PATH), "Write": Tool("file.write", FILE_PATH), "Edit": Tool("file.edit", FILE_PATH),
    "Bash": Tool("shell"), "Skill": Tool("skill.load"), "Agent": Tool("subagent.spawn"), "Task": Tool("subagent.spawn"),
}
RENDERING = rendering_of(TOOLS)
INITIALIZE_TIMEOUT_S = 30.0
CONTROL_TIMEOUT_S = 10.0
STDERR_KEEP = 16384


class ClaudeAdapter(Adapter):
    kind: ClassVar[str] = "claude"
    postures: ClassVar[tuple[str, ...]] = launch.SET_POSTURES
    default_posture: ClassVar[str | None] = "default"
    turn_blocks: ClassVar[bool] = True  # one text block per frame rendering / inject / prompt
    tools = TOOLS

    def __init__(self, spec: RunSpec) -> None:
        super().__init__(spec)
        self.ctx: RunContext | None = None
        self.plan_: launch.LaunchPlan | None = None
        self.process: asyncio.subprocess.Process | None = None
        self._stdout: asyncio.StreamReader | None = None  # the control channel, our end
        self._stdin: Any = None
        self.channel: ControlChannel | None = None
        self.seam: CallSeam | None = None
        self.translator: Translator | None = None
        self.init_reply: dict[str, Any] | None = None
        self.loopback: Any = None  # LoopbackServer when --script is used
        self.proxy: Any = None  # CredentialProxy in credential mode loopback
        self._reader: asyncio.Task | None = None
        self._stderr_task: asyncio.Task | None = None
        self._stderr = bytearray()
        self._transcript: Any = None
        self._line_no = 0
        self._closing = False
        self._interrupting = False
        self._held_end: list[tuple] = []
        self._result_seen = asyncio.Event()
        self._interrupt_sent: tuple[str, asyncio.Future] | None = None  # sent ahead of its denies, reply awaited later
        self._output_ended = False  # Claude Code's stdout ended: it has exited, or is about to
        self._termination: ProcessTermination | None = None
        self._session_end_sent = False
        self._script = None
        self._binary: str | None = None

    # --- static facts ------------------------------------------------------------------
    @classmethod
    def descriptor(cls) -> CapabilityDescriptor:
        return harness_descriptor("claude", launch.PINNED_VERSION, RENDERING, registration="delivered",
                                  replace="delivered")

    def run_cwd(self) -> str:
        return self.ctx.run_cwd if self.ctx is not None else super().run_cwd()

    def stderr_tail(self) -> str:
        return bytes(self._stderr[-2000:]).decode("utf-8", "replace")

    @property
    def transcript_path(self) -> str | None:
        return self.plan_.scratch.transcript if self.plan_ else None

    # --- planning (no spawn) -----------------------------------------------------------
    def plan(self) -> None:
        spec = self.spec
        posture = spec.posture or self.default_posture
        if posture not in launch.LAUNCH_POSTURES:
            raise StartRefusal(RefusalName.PostureUnknown, f"claude does not accept the posture {posture!r}")
        path = launch.child_path(spec.vendor_dir)
        binary = launch.resolve_binary(path)  # StartRefusal VendorMissing when absent
        self._binary = binary
        if spec.strict_version:
            version = binary_version(binary, path, timeout=30,
                                     env={"HOME": "/nonexistent", **{s: "1" for s in launch.PHONE_HOME_SWITCHES}})
            if version != launch.PINNED_VERSION:
                raise StartRefusal(RefusalName.VersionOffPin, f"claude at {binary} is {version or 'of unknown version'}, "
                                                     f"off its pin {launch.PINNED_VERSION} (--strict-version)")
        mode = spec.credentials
        if spec.script:
            self._script = plan_loopback_script(spec)
        elif mode == "none" and not spec.model_endpoint:
            raise StartRefusal(RefusalName.NoModelEndpoint, Sentence.NO_MODEL_ENDPOINT)
        elif mode in ("api-key", "loopback") and not os.environ.get("ANTHROPIC_API_KEY"):
            raise StartRefusal(RefusalName.NoApiKey, f"credentials {mode} needs ANTHROPIC_API_KEY in metaharness's environment")
        cwd = os.path.abspath(spec.cwd or os.getcwd())
        base = launch.scratch_base()
        if os.path.commonpath([cwd, base]) == cwd:
            raise StartRefusal(RefusalName.ScratchInsideCwd, f"the scratch directory {base} would be inside the working "
                                                   f"directory {cwd}; run from another directory")
        memory = launch.memory_files_above(cwd)
        if memory and spec.hermetic == "strict":
            raise StartRefusal(RefusalName.MemoryFileAbove, f"a memory file above the working directory would reach the "
                                                  f"model: {memory[0]}")

    # --- start ---------------------------------------------------------------------------
    async def start(self, ctx: RunContext) -> None:
        self.ctx = ctx
        spec = self.spec
        if self._binary is None:
            self.plan()
        try:
            scratch = launch.make_scratch()
        except ScratchRefused as exc:
            raise StartRefusal(RefusalName.ScratchRefused, str(exc)) from None
        cwd = ctx.run_cwd
        path = launch.child_path(spec.vendor_dir)
        posture = spec.posture or self.default_posture
        base_url, key, placeholder, credential_how = await self._credentials(cwd)
        env = launch.build_env(scratch, path, base_url=base_url, api_key=key,
                               bypass_as_root=posture == "bypassPermissions" and os.getuid() == 0)
        argv = launch.build_argv(self._binary, posture=posture, model=spec.model)  # type: ignore[arg-type]
        self.plan_ = launch.LaunchPlan(argv=argv, env=env, cwd=cwd, scratch=scratch, placeholder=placeholder)
        self.translator = Translator(transcript_path=scratch.transcript, hermetic=self._attestation(cwd, credential_how),
                                     credential_source=spec.credentials)
        self._transcript = open(scratch.transcript, "ab", buffering=0)
        # The stdio control channel is a Unix socketpair (adapters/process/): nothing the
        # agent starts can reopen it through /proc to answer a hook or change the mode.
        self.process, self._stdout, self._stdin = await spawn_on_channel(argv, env=env, cwd=cwd)
        self.channel = ControlChannel(self._stdin.write)
        self.seam = CallSeam(self.channel, ctx.present, cwd=None)
        self._stderr_task = asyncio.create_task(self._read_stderr())
        self._reader = asyncio.create_task(self._read_stdout())
        timeout_s = launch.hook_timeout_s(spec.decision_timeout_ms)
        request_id = self.channel.next_request_id()
        request = launch.initialize_request(request_id, timeout_s)["request"]
        try:
            _, future = self.channel.send_request(request, request_id)
            reply = await asyncio.wait_for(asyncio.shield(future), INITIALIZE_TIMEOUT_S)
        except (asyncio.TimeoutError, ChannelClosed, ConnectionError, BrokenPipeError) as exc:
            detail = self.stderr_tail().strip() or str(exc) or type(exc).__name__
            raise StartRefusal(RefusalName.VendorCapability, f"claude did not answer the initialize request: {detail}") from None
        self.init_reply = launch.check_initialize_reply(reply)
        version = self.init_reply.get("claude_code_version")
        if version != launch.PINNED_VERSION:
            if spec.strict_version:
                raise StartRefusal(RefusalName.VersionOffPin, f"claude reports version {version}, off its pin "
                                                     f"{launch.PINNED_VERSION} (--strict-version)")
            ctx.warn("VERSION_OFF_PIN", f"claude reports version {version}; the adapter is pinned to "
                                        f"{launch.PINNED_VERSION}")

    async def _credentials(self, cwd: str) -> tuple[str | None, str, str | None, str]:
        """(base URL, key the child sees, placeholder or None, how — for the attestation)."""
        spec = self.spec
        if spec.script:
            from metaharness.loopback.server import LoopbackServer

            if self._script is None:
                from metaharness.protocol.scenario import load_scenario

                self._script = load_scenario(spec.script)
            key = launch.per_run_placeholder()  # the loopback answers only this run's key, like the proxy
            self.loopback = LoopbackServer(self._script, workdir=cwd, stderr=None, on_failure=self.model_failed, expect_key=key,
                                           meter=getattr(getattr(self, "ctx", None), "meter", None))
            url = await self.loopback.start()
            return url, key, key, f"scripted loopback model at {url}, per-run placeholder key"
        if spec.credentials == "none":
            return spec.model_endpoint, launch.PLACEHOLDER_KEY, launch.PLACEHOLDER_KEY, \
                f"endpoint {spec.model_endpoint}, placeholder key"
        real_key = os.environ["ANTHROPIC_API_KEY"]
        if spec.credentials == "loopback":
            from metaharness.loopback.proxy import CredentialProxy

            upstream = spec.model_endpoint or "https://api.anthropic.com"
            self.proxy = CredentialProxy(upstream, real_key, placeholder=launch.per_run_placeholder(), wire="anthropic",
                                         on_refused=self._proxy_refused, on_failure=self.model_failed,
                                         meter=getattr(getattr(self, "ctx", None), "meter", None))
            url = await self.proxy.start()
            return url, self.proxy.placeholder, self.proxy.placeholder, \
                f"per-run proxy on {url} holds the key; the child has a per-run placeholder"
        return spec.model_endpoint, real_key, None, "ANTHROPIC_API_KEY from the caller"

    def _attestation(self, cwd: str, credential_how: str) -> HermeticAttestation:
        spec = self.spec
        imposed = [
            ImposedRow(row="h1a", how="CLAUDE_CONFIG_DIR is an empty per-run directory; no plugins"),
            ImposedRow(row="h1b", how="an empty config home leaves the default output style"),
            ImposedRow(row="h2", how='--setting-sources ""'),
            ImposedRow(row="h3", how="constructed environment: PATH HOME CLAUDE_CONFIG_DIR TMPDIR LANG "
                                     "ANTHROPIC_BASE_URL ANTHROPIC_API_KEY and the four phone-home switches "
                                     "(CLAUDE_CODE_MAX_RETRIES and API_TIMEOUT_MS when the caller sets them)"),
            ImposedRow(row="h5", how="--strict-mcp-config with no --mcp-config"),
            ImposedRow(row="h6", how=credential_how),
            ImposedRow(row="h7", how=f"cwd {cwd}"),
            ImposedRow(row="h8", how="no --bare or --safe-mode; CLAUDE_CODE_SIMPLE unset"),
        ]
        if spec.credentials != "api-key":
            imposed.insert(4, ImposedRow(row="h4", how="the child holds a placeholder, never a real key"))
        unavailable = []
        if spec.strict_version:
            imposed.append(ImposedRow(row="h9", how=f"--version checked against {launch.PINNED_VERSION}"))
        else:
            unavailable.append(UnavailableRow(row="h9", why="checked only in the initialize reply (VERSION_OFF_PIN "
                                                            "warns); pass --strict-version to refuse"))
        unavailable.append(UnavailableRow(row="h10", why="the claude adapter copies no governing documents"))
        memory = launch.memory_files_above(cwd)
        if memory:
            unavailable.append(UnavailableRow(row="h11", why=f"memory file above the working directory: {memory[0]}"))
        else:
            imposed.append(ImposedRow(row="h11", how=f"no memory file above {cwd}"))
        if spec.credentials == "api-key":
            unavailable.append(UnavailableRow(row="h4", why="credentials api-key: the child holds the caller's key"))
        return HermeticAttestation(
            mode=spec.hermetic, decisions=spec.decisions, imposed=imposed, unavailable=unavailable,
            ambient_inputs=["Claude Code's environment block (working directory, platform, date, git status) "
                            "in the first user message"],
            deny_only=spec.deny_only,
        )

    # --- reading ---------------------------------------------------------------------------
    async def _read_stderr(self) -> None:
        assert self.process and self.process.stderr
        while True:
            chunk = await self.process.stderr.read(4096)
            if not chunk:
                return
            self._stderr += chunk
            if len(self._stderr) > STDERR_KEEP:
                del self._stderr[:-STDERR_KEEP]

    async def _read_stdout(self) -> None:
        assert self._stdout is not None
        stdout = self._stdout
        try:
            while True:
                try:
                    raw = await stdout.readline()
                except ValueError:  # a line above the limit: keep what arrived, as opaque
                    raw = await stdout.read(64 * 1024 * 1024)
                except OSError:  # the channel was reset: its output has ended
                    break
                if not raw:
                    break
                self._on_line(raw, time.perf_counter_ns())
        finally:
            self._output_ended = True
            if self.channel is not None:
                self.channel.fail_waiting("claude's output ended")
            self._release_held_end()
            self._finish_session()

    def _on_line(self, raw: bytes, read_ns: int) -> None:
        self._line_no += 1
        if self._transcript is not None:
            self._transcript.write(raw if raw.endswith(b"\n") else raw + b"\n")
        assert self.translator is not None
        for item in self.translator.feed(raw, self._line_no):
            if self._interrupting and item[0] in ("turn_ended", "result"):
                # The interrupt's command.result precedes the turn.ended it causes.
                self._held_end.append(item)
                continue
            self._dispatch(item, read_ns)

    def _dispatch(self, item: tuple, read_ns: int) -> None:
        assert self.seam is not None and self.ctx is not None
        ctx = self.ctx
        kind = item[0]
        if kind == "control":
            self._on_control(item[1], read_ns)
        elif kind == "emit":
            ctx.emit(item[1], at=item[2])
        elif kind == "call":
            self.seam.on_tool_use(item[1], item[2], item[3], item[4], read_ns)
        elif kind == "session_started":
            ctx.session_started(item[1], at=item[2])
        elif kind == "turn_started":
            ctx.turn_started(at=item[1])
        elif kind == "turn_ended":
            ctx.turn_ended(item[1], at=item[2])
        elif kind == "result":
            self._result_seen.set()
            self._maybe_close()
        elif kind == "opaque":
            ctx.opaque(item[4], vendor_type=item[1], vendor_subtype=item[2], source_line=item[3])

    def _on_control(self, record: dict[str, Any], read_ns: int) -> None:
        assert self.seam is not None and self.channel is not None
        rtype = record.get("type")
        if rtype == "control_response":
            self.channel.on_control_response(record)
        elif rtype == "control_cancel_request":
            self.seam.on_cancel(record)
        elif rtype == "control_request":
            request = record.get("request") if isinstance(record.get("request"), dict) else {}
            if request.get("subtype") == "hook_callback":
                self.seam.on_callback(record, read_ns)
            elif isinstance(record.get("request_id"), str):
                # Nothing else was registered; refuse rather than guess (fail-closed).
                try:
                    from .seam import error_response

                    self.channel.write(error_response(record["request_id"],
                                                      f"metaharness does not serve {request.get('subtype')!r}"))
                except ChannelClosed:
                    pass

    def _finish_session(self) -> None:
        """End of the child's output: the last `result` is the session's terminal record."""
        if self._session_end_sent or self.ctx is None or self.translator is None:
            return
        self._session_end_sent = True
        for item in self.translator.release_held():
            if item[0] == "emit":
                self.ctx.emit(item[1], at=item[2])
            elif item[0] == "opaque":
                self.ctx.opaque(item[4], vendor_type=item[1], vendor_subtype=item[2], source_line=item[3])
        if self.translator.last_result is not None:
            self.ctx.session_ended(self.translator.last_result, at=self.translator.last_result_at)

    # --- turns and controls -----------------------------------------------------------------
    def _write_user(self, kind: str, blocks: list[str]) -> None:
        assert self.channel is not None and self.translator is not None
        self.translator.expect_replay(kind, blocks)
        self.channel.write(user_line(blocks))

    async def begin_turn(self, text: TurnInput) -> None:
        blocks = [text] if isinstance(text, str) else [b for b in text if b]
        if not blocks or blocks == [""]:
            blocks = [" "]  # Claude needs some text to start a turn
        try:
            self._write_user("prompt", blocks)
        except (ChannelClosed, ConnectionError, BrokenPipeError):
            pass  # the child is gone; the loop sees its output end

    def turn_coming(self) -> bool:
        """A user line written but not yet consumed starts a turn of its own."""
        return self.translator is not None and self.translator.unreplayed > 0 and not self._closing

    def deliver(self, call_id: str, decision: Decision, decided_by: str) -> None:
        if self.seam is not None:
            self.seam.deliver(call_id, decision)

    async def steer(self, text: str) -> None:
        if self.translator is None or not self.translator.in_turn:
            raise ControlRefused(CommandCode.TOO_LATE, Sentence.NOTHING_TO_STEER)
        try:
            self._write_user("steer", [text])
        except (ChannelClosed, ConnectionError, BrokenPipeError):
            raise ControlRefused(CommandCode.TOO_LATE, "the run is ending") from None
        return None

    async def set_posture(self, word: str) -> str | None:
        if word not in self.postures:
            raise ControlRefused(CommandCode.UNSUPPORTED_CONTROL, f"the claude adapter does not accept the posture {word!r}")
        assert self.channel is not None
        try:
            reply = await self.channel.request({"subtype": "set_permission_mode", "mode": word}, CONTROL_TIMEOUT_S)
        except (ChannelClosed, asyncio.TimeoutError, ConnectionError, BrokenPipeError) as exc:
            raise ControlRefused(CommandCode.TOO_LATE, f"claude did not take the posture: {exc or 'no reply'}") from None
        if reply.get("subtype") != "success":
            code = reply.get("error_code")
            words = reply.get("error") or "claude refused the permission mode"
            raise ControlRefused(CommandCode.UNSUPPORTED_CONTROL, f"claude refused {word!r}: {words}" + (f" ({code})" if code else ""))
        return None

    # The interrupt goes out before the abandonment denies of an interrupt or a stop: Claude
    # Code that reads a deny first hands it to the model — one more model request — before it
    # reads the interrupt (seen on a loaded machine). The denies follow; the reply is awaited
    # by interrupt() or halt().
    def interrupting(self) -> None:
        self._interrupting = True
        self._send_interrupt()

    def stopping(self) -> None:
        if self.translator is not None and self.translator.in_turn:
            self._send_interrupt()

    def _send_interrupt(self) -> None:
        if self._interrupt_sent is not None or self.channel is None or self.channel.closed:
            return
        self._result_seen.clear()
        try:
            self._interrupt_sent = self.channel.send_request({"subtype": "interrupt"})
        except (ChannelClosed, ConnectionError, BrokenPipeError):
            pass

    async def _interrupt_replied(self, timeout: float) -> bool:
        """Send the interrupt unless it went out already; wait for its reply. False when it could
        not be sent (the channel is closed)."""
        assert self.channel is not None
        self._send_interrupt()
        sent, self._interrupt_sent = self._interrupt_sent, None
        if sent is None:
            return False
        await self.channel.reply(sent, timeout)
        return True

    async def interrupt(self) -> None:
        assert self.channel is not None and self.seam is not None
        self._interrupting = True
        try:
            self.seam.deny_unanswered("the run was interrupted before this call was decided, so nothing ran")
            if not self._output_ended and await self._interrupt_replied(CONTROL_TIMEOUT_S):
                return
        except asyncio.TimeoutError:
            return  # a child that is ending runs no further turn either
        except (ChannelClosed, ConnectionError):
            pass
        finally:
            # Released after the caller wrote the interrupt's command.result (same task step).
            asyncio.get_running_loop().call_soon(self._release_held_end)
        raise BrokenPipeError("Claude Code has exited, so the interrupt reached nothing")  # never `ok` then

    def _release_held_end(self) -> None:
        self._interrupting = False
        held, self._held_end = self._held_end, []
        for item in held:
            self._dispatch(item, 0)

    def _proxy_refused(self, method: str, target: str) -> None:
        from metaharness.loopback.proxy import refused_message

        if self.ctx is not None:
            self.ctx.warn("PROXY_REFUSED", refused_message(method, target))

    def alive(self) -> bool:
        """False once Claude Code exited or its output ended (before it was reaped)."""
        return self.process is None or not (self._output_ended or is_gone(self.process))

    async def finish(self) -> None:
        self._closing = True
        self._maybe_close()

    def _maybe_close(self) -> None:
        """Close stdin once finishing and no written user line waits to be consumed."""
        if not self._closing or self.translator is None or self.channel is None:
            return
        if self.translator.unreplayed or self.translator.in_turn:
            return
        self._close_stdin()

    def _close_stdin(self) -> None:
        if self.channel is not None and not self.channel.closed:
            self.channel.closed = True
            if self._stdin is not None:
                try:
                    self._stdin.close()
                except (ConnectionError, BrokenPipeError):
                    pass

    async def halt(self) -> None:
        process = self.process
        if process is None:
            await self._stop_services()
            return
        if process.returncode is None and self.channel is not None and not self.channel.closed:
            if self.seam is not None:
                self.seam.deny_unanswered("the run was halted before this call was decided, so nothing ran")
            if self._interrupt_sent is not None or (self.translator is not None and self.translator.in_turn):
                try:
                    await self._interrupt_replied(2.0)
                    await asyncio.wait_for(self._result_seen.wait(), 2.0)
                except (ChannelClosed, asyncio.TimeoutError, ConnectionError, BrokenPipeError):
                    pass
        self._close_stdin()
        await wait_or_kill(process, 2.0)

    async def wait(self) -> ProcessTermination:
        process = self.process
        if process is None:
            await self._stop_services()
            return UnknownTermination()
        if self._reader is not None:
            await self._reader
        code = await process.wait()
        # Tool commands may run in groups of their own: sweep what the child left behind.
        kill_tree(process.pid)
        if self._stderr_task is not None:
            try:
                await asyncio.wait_for(self._stderr_task, 2.0)
            except asyncio.TimeoutError:
                self._stderr_task.cancel()
        if self._transcript is not None:
            self._transcript.close()
            self._transcript = None
        await self._stop_services()
        self._termination = Exited(code=code) if code >= 0 else Signaled(signal=-code)
        return self._termination

    async def _stop_services(self) -> None:
        await stop_services((self.loopback, self.proxy))

    def cleanup(self) -> None:
        # Scratch homes die with the run (--retain-dir keeps the transcript); a scratch base the
        # operator chose is kept for inspection (adapters/process/scratch.py).
        remove_scratch(self.plan_.scratch.root if self.plan_ is not None else None)

    def retain(self, directory: str) -> list[str]:
        if self.plan_ is None:
            return []
        try:
            os.makedirs(directory, exist_ok=True)
            shutil.copyfile(self.plan_.scratch.transcript, os.path.join(directory, "claude-transcript.jsonl"))
        except OSError as exc:
            return [f"{self.plan_.scratch.transcript} → {directory}: {exc.strerror or exc}"]
        return []
