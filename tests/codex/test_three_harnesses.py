"""Issue 6 item 6 / vendors.md L06: one scenario and one frame (admitting file.write and
file.edit) run unchanged on oharness, claude and codex; every stream is complete and the
same calls are decided the same way under the same frame."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from e2e_support import E2E_ROOT, METAHARNESS, REPO, VENDOR


SCENARIO = REPO / "examples" / "same-task.scenario.json"
FRAME = REPO / "examples" / "same-task.frame.json"


def run_kind(kind: str, root: Path) -> list[dict]:
    work = root / kind / "work"
    work.mkdir(parents=True)
    args = [str(METAHARNESS), "run", kind, "--script", str(SCENARIO), "--frame", str(FRAME),
            "-p", "do the task", "--cwd", str(work), "--decision-timeout-ms", "2000"]
    if kind != "oharness":
        args += ["--vendor-dir", str(VENDOR)]
    done = subprocess.run(args, capture_output=True, timeout=300, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, METAHARNESS_SCRATCH_DIR=str(root / kind / "scratch")))
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events and events[-1]["event"] == "stream.closed", f"{kind}: stream not closed; stderr: {done.stderr[-1500:]!r}"
    assert events[-1]["events"] == len(events) - 1
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert any(e["event"] == "session.ended" for e in events), f"{kind}: no session.ended; stderr: {done.stderr[-1500:]!r}"
    return events


def decided_calls(events: list[dict]) -> list[tuple[tuple[str, ...], str, str]]:
    requested = {e["call_id"]: e for e in events if e["event"] == "tool.requested"}
    out = []
    for decision in (e for e in events if e["event"] == "tool.decided"):
        call = requested[decision["call_id"]]
        out.append((tuple(call.get("operations", [])), decision["decision"]["decision"], decision["decided_by"]))
    return out


def test_same_scenario_same_decisions_on_three_harnesses():
    root = E2E_ROOT / f"three-{uuid.uuid4().hex[:6]}"
    try:
        streams = {kind: run_kind(kind, root) for kind in ("oharness", "claude", "codex")}
        decisions = {kind: decided_calls(events) for kind, events in streams.items()}
        expected = [(("file.write",), "allow", "frame"), (("shell",), "deny", "frame"), (("file.edit",), "allow", "frame")]
        for kind, calls in decisions.items():
            assert calls == expected, f"{kind} decided {calls}"
        for kind in streams:
            assert not (root / kind / "work" / "shell.txt").exists(), f"{kind}: the refused shell call ran"
            assert (root / kind / "work" / "notes.txt").exists(), f"{kind}: the admitted write did not happen"
    finally:
        shutil.rmtree(root, ignore_errors=True)
