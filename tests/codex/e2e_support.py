"""Support for the end-to-end tests against the real Codex binary (the Codex end-to-end checklist):
scenario/frame writers, a `metaharness run codex` driver that reads events as they
come and writes commands, and the loopback-only network namespace of the vendor rule “end-to-end tests run the vendor in a loopback-only network namespace”."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from metaharness.protocol.frame import document_bytes, seal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from event_stream import EventStream  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
VENDOR = REPO / ".vendor" / "node_modules" / ".bin"
CODEX = VENDOR / "codex"
METAHARNESS = REPO / ".venv" / "bin" / "metaharness"
NETNS = REPO / "tests" / "fixtures" / "codex" / "netns_run.py"
# Neither under /tmp (workspace-write lets commands write there) nor shared with others.
E2E_ROOT = Path(os.path.expanduser("~")) / ".cache" / "metaharness" / "codex-e2e"


def netns_available() -> bool:
    try:
        done = subprocess.run(["unshare", "--user", "--map-root-user", "--net", "--mount", "true"],
                              capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


NETNS_OK = netns_available()


def scenario(path: Path, turns: list[dict]) -> Path:
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": turns}))
    return path


def shell(command: str, call_id: str | None = None) -> dict:
    call = {"op": "shell", "input": {"command": command}}
    if call_id:
        call["id"] = call_id
    return call


def frame(path: Path, ops: list[str], index: int = 1) -> Path:
    sealed = seal({
        "workflow": {"id": "e2e", "version": "1"}, "node": {"id": "work"},
        "step": {"workflow": "e2e", "state": "work", "index": index, "attempt": 1},
        "prior": [], "obligations": [], "reaching": [], "next": [], "handoff": {"handoff": "none"},
        "operations": [{"op": op} for op in ops],
    })
    path.write_bytes(document_bytes(sealed))
    return path


def frame_object(ops: list[str], index: int = 2) -> dict:
    sealed = seal({
        "workflow": {"id": "e2e", "version": "1"}, "node": {"id": "work"},
        "step": {"workflow": "e2e", "state": "work", "index": index, "attempt": 1},
        "prior": [], "obligations": [], "reaching": [], "next": [], "handoff": {"handoff": "none"},
        "operations": [{"op": op} for op in ops],
    })
    return json.loads(document_bytes(sealed))


class CodexRun(EventStream):
    """One `metaharness run codex` child: events collected by a reader thread."""

    WAIT_S = 30.0

    def __init__(self, case_dir: Path, args: list[str], *, namespace: bool = True, env: dict | None = None) -> None:
        self.case_dir = case_dir
        self.dns_log = case_dir / "dns.log"
        command = [str(METAHARNESS), "run", "codex", "--vendor-dir", str(VENDOR), *args]
        self.namespaced = namespace and NETNS_OK
        if self.namespaced:
            command = ["unshare", "--user", "--map-root-user", "--net", "--mount",
                       sys.executable, str(NETNS), str(self.dns_log), "--", *command]
        child_env = dict(os.environ, METAHARNESS_SCRATCH_DIR=str(case_dir / "scratch"))
        child_env.update(env or {})
        super().__init__(command, cwd=case_dir, env=child_env, stderr_path=case_dir / "stderr.txt")
        self.started = time.monotonic()

    def close_stdin(self) -> None:
        self.proc.stdin.close()

    def finish(self, timeout: float = 60) -> int:
        try:
            self.proc.stdin.close()
        except (OSError, ValueError):
            pass
        code = self.proc.wait(timeout)
        self._reader.join(10)
        return code

    @property
    def scratch(self) -> Path:
        started = self.of("session.started")
        assert started, f"no session.started; stderr: {self.stderr()[-800:]}"
        return Path(started[0]["transcript"]["path"]).parent

    def sent(self) -> list[dict]:
        return [json.loads(l) for l in (self.scratch / "sent.jsonl").read_text().splitlines() if l.strip()]

    def transcript(self) -> list[dict]:
        return [json.loads(l) for l in (self.scratch / "transcript.jsonl").read_text().splitlines() if l.strip()]

    def loopback_log(self) -> list[dict]:
        path = self.scratch / "loopback.jsonl"
        return [json.loads(l) for l in path.read_text().splitlines() if l.strip()] if path.exists() else []

    def dns_names(self) -> list[str]:
        if not self.dns_log.exists():
            return []
        return [json.loads(l)["name"] for l in self.dns_log.read_text().splitlines() if l.strip()]

    def assert_complete(self) -> None:
        assert self.events, f"empty stream; stderr: {self.stderr()[-800:]}"
        last = self.events[-1]
        assert last["event"] == "stream.closed", f"stream not closed: {self.names()}"
        assert last["events"] == last["seq"] - 1
        assert [e["seq"] for e in self.events] == list(range(1, len(self.events) + 1))
        assert self.dns_names() == [], f"the vendor looked up names: {self.dns_names()}"


@pytest.fixture
def fresh_case(request):
    """A per-test directory under E2E_ROOT with a `work/` inside, removed afterwards."""
    directory = E2E_ROOT / f"{request.node.name[:40]}-{uuid.uuid4().hex[:6]}"
    (directory / "work").mkdir(parents=True)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)
