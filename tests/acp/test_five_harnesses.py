"""One scenario and one frame (admitting file.write and file.edit) run unchanged on every harness
of the registry (oharness, Claude Code, Codex, opencode, Gemini CLI, Qwen Code): every stream is
complete, the same calls are decided the same way, and the side-by-side page lines each ACP
harness up against oharness row by row. Qwen Code ends its turn at a refused call, so on it the
scenario stops after the refused shell: the edit is never asked for."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from metaharness.protocol.harnesses import KINDS

from acp_support import E2E_ROOT, METAHARNESS, NETNS, NETNS_OK, REPO, vendor_dir

pytestmark = pytest.mark.timeout(900)

SCENARIO = REPO / "examples" / "same-task.scenario.json"
FRAME = REPO / "examples" / "same-task.frame.json"
EXPECTED = [(("file.write",), "allow", "frame"), (("shell",), "deny", "frame"), (("file.edit",), "allow", "frame")]
ENDS_TURN_AT_DENY = {"qwen"}
ACP = ("opencode", "gemini", "qwen")


def run_kind(kind: str, root: Path) -> Path:
    work = root / kind / "work"
    work.mkdir(parents=True)
    args = [str(METAHARNESS), "run", kind, "--script", str(SCENARIO), "--frame", str(FRAME),
            "-p", "do the task", "--cwd", str(work), "--decision-timeout-ms", "2000"]
    if kind != "oharness":
        args += ["--vendor-dir", str(vendor_dir(kind))]
        if NETNS_OK:
            args = ["unshare", "--user", "--map-root-user", "--net", "--mount", "python3", str(NETNS),
                    str(root / kind / "dns.log"), "--", *args]
    done = subprocess.run(args, capture_output=True, timeout=300, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, METAHARNESS_SCRATCH_DIR=str(root / kind / "scratch")))
    stream = root / kind / "events.jsonl"
    stream.write_bytes(done.stdout)
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events and events[-1]["event"] == "stream.closed", f"{kind}: stream not closed; stderr: {done.stderr[-1500:]!r}"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert any(e["event"] == "session.ended" for e in events), f"{kind}: no session.ended; stderr: {done.stderr[-1500:]!r}"
    return stream


def decided_calls(stream: Path) -> list[tuple[tuple[str, ...], str, str]]:
    events = [json.loads(line) for line in stream.read_text().splitlines()]
    requested = {e["call_id"]: e for e in events if e["event"] == "tool.requested"}
    return [(tuple(requested[d["call_id"]].get("operations", [])), d["decision"]["decision"], d["decided_by"])
            for d in events if d["event"] == "tool.decided"]


def test_same_scenario_same_decisions_on_every_harness():
    root = E2E_ROOT / f"five-{uuid.uuid4().hex[:6]}"
    try:
        streams = {kind: run_kind(kind, root) for kind in KINDS}
        for kind, stream in streams.items():
            stops = kind in ENDS_TURN_AT_DENY
            expected = EXPECTED[:2] if stops else EXPECTED
            assert decided_calls(stream) == expected, f"{kind} decided {decided_calls(stream)}"
            assert not (root / kind / "work" / "shell.txt").exists(), f"{kind}: the refused shell call ran"
            notes = (root / kind / "work" / "notes.txt").read_text()
            assert notes.startswith("hello" if stops else "HELLO"), f"{kind}: write/edit missing"
        for kind in ACP:
            page = root / f"{kind}.html"
            done = subprocess.run([str(METAHARNESS), "project", "--html", str(page), str(streams["oharness"]),
                                   str(streams[kind])], capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            text = page.read_text()
            assert kind in text and "oharness" in text
    finally:
        shutil.rmtree(root, ignore_errors=True)
