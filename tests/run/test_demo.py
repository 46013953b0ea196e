"""`metaharness demo`: the two-step framed workflow, live view and raw stream."""

from __future__ import annotations

import json
import subprocess
import sys


def test_demo_json_is_a_complete_two_step_run(tmp_path):
    work = tmp_path / "ws"
    proc = subprocess.run([sys.executable, "-m", "metaharness", "demo", "--json", "--workspace", str(work)],
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(l) for l in proc.stdout.splitlines()]
    assert (work / "demo.events.jsonl").read_bytes() == proc.stdout
    decided = [e for e in events if e["event"] == "tool.decided"]
    # step 1: the eager write is refused with the frame's reason, the reads are allowed
    assert decided[0]["decision"]["decision"] == "deny"
    assert decided[0]["decision"]["reason"].startswith('this step admits ["dir.list", "file.read", "search"]')
    assert [d["decision"]["decision"] for d in decided[1:3]] == ["allow", "allow"]
    # the embedder's frame.set opened step 2 at the boundary, where the write is allowed
    steps = [e["step"]["state"] for e in events if e["event"] == "step.entered"]
    assert steps == ["survey", "write-up"]
    assert decided[3]["decision"]["decision"] == "allow"
    assert (work / "summary.md").read_text().startswith("# Summary")
    check = subprocess.run([sys.executable, "-m", "metaharness", "check", str(work / "demo.events.jsonl")],
                           capture_output=True, timeout=30)
    assert check.returncode == 0


def test_demo_live_view(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "metaharness", "demo", "--workspace", str(tmp_path / "ws")],
                          capture_output=True, text=True, timeout=60, env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "deny" in out and "by frame" in out
    assert "census" in out and "3 allowed" in out and "1 denied" in out
    assert "complete" in out
