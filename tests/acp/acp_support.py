"""Support for the ACP harness tests: scenario/frame writers and a `metaharness run <kind>`
driver for opencode and Gemini CLI that reads events as they come and writes commands,
inside a loopback-only network namespace with a logging DNS sink when the machine allows it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

from metaharness.protocol.frame import document_bytes, seal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from event_stream import EventStream  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
VENDOR = REPO / ".vendor" / "node_modules" / ".bin"
METAHARNESS = REPO / ".venv" / "bin" / "metaharness"
NETNS = REPO / "tests" / "fixtures" / "codex" / "netns_run.py"  # a generic loopback-only namespace runner
E2E_ROOT = Path(os.path.expanduser("~")) / ".cache" / "metaharness" / "acp-e2e"
KINDS = ("opencode", "gemini")


def case_dir(kind: str, test_name: str) -> Iterator[Path]:
    """A fresh `E2E_ROOT/<kind>-<test>` with an empty `ws/` (a `case` fixture yields from it),
    removed afterwards unless MH_KEEP_E2E is set."""
    path = E2E_ROOT / f"{kind}-{test_name}"
    shutil.rmtree(path, ignore_errors=True)
    (path / "ws").mkdir(parents=True)
    yield path
    if not os.environ.get("MH_KEEP_E2E"):
        shutil.rmtree(path, ignore_errors=True)


def run_scenario(kind: str, case: Path, turns: list[dict], *args: str, prompt: str = "do the task") -> "AcpRun":
    """`metaharness run <kind>` on the scripted `turns` (written to the case's scenario.json) in its `ws/`."""
    scenario(case / "scenario.json", turns)
    return AcpRun(kind, case, ["-p", prompt, "--script", str(case / "scenario.json"), "--cwd", str(case / "ws"),
                               *args])


def vendor_dir(kind: str) -> Path:
    """Where `kind`'s launcher is: .vendor (`make vendor`), else the first directory of
    MH_E2E_VENDOR_DIRS (colon-separated) that holds it — for a pin the shared install lacks."""
    extra = [Path(d) for d in os.environ.get("MH_E2E_VENDOR_DIRS", "").split(":") if d]
    return next((d for d in [VENDOR, *extra] if (d / kind).exists()), VENDOR)


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


def frame(path: Path, ops: list[str], rules: list[tuple[list[str], list[str]]] | None = None) -> Path:
    value: dict[str, Any] = {
        "workflow": {"id": "e2e", "version": "1"}, "node": {"id": "work"},
        "step": {"workflow": "e2e", "state": "work", "index": 1, "attempt": 1},
        "prior": [], "obligations": [], "reaching": [], "next": [], "handoff": {"handoff": "none"},
        "operations": [{"op": op} for op in ops],
    }
    if rules:
        value["subjects"] = {"rules": [{"subjects": s, "operations": [{"op": o} for o in o_]} for s, o_ in rules]}
    path.write_bytes(document_bytes(seal(value)))
    return path


class AcpRun(EventStream):
    """One `metaharness run <kind>` child: events collected by a reader thread."""

    def __init__(self, kind: str, case_dir: Path, args: list[str], *, namespace: bool = True) -> None:
        self.kind = kind
        self.case_dir = case_dir
        self.dns_log = case_dir / "dns.log"
        command = [str(METAHARNESS), "run", kind, "--vendor-dir", str(vendor_dir(kind)), *args]
        self.namespaced = namespace and NETNS_OK
        if self.namespaced:
            command = ["unshare", "--user", "--map-root-user", "--net", "--mount",
                       sys.executable, str(NETNS), str(self.dns_log), "--", *command]
        env = dict(os.environ, METAHARNESS_SCRATCH_DIR=str(case_dir / "scratch"))
        super().__init__(command, cwd=case_dir, env=env, stderr_path=case_dir / "stderr.txt")

    def finish(self, timeout: float = 120) -> int:
        try:
            self.proc.stdin.close()
        except (OSError, ValueError):
            pass
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self._reader.join(10)
        return code

    def decided(self) -> dict[str, dict]:
        return {e["call_id"]: e for e in self.of("tool.decided")}

    @property
    def scratch(self) -> Path:
        started = self.of("session.started")
        assert started, f"no session.started; stderr: {self.stderr()[-800:]}"
        return Path(started[0]["transcript"]["path"]).parent

    def sent(self) -> list[dict]:
        return [json.loads(line) for line in (self.scratch / "sent.jsonl").read_text().splitlines() if line.strip()]

    def answers(self) -> list[dict]:
        """Our answers to the agent's permission requests, in order."""
        return [m["result"]["outcome"] for m in self.sent() if "result" in m and isinstance(m["result"], dict)
                and "outcome" in m["result"]]

    def model_requests(self) -> list[dict]:
        """The loopback's main model requests, in order."""
        path = self.scratch / "loopback.jsonl"
        entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [e for e in entries if e["main"]]

    def dns_names(self) -> list[str]:
        if not self.dns_log.exists():
            return []
        return [json.loads(line)["name"] for line in self.dns_log.read_text().splitlines() if line.strip()]

    def vendor_pids(self) -> list[int]:
        """Processes whose environment points into this run's scratch directory (the agent and its helpers)."""
        marker = str(self.case_dir / "scratch").encode()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as handle:
                    environ = handle.read()
            except OSError:
                continue
            # The agent's environment is built by the adapter: it has HOME in the scratch directory
            # and no METAHARNESS_SCRATCH_DIR (metaharness's own processes have that).
            if marker in environ and b"METAHARNESS_SCRATCH_DIR=" not in environ:
                found.append(int(entry))
        return found

    def kill_vendor(self) -> None:
        for pid in self.vendor_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def assert_complete(self) -> None:
        assert self.events, f"empty stream; stderr: {self.stderr()[-800:]}"
        last = self.events[-1]
        assert last["event"] == "stream.closed", f"stream not closed: {self.names()}"
        assert [e["seq"] for e in self.events] == list(range(1, len(self.events) + 1))
        assert self.dns_names() == [], f"the vendor looked up names: {self.dns_names()}"
