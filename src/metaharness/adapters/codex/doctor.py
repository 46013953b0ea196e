"""`metaharness doctor codex` and `metaharness conformance codex` (docs/guides/claude-and-codex.md).

What belongs here: the checks, each returning one `Check` (ok or FAIL with a
one-sentence reason). Checks 1–5 never call a model; check 6 (`--smoke`) runs one
sandboxed `exec_command` through an in-process loopback. The conformance check
compares the adapter's descriptor with what the binary's protocol surface offers.

Rules kept: the binary is looked for on the child PATH only; every check
uses a throwaway CODEX_HOME with the loopback-safe config; a check that
cannot run says why instead of raising.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaharness.adapters.process import remove_scratch, wait_or_kill

from . import launch
from .rpc import RpcChannel

SCHEMA_NAMES = (
    "thread/start", "turn/start", "turn/steer", "turn/interrupt", "thread/inject_items",
    "item/commandExecution/requestApproval", "item/fileChange/requestApproval", "serverRequest/resolved",
)


@dataclass
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok' if self.ok else 'FAIL'}  {self.name}: {self.detail}"


class _Env:
    """A throwaway hermetic layout for the doctor's own spawns."""

    def __init__(self, vendor_dir: str | None, base_url: str = "http://127.0.0.1:9/v1") -> None:
        self.path = launch.child_path(vendor_dir)
        self.scratch = launch.make_scratch(None)
        (self.scratch / launch.CODEX_HOME / "config.toml").write_text(launch.config_toml(base_url))
        self.env = launch.child_env(self.scratch, self.path, launch.KEY_VARIABLE, launch.PLACEHOLDER_KEY)

    def cleanup(self) -> None:
        remove_scratch(self.scratch.root, keep_chosen=False)  # the doctor keeps nothing


