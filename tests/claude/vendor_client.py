"""The vendor checks' own minimal client of Claude Code's stdio control protocol
(the end-to-end checklist against the real binaries, cases marked VC): it spawns the real binary with exactly the argv
and environment the adapter's launch plan builds, speaks `initialize`, user lines and
hook answers itself, and records every stdout line — so the tests can pin a vendor
behaviour the seam depends on without going through `metaharness run`.

Runs beside a loopback model through nsrun.py, inside the loopback-only namespace
when the machine allows it (the DNS sink's log must stay empty).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any, Callable

from metaharness.adapters.claude import launch

from .support import NSRUN, SCRATCH_BASE, VENDOR_DIR, namespace_available, require_binary


class VendorClient:
    def __init__(self, tmp: str, scen: dict[str, Any], *, posture: str | None = "acceptEdits") -> None:
        # acceptEdits by default: an abstaining (or failing-open) seam then lets the write
        # run, so "not run" can only come from the seam blocking it.
        self.posture = posture
        self.tmp = tmp
        self.work = os.path.join(tmp, "work")
        self.out = os.path.join(tmp, "out")
        os.makedirs(self.work, exist_ok=True)
        os.makedirs(self.out, exist_ok=True)
        self.scenario_path = os.path.join(tmp, "scenario.json")
        with open(self.scenario_path, "w") as handle:
            json.dump(scen, handle)
        self.namespace = namespace_available()
        self.records: list[dict[str, Any]] = []
        self.read_at: list[float] = []
        self.proc: asyncio.subprocess.Process | None = None
        self.stderr = b""
        self._changed = asyncio.Event()
        self._reader: asyncio.Task | None = None
        self._next = 0

    async def start(self) -> "VendorClient":
        binary = require_binary()
        scratch = launch.make_scratch(SCRATCH_BASE)
        path = launch.child_path(VENDOR_DIR)
        # The adapter's own launch (launch.py): same argv, same constructed environment.
        env = launch.build_env(scratch, path, base_url="@URL@", api_key=launch.PLACEHOLDER_KEY)
        argv = launch.build_argv(binary, posture=self.posture, model=None)
        env_file = os.path.join(self.tmp, "child-env.json")
        with open(env_file, "w") as handle:
            json.dump(env, handle)
        command = [sys.executable, NSRUN, self.out, self.scenario_path]
        if self.namespace:
            command = ["unshare", "-rnm", *command, "--in-namespace"]
        command += ["--exec", env_file, "--", *argv]
        self.proc = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=dict(os.environ, MH_TEST_WORKDIR=self.work), cwd=self.tmp, limit=64 * 1024 * 1024)
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.proc and self.proc.stdout
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                break
            try:
                record = json.loads(line)
            except ValueError:
                record = {"type": "<not json>", "raw": line.decode("utf-8", "replace")}
            self.records.append(record)
            self.read_at.append(time.monotonic())
            self._changed.set()
        self._changed.set()

    # --- writing ---------------------------------------------------------------------------
    def write(self, obj: dict[str, Any]) -> None:
        self.write_raw(json.dumps(obj).encode())

    def write_raw(self, data: bytes) -> None:
        assert self.proc and self.proc.stdin
        self.proc.stdin.write(data + b"\n")

    def close_stdin(self) -> None:
        assert self.proc and self.proc.stdin
        self.proc.stdin.close()

    async def initialize(self, *, on_failure: str | None = "block", timeout: int | None = 4) -> dict[str, Any]:
        entry: dict[str, Any] = {"matcher": None, "hookCallbackIds": [launch.HOOK_CALLBACK_ID]}
        if timeout is not None:
            entry["timeout"] = timeout
        if on_failure is not None:
            entry["onFailure"] = on_failure
        self.write({"type": "control_request", "request_id": "vc-1",
                    "request": {"subtype": "initialize", "hooks": {"PreToolUse": [entry]}}})
        reply = await self.wait_record(lambda r: r.get("type") == "control_response"
                                       and r["response"].get("request_id") == "vc-1")
        return reply["response"]

    def user(self, text: str) -> None:
        self.write({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]},
                    "parent_tool_use_id": None, "session_id": ""})

    def answer(self, callback: dict[str, Any], response: dict[str, Any]) -> None:
        self.write({"type": "control_response", "response": {"subtype": "success",
                                                             "request_id": callback["request_id"], "response": response}})

    def answer_error(self, callback: dict[str, Any], error: str) -> None:
        self.write({"type": "control_response", "response": {"subtype": "error",
                                                             "request_id": callback["request_id"], "error": error}})

    # --- reading -----------------------------------------------------------------------------
    async def wait_record(self, pred: Callable[[dict[str, Any]], bool], timeout: float = 30.0,
                          start: int = 0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        seen = start
        while True:
            for record in self.records[seen:]:
                if pred(record):
                    return record
            seen = max(seen, len(self.records))
            if self._reader is not None and self._reader.done():
                raise AssertionError(f"claude's output ended without the awaited record: {self.types()}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out waiting for a record; records so far: {self.types()}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    async def callback(self, start: int = 0) -> dict[str, Any]:
        return await self.wait_record(lambda r: r.get("type") == "control_request"
                                      and r["request"].get("subtype") == "hook_callback", start=start)

    async def result(self, start: int = 0, timeout: float = 30.0) -> dict[str, Any]:
        return await self.wait_record(lambda r: r.get("type") == "result", timeout, start=start)

    async def exit(self, timeout: float = 30.0) -> int:
        assert self.proc
        try:
            rc = await asyncio.wait_for(self.proc.wait(), timeout)
        finally:
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()
        if self._reader:
            await self._reader
        assert self.proc.stderr
        self.stderr = await self.proc.stderr.read()
        return rc

    def types(self) -> list[str]:
        return [f"{r.get('type')}/{r.get('subtype') or (r.get('request') or {}).get('subtype') or ''}" for r in self.records]

    def tool_results(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(block, record) for every tool_result Claude reports."""
        out = []
        for record in self.records:
            if record.get("type") == "user" and isinstance(record.get("message", {}).get("content"), list):
                out += [(b, record) for b in record["message"]["content"]
                        if isinstance(b, dict) and b.get("type") == "tool_result"]
        return out

    def dns_log(self) -> str:
        path = os.path.join(self.out, "dns.log")
        return open(path).read() if os.path.exists(path) else ""

    def path(self, name: str) -> str:
        return os.path.join(self.work, name)


def block_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))
