"""Helpers for the Claude Code end-to-end tests: the real binary, a loopback model,
a loopback-only network namespace (when the machine allows it), and an async driver
of `metaharness run claude` that reads events and writes commands."""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

import pytest

from metaharness.protocol.frame import document_bytes, seal

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENDOR_DIR = os.path.join(ROOT, ".vendor", "node_modules", ".bin")
CLAUDE = os.path.join(VENDOR_DIR, "claude")
NSRUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nsrun.py")
# Scratch homes of this test process (kept for inspection while it runs, removed when it exits):
# a run of the suite leaves none behind. Under /var/tmp, never /tmp (sandboxed commands may write there).
SCRATCH_BASE = tempfile.mkdtemp(prefix="metaharness-tests-", dir="/var/tmp")


def _remove_scratch_base() -> None:
    # each root the way a run removes it, with the runtime directory it may link to outside the
    # base: a metaharness killed outright (test_c12) removed neither
    from metaharness.adapters.process import remove_scratch

    for name in os.listdir(SCRATCH_BASE):
        remove_scratch(os.path.join(SCRATCH_BASE, name), keep_chosen=False)
    shutil.rmtree(SCRATCH_BASE, True)


atexit.register(_remove_scratch_base)


def require_binary() -> str:
    if not os.path.exists(CLAUDE):
        pytest.fail(f"the pinned Claude Code binary is missing at {CLAUDE}; install it with "
                    "`npm install --prefix .vendor --save-exact --no-audit --no-fund @anthropic-ai/claude-code@2.1.328`",
                    pytrace=False)
    return CLAUDE


_NAMESPACE: bool | None = None


def namespace_available() -> bool:
    global _NAMESPACE
    if _NAMESPACE is None:
        try:
            probe = subprocess.run(["unshare", "-rnm", "sh", "-c", "ip link set lo up"], capture_output=True, timeout=10)
            _NAMESPACE = probe.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _NAMESPACE = False
        if not _NAMESPACE:
            print("NOTE: unshare -rnm is not available; the Claude e2e tests run without a network namespace",
                  file=sys.stderr)
    return _NAMESPACE


def scenario(*turns: dict[str, Any]) -> dict[str, Any]:
    return {"format": "metaharness.scenario/1", "turns": list(turns)}


def shell(command: str, **extra: Any) -> dict[str, Any]:
    return {"op": "shell", "input": {"command": command}, **extra}


def frame_doc(ops: list[str], *, state: str = "s1", index: int = 1) -> bytes:
    frame = seal({
        "workflow": {"id": "wf", "version": "1"}, "node": {"id": state},
        "step": {"workflow": "wf", "state": state, "index": index, "attempt": 1},
        "prior": [], "obligations": [], "reaching": [], "next": [], "handoff": {"handoff": "none"},
        "operations": [{"op": op} for op in ops],
    })
    return document_bytes(frame)


def frame_obj(ops: list[str], **kw: Any) -> dict[str, Any]:
    return json.loads(frame_doc(ops, **kw))


