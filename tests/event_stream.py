"""A `metaharness run` child seen from a test: its event lines, read by a thread as they come.

The one reader the vendor end-to-end helpers share (tests/acp/acp_support.py,
tests/codex/e2e_support.py, tests/phase_signals.py); each adds how it starts the child and
what it checks. Imported with tests/ on sys.path.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable


class EventStream:
    """`proc` (stdin and stdout piped, stderr to `stderr_path`) and the events it wrote."""

    WAIT_S = 90.0  # wait_for's default bound

    def __init__(self, command: list[str], *, cwd: Path, env: dict[str, str], stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(stderr_path, "wb"), cwd=str(cwd), env=env)
        self.events: list[dict] = []
        self.raw: list[bytes] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._cond:
                self.raw.append(line)
                self.events.append(json.loads(line))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def send(self, command: str, cid: str, **payload: Any) -> None:
        line = {"format": "metaharness.command/1", "id": cid, "command": command, **payload}
        self.proc.stdin.write((json.dumps(line) + "\n").encode())
        self.proc.stdin.flush()

    def wait_for(self, predicate: Callable[[dict], bool], timeout: float | None = None) -> dict:
        """The first event that matches; fails past `timeout` or once the stream ended without one."""
        timeout = self.WAIT_S if timeout is None else timeout
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events:
                    if predicate(event):
                        return event
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._reader.is_alive():  # no event can come after the end
                    raise AssertionError(f"no matching event within {timeout}s; events: {self.names()}; "
                                         f"stderr: {self.stderr()[-800:]}")
                self._cond.wait(min(remaining, 0.2))

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def of(self, name: str) -> list[dict]:
        return [e for e in self.events if e["event"] == name]

    def names(self) -> list[str]:
        return [e["event"] for e in self.events]