def _run(argv: list[str], env: _Env, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env.env, cwd=str(env.scratch / "work"), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def check_binary(vendor_dir: str | None) -> tuple[Check, str | None]:
    path = launch.child_path(vendor_dir)
    try:
        binary = launch.resolve_binary(path)
    except launch.LaunchError as exc:
        return Check("binary", False, str(exc)), None
    node = shutil.which("node", path=path)
    return Check("binary", True, f"{binary} (node {node})"), binary


def check_version(binary: str, env: _Env) -> Check:
    try:
        out = _run([binary, "--version"], env).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("version", False, f"codex --version failed: {exc}")
    version = next((t for t in out.split() if t[:1].isdigit()), None)
    if version != launch.PIN:
        return Check("version", False, f"codex --version says {out.strip()!r}, not the pin {launch.PIN}")
    try:
        startup = _run([binary, "app-server", "--print-startup-config"], env)
        first = startup.stdout.strip().splitlines()[0] if startup.stdout.strip() else ""
        data = json.loads(first) if first else {}
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return Check("version", False, f"codex app-server --print-startup-config failed: {exc}")
    if data.get("appServerVersion") != launch.PIN:
        return Check("version", False, f"--print-startup-config reports appServerVersion {data.get('appServerVersion')!r} "
                                       f"(exit {startup.returncode}; {startup.stderr.strip()[-200:]})")
    return Check("version", True, f"codex-cli {version}; the hermetic config validates")


def check_help(binary: str, env: _Env) -> Check:
    done = _run([binary, "app-server", "--help"], env)
    if done.returncode != 0:
        return Check("flags", False, f"codex app-server --help exited {done.returncode}")
    return Check("flags", True, "codex app-server --help succeeds")


async def _handshake(binary: str, env: _Env, sandbox: str = "workspace-write") -> tuple[Any, RpcChannel, dict, dict]:
    proc = await asyncio.create_subprocess_exec(
        binary, "app-server", cwd=str(env.scratch / "work"), env=env.env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, start_new_session=True,
        limit=64 * 1024 * 1024)
    requests: list[dict] = []
    notes: list[dict] = []
    transcript = open(env.scratch.transcript, "wb")
    rpc = RpcChannel(proc.stdout, proc.stdin, transcript,
                     on_request=lambda m, raw, n: requests.append(m),
                     on_notification=lambda m, raw, n: notes.append(m))
    rpc.requests, rpc.notes = requests, notes  # type: ignore[attr-defined]
    rpc.reader = asyncio.get_running_loop().create_task(rpc.read_forever())  # type: ignore[attr-defined]
    init = await rpc.request("initialize", {
        "clientInfo": {"name": "metaharness", "title": None, "version": "doctor"},
        "capabilities": {"experimentalApi": False, "requestAttestation": False}}, timeout=60)
    rpc.notify("initialized")
    thread = await rpc.request("thread/start", {"cwd": str(env.scratch / "work"), "approvalPolicy": "untrusted",
                                                "sandbox": sandbox}, timeout=60)
    return proc, rpc, init, thread


async def _close(proc: Any, rpc: RpcChannel, within: float = 5) -> int | None:
    await rpc.drain()
    rpc.close_stdin()
    if not await wait_or_kill(proc, within):
        await proc.wait()
        return None
    code = proc.returncode
    await asyncio.gather(rpc.reader, return_exceptions=True)  # type: ignore[attr-defined]
    return code


def check_channel(binary: str, env: _Env) -> Check:
    async def probe() -> Check:
        proc, rpc, init, thread = await _handshake(binary, env)
        agent = (init or {}).get("userAgent", "")
        code = await _close(proc, rpc)
        if f"/{launch.PIN} " not in agent:
            return Check("channel", False, f"initialize userAgent {agent!r} does not carry /{launch.PIN}")
        sandbox = (thread or {}).get("sandbox") or {}
        if thread.get("approvalPolicy") != "untrusted" or sandbox.get("type") != "workspaceWrite":
            return Check("channel", False, f"thread/start echoed approvalPolicy {thread.get('approvalPolicy')!r}, "
                                           f"sandbox {sandbox.get('type')!r}")
        if code != 0:
            return Check("channel", False, f"the app-server did not exit 0 within 5 s of stdin closing (exit {code})")
        return Check("channel", True, "initialize and thread/start (untrusted, workspaceWrite) answered; exit 0 on stdin close")

    try:
        return asyncio.run(probe())
    except Exception as exc:  # a doctor names the failure, never a traceback
        return Check("channel", False, f"the app-server handshake failed: {exc or type(exc).__name__}")


def check_schema(binary: str, env: _Env) -> Check:
    out = tempfile.mkdtemp(prefix="schema-", dir=str(env.scratch.root))
    done = _run([binary, "app-server", "generate-json-schema", "--out", out], env)
    if done.returncode != 0:
        return Check("protocol", False, f"generate-json-schema exited {done.returncode}")
    text = ""
    for path in Path(out).rglob("*.json"):
        text += path.read_text(errors="replace")
    missing = [name for name in SCHEMA_NAMES if f'"{name}"' not in text]
    if missing:
        return Check("protocol", False, f"the schema does not name {', '.join(missing)}")
    if '"accept"' not in text or '"decline"' not in text:
        return Check("protocol", False, "the schema's command decision enum lacks accept or decline")
    return Check("protocol", True, f"the schema names the {len(SCHEMA_NAMES)} methods the adapter uses and accept/decline")


def check_smoke(binary: str, vendor_dir: str | None) -> Check:
    from metaharness.loopback.server import LoopbackServer
    from metaharness.protocol.scenario import parse_scenario

    scenario = parse_scenario(json.dumps({"format": "metaharness.scenario/1", "turns": [
        {"calls": [{"op": "shell", "input": {"command": "echo smoke > smoke.txt"}}]}, {"text": "ok"}]}))

    async def probe() -> Check:
        env = _Env(vendor_dir)
        server = LoopbackServer(scenario, workdir=str(env.scratch / "work"), stderr=None)
        url = await server.start()
        (env.scratch / launch.CODEX_HOME / "config.toml").write_text(launch.config_toml(launch.provider_base_url(url)))
        try:
            proc, rpc, _init, thread = await _handshake(binary, env)
            await rpc.request("turn/start", {"threadId": thread["thread"]["id"], "input": [
                {"type": "text", "text": "smoke", "text_elements": []}]}, timeout=30)
            item = None
            for _ in range(600):
                for request in list(rpc.requests):  # type: ignore[attr-defined]
                    if rpc.was_answered(request["id"]):
                        continue
                    answer = {"decision": "accept"} if request.get("method", "").endswith("requestApproval") else None
                    rpc.answer(request["id"], answer, None if answer else {"code": -32601, "message": "not supported"})
                done = [n for n in rpc.notes if n.get("method") == "item/completed"  # type: ignore[attr-defined]
                        and (n.get("params") or {}).get("item", {}).get("type") == "commandExecution"]
                if done:
                    item = done[0]["params"]["item"]
                    break
                await asyncio.sleep(0.05)
            await _close(proc, rpc)
        finally:
            await server.stop()
            env.cleanup()
        if item is None:
            return Check("smoke", False, "no commandExecution completed within 30 s")
        if item.get("exitCode") != 0:
            return Check("smoke", False, f"the sandboxed command failed (status {item.get('status')}, exit "
                                         f"{item.get('exitCode')}): {str(item.get('aggregatedOutput'))[-300:]} — "
                                         "the sandbox cannot start on this machine")
        return Check("smoke", True, "one exec_command accepted and completed with exitCode 0 in the sandbox")

    try:
        return asyncio.run(probe())
    except Exception as exc:
        return Check("smoke", False, f"the smoke run failed: {exc or type(exc).__name__}")


def doctor(vendor_dir: str | None = None, smoke: bool = False) -> list[Check]:
    vendor_dir = vendor_dir or launch.default_vendor_dir()
    first, binary = check_binary(vendor_dir)
    checks = [first]
    if binary is None:
        return checks
    env = _Env(vendor_dir)
    try:
        checks += [check_version(binary, env), check_help(binary, env), check_channel(binary, env),
                   check_schema(binary, env)]
    finally:
        env.cleanup()
    if smoke:
        checks.append(check_smoke(binary, vendor_dir))
    return checks


def conformance(vendor_dir: str | None = None) -> list[Check]:
    """The descriptor against the binary: every honoured command has its method in the
    schema, the call tier's approvals exist, and replace stays refused by name."""
    from . import CodexAdapter

    descriptor = CodexAdapter.descriptor()
    checks = doctor(vendor_dir, smoke=False)
    if not all(c.ok for c in checks):
        return checks
    needs = {"steer": "turn/steer", "interrupt": "turn/interrupt", "message.inject": "turn/start",
             "tool.decide": "item/commandExecution/requestApproval", "frame.set": "turn/start",
             "permission.set": "turn/start", "halt": "turn/interrupt"}
    honoured = [c for c in descriptor.commands if descriptor.command_refusal(c) is None]
    missing = [c for c in honoured if c not in needs]
    checks.append(Check("descriptor", not missing and descriptor.replace != "delivered"
                        and descriptor.tiers.call == "delivered",
                        "every honoured command maps to an app-server method; replace is "
                        f"{descriptor.replace} (refused by name)" if not missing else f"unmapped: {missing}"))
    return checks


# --- the shape cli/vendor.py dispatches to: (name, ok, detail) triples ----------------------


def doctor_checks(vendor_dir: str | None, smoke: bool = False):
    return [(c.name, c.ok, c.detail) for c in doctor(vendor_dir, smoke=smoke)]


FIXTURES = Path(__file__).resolve().parents[4] / "tests" / "fixtures" / "codex"


def conformance_checks(fixtures: str | None):
    """The free checks: recorded app-server transcripts through the translator (every
    notification yields its events or exactly one opaque, nothing raises), the descriptor's
    claims, and the launch plan's config."""
    from . import CodexAdapter
    from .translate import Translator

    results = []
    directory = Path(fixtures) if fixtures else FIXTURES
    transcripts = sorted(directory.glob("transcript-*.jsonl")) if directory.is_dir() else []
    if not transcripts:
        results.append(("translator", False, f"no recorded transcript-*.jsonl under {directory}"))
    for path in transcripts:
        sink = _CountingContext()
        translator = Translator(sink)
        translator.started = True
        try:
            for number, raw in enumerate(path.read_bytes().splitlines(), 1):
                message = json.loads(raw)
                if "method" in message and "id" not in message:
                    translator.notification(message, raw, number)
            ended = translator.session_ended()
            ok = sink.lines > 0 and ended is not None
            results.append((f"translator {path.name}", ok, f"{sink.lines} lines, {sink.opaque_count} opaque; "
                            f"session.ended {'assembled' if ended else 'missing'}"))
        except Exception as exc:
            results.append((f"translator {path.name}", False, f"replay raised {type(exc).__name__}: {exc}"))
    descriptor = CodexAdapter.descriptor()
    ok = (descriptor.replace == "unverified" and descriptor.tiers.call == "delivered"
          and descriptor.rendering["shell"] == "Bash" and descriptor.rendering["file.write"] == "apply_patch")
    results.append(("descriptor", ok, f"call tier {descriptor.tiers.call}, replace {descriptor.replace} "
                                      "(refused by name), shell → Bash, file.write/file.edit → apply_patch"))
    config = launch.config_toml("http://127.0.0.1:1/v1")
    needed = ['wire_api = "responses"', "plugins = false", "check_for_update_on_startup = false",
              "[analytics]\nenabled = false", "request_max_retries = 0", "stream_max_retries = 0"]
    missing = [n for n in needed if n not in config]
    results.append(("launch plan", not missing, "the loopback-safe config.toml" if not missing
                    else f"config.toml lacks {missing}"))
    return results


class _CountingContext:
    run_cwd = "/"

    def __init__(self) -> None:
        self.lines = 0
        self.opaque_count = 0

    def _count(self, *args, **kwargs) -> None:
        self.lines += 1

    session_started = turn_started = turn_ended = emit = present = record_call = session_ended = warn = _count

    def opaque(self, *args, **kwargs) -> None:
        self.lines += 1
        self.opaque_count += 1