class ClaudeRun:
    """One `metaharness run claude` process (through nsrun.py) with live event reading."""

    def __init__(self, tmp: str, scen: dict[str, Any], args: list[str], *, env: dict[str, str] | None = None,
                 prompt: str = "do the task", namespace: bool = True, reach: int | None = None) -> None:
        """REACH: a port of a server on the host's 127.0.0.1 that the run reaches at the same
        address inside the namespace (nsrun.py --forward, relayed here through a Unix socket)."""
        self.tmp = tmp
        self.reach = reach
        self._relay: Any = None
        self.work = os.path.join(tmp, "work")
        self.out = os.path.join(tmp, "out")
        os.makedirs(self.work, exist_ok=True)
        os.makedirs(self.out, exist_ok=True)
        self.scenario_path = os.path.join(tmp, "scenario.json")
        with open(self.scenario_path, "w") as handle:
            json.dump(scen, handle)
        self.args = ["claude", "-p", prompt, "--cwd", self.work, "--vendor-dir", VENDOR_DIR,
                     "--decision-timeout-ms", "2000", "--retain-dir", os.path.join(tmp, "retained"), *args]
        self.env = {**os.environ, "MH_TEST_WORKDIR": self.work, "METAHARNESS_SCRATCH_DIR": SCRATCH_BASE, **(env or {})}
        self.namespace = namespace and namespace_available()
        self.events: list[dict[str, Any]] = []
        self.raw_lines: list[bytes] = []
        self.proc: asyncio.subprocess.Process | None = None
        self._changed = asyncio.Event()
        self._reader: asyncio.Task | None = None
        self.stderr = b""

    async def start(self) -> "ClaudeRun":
        require_binary()
        argv = [sys.executable, NSRUN, self.out, self.scenario_path]
        if self.namespace:
            argv = ["unshare", "-rnm", *argv, "--in-namespace"]
            if self.reach is not None:
                argv += ["--forward", f"{self.reach}={self._open_relay(self.reach)}"]
        argv += ["--", *self.args]
        self.proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=self.env, cwd=self.tmp, limit=64 * 1024 * 1024)
        self._reader = asyncio.create_task(self._read())
        return self

    def _open_relay(self, port: int) -> str:
        """A Unix socket (under SCRATCH_BASE: its path stays short) relayed to the host's 127.0.0.1:PORT."""
        import socket

        from .nsrun import relay

        path = os.path.join(tempfile.mkdtemp(dir=SCRATCH_BASE), "reach.sock")
        self._relay = socket.socket(socket.AF_UNIX)
        self._relay.bind(path)
        self._relay.listen(16)
        relay(self._relay, lambda: socket.create_connection(("127.0.0.1", port)))
        return path

    async def _read(self) -> None:
        assert self.proc and self.proc.stdout
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                break
            self.raw_lines.append(line)
            self.events.append(json.loads(line))
            self._changed.set()
        self._changed.set()

    def send(self, command: str, **payload: Any) -> str:
        cid = payload.pop("id", f"t-{len(self.events)}-{time.monotonic_ns()}")
        self.write_raw(json.dumps({"format": "metaharness.command/1", "id": cid, "command": command, **payload}).encode())
        return cid

    def write_raw(self, data: bytes) -> None:
        assert self.proc and self.proc.stdin
        self.proc.stdin.write(data + b"\n")

    def close_stdin(self) -> None:
        assert self.proc and self.proc.stdin
        self.proc.stdin.close()

    async def wait_event(self, pred: Callable[[dict[str, Any]], bool], timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for event in self.events[seen:]:
                if pred(event):
                    return event
            seen = len(self.events)
            if self._reader is not None and self._reader.done():
                raise AssertionError(f"the stream ended without the awaited event; events: {self.names()}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out waiting for an event; events so far: {self.names()}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    async def finish(self, timeout: float = 60.0) -> int:
        assert self.proc
        if self.proc.stdin and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        rc = await asyncio.wait_for(self.proc.wait(), timeout)
        if self._reader:
            await self._reader
        assert self.proc.stderr
        self.stderr = await self.proc.stderr.read()
        if self._relay is not None:  # its accept woken (shutdown), then closed
            import socket

            try:
                self._relay.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._relay.close()
        return rc

    # --- views -------------------------------------------------------------------------
    def names(self) -> list[str]:
        return [e["event"] for e in self.events]

    def of(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == name]

    def one(self, name: str) -> dict[str, Any]:
        found = self.of(name)
        assert len(found) == 1, (name, self.names())
        return found[0]

    def assert_complete(self) -> None:
        assert self.events, "no events"
        last = self.events[-1]
        assert last["event"] == "stream.closed", self.names()
        assert [e["seq"] for e in self.events] == list(range(1, len(self.events) + 1))
        assert last["events"] == last["seq"] - 1

    def loopback_log(self) -> list[dict[str, Any]]:
        path = os.path.join(self.out, "loopback.jsonl")
        if not os.path.exists(path):
            return []
        with open(path) as handle:
            return [json.loads(line) for line in handle if line.strip()]

    def main_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.loopback_log() if r.get("main")]

    def dns_log(self) -> str:
        path = os.path.join(self.out, "dns.log")
        return open(path).read() if os.path.exists(path) else ""

    def assert_no_dns(self) -> None:
        if self.namespace:
            assert self.dns_log() == "", f"the vendor looked up names: {self.dns_log()}"

    def transcript(self) -> list[dict[str, Any]]:
        path = os.path.join(self.tmp, "retained", "claude-transcript.jsonl")
        with open(path) as handle:
            return [json.loads(line) for line in handle if line.strip()]

    def path(self, name: str) -> str:
        return os.path.join(self.work, name)


def tool_results_in(request: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for message in request["body"]["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            out += [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    return out


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))
