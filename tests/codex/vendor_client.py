"""The vendor checks' own minimal JSON-RPC client of `codex app-server` (the Codex end-to-end checklist,
cases marked VC): it spawns the real binary with the adapter's exact launch (through
tests/fixtures/codex/vc_serve.py, inside the loopback-only namespace when the machine
allows it), writes whatever the case needs — including answers metaharness never sends —
and records every stdout line with the time it was read. Nothing here goes through
`metaharness run`: these cases pin the vendor behaviour the adapter's design rests on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from metaharness.adapters.process import descendant_groups, kill_groups
from metaharness.adapters.codex import launch

from e2e_support import NETNS, NETNS_OK, VENDOR

VC_SERVE = Path(__file__).resolve().parents[1] / "fixtures" / "codex" / "vc_serve.py"


class AppServer:
    """One `codex app-server` beside its own loopback, driven line by line."""

    def __init__(self, case_dir: Path, turns: list[dict], *, config_extra: str | None = None,
                 extra_args: list[str] | None = None) -> None:
        self.case_dir = case_dir
        self.work = case_dir / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.scratch = case_dir / "scratch"
        self.dns_log = case_dir / "dns.log"
        scenario = case_dir / "vc-scenario.json"
        scenario.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": turns}))
        command = [sys.executable, str(VC_SERVE), str(case_dir), str(scenario), str(self.work), str(self.scratch),
                   str(VENDOR)]
        if config_extra is not None:
            extra_file = case_dir / "config-extra.toml"
            extra_file.write_text(config_extra)
            command += ["--config-extra", str(extra_file)]
        if extra_args:
            command += ["--", *extra_args]
        if NETNS_OK:
            command = ["unshare", "--user", "--map-root-user", "--net", "--mount",
                       sys.executable, str(NETNS), str(self.dns_log), "--", *command]
        self.stderr_path = case_dir / "app-server.stderr"
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(self.stderr_path, "wb"), start_new_session=True)
        self.messages: list[dict] = []
        self.read_at: list[float] = []
        self.written: list[bytes] = []
        self._next_id = 1
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.thread_id: str | None = None

    # --- reading ---------------------------------------------------------------------
    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                message = {"<not json>": raw.decode("utf-8", "replace")}
            with self._cond:
                self.messages.append(message)
                self.read_at.append(time.monotonic())
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[dict], bool], timeout: float = 30, start: int = 0) -> dict:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for message in self.messages[start:]:
                    if predicate(message):
                        return message
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._reader.is_alive():
                    raise AssertionError(f"no matching message within {timeout}s; methods so far: {self.methods()}; "
                                         f"stderr: {self.stderr()[-600:]}")
                self._cond.wait(min(remaining, 0.2))

    def index_of(self, message: dict) -> int:
        with self._cond:
            return next(i for i, m in enumerate(self.messages) if m is message)

    def methods(self) -> list[str]:
        return [m.get("method") or f"result:{m.get('id')}" for m in self.messages]

    def notifications(self, method: str) -> list[dict]:
        return [m for m in self.messages if m.get("method") == method and "id" not in m]

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def dns_names(self) -> list[str]:
        if not self.dns_log.exists():
            return []
        return [json.loads(line)["name"] for line in self.dns_log.read_text().splitlines() if line.strip()]

    def loopback_log(self) -> list[dict]:
        path = self.case_dir / "loopback.jsonl"
        return [json.loads(l) for l in path.read_text().splitlines() if l.strip()] if path.exists() else []

    def model_inputs(self) -> list[list]:
        return [entry["body"]["input"] for entry in self.loopback_log() if entry["main"]]

    # --- writing ---------------------------------------------------------------------
    def write_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.written.append(data)
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def write(self, message: Any) -> None:
        self.write_raw(json.dumps(message, separators=(",", ":")).encode())

    def request(self, method: str, params: Any, timeout: float = 30) -> dict:
        """Send a request and wait for its response (the whole message: result or error)."""
        request_id = self._next_id
        self._next_id += 1
        self.write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return self.wait_for(lambda m: m.get("id") == request_id and "method" not in m, timeout)

    def handshake(self, *, sandbox: str = "workspace-write", thread_config: dict | None = None) -> dict:
        init = self.request("initialize", {"clientInfo": {"name": "metaharness", "title": None, "version": "vc"},
                                           "capabilities": {"experimentalApi": False, "requestAttestation": False}},
                            timeout=60)
        assert "result" in init, init
        self.write({"jsonrpc": "2.0", "method": "initialized"})
        params: dict = {"cwd": str(self.work), "approvalPolicy": "untrusted", "sandbox": sandbox}
        if thread_config is not None:
            params["config"] = thread_config
        started = self.request("thread/start", params, timeout=60)
        assert started.get("result", {}).get("approvalPolicy") == "untrusted", started
        self.thread_id = started["result"]["thread"]["id"]
        return started["result"]

    def start_turn(self, text: str = "go") -> str:
        reply = self.request("turn/start", {"threadId": self.thread_id,
                                            "input": [{"type": "text", "text": text, "text_elements": []}]})
        return reply["result"]["turn"]["id"]

    def approval(self, start: int = 0, timeout: float = 30) -> dict:
        return self.wait_for(lambda m: "id" in m and str(m.get("method", "")).endswith("/requestApproval"),
                             timeout, start)

    def item_completed(self, item_id: str, timeout: float = 30) -> dict:
        message = self.wait_for(lambda m: m.get("method") == "item/completed"
                                and m["params"]["item"].get("id") == item_id, timeout)
        return message["params"]["item"]

    def turn_completed(self, timeout: float = 30, start: int = 0) -> dict:
        return self.wait_for(lambda m: m.get("method") == "turn/completed", timeout, start)

    def alive(self) -> bool:
        return self.proc.poll() is None

    # --- ending ----------------------------------------------------------------------
    def close(self, timeout: float = 10) -> int | None:
        """Close stdin, wait for the exit, then kill whatever of the run is left."""
        groups = descendant_groups(self.proc.pid) if self.proc.poll() is None else set()
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except (OSError, ValueError):
            pass
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
        kill_groups(groups | {self.proc.pid}, spare=set())
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        self._reader.join(5)
        return code


def rejection_texts(inputs: list[list], call_id: str) -> list[str]:
    """Every `function_call_output` / `custom_tool_call_output` the model was sent for call_id."""
    found = []
    for request in inputs:
        for entry in request:
            if entry.get("type") in ("function_call_output", "custom_tool_call_output") and entry.get("call_id") == call_id:
                output = entry.get("output")
                found.append(output if isinstance(output, str) else json.dumps(output))
    return found
