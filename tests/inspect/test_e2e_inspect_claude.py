"""`inspect eval` of a task whose agent is the real Claude Code under metaharness: mockllm's
scripted calls reach it through Inspect's bridge, a frame decides each call, and the log says so."""

from __future__ import annotations

import os

from inspect_support import decisions, run_eval_isolated

from metaharness.inspect import STORE_ATIF


def test_claude_code_under_a_frame_in_inspect(tmp_path):
    work = tmp_path / "work"
    calls = [["Write", {"file_path": str(work / "denied.txt"), "content": "no"}],
             ["Bash", {"command": "echo yes > allowed.txt"}]]
    log, work_dir = run_eval_isolated("claude", {"frame_ops": ["shell"]}, calls, tmp_path)
    assert log.status == "success", log.error
    assert [(d["name"], d["decision"], d["decided_by"], d["seam"]) for d in decisions(log)] == [
        ("Write", "deny", "frame", "hook"), ("Bash", "allow", "frame", "hook")]
    assert os.listdir(work_dir) == ["allowed.txt"]  # the denied Write never ran
    [sample] = log.samples
    assert sample.output.completion == "done"
    steps = sample.store[STORE_ATIF]["steps"]
    ran = [c["extra"]["metaharness"]["ran"] for s in steps for c in s.get("tool_calls") or []]
    assert ran == [False, True]
