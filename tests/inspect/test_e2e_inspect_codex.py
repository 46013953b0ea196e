"""`inspect eval` of a task whose agent is the real Codex under metaharness: mockllm's scripted
calls reach it through Inspect's bridge (Responses API), and a frame or policy decides each call."""

from __future__ import annotations

import json
import os

from inspect_support import decisions, run_eval_isolated


def test_codex_under_a_frame_in_inspect(tmp_path):
    # the frame admits reading only: a shell command is denied and never runs
    calls = [["exec_command", {"cmd": "echo no > denied.txt"}]]
    log, work_dir = run_eval_isolated("codex", {"frame_ops": ["file.read"]}, calls, tmp_path)
    assert log.status == "success", log.error
    got = decisions(log)
    assert [(d["decision"], d["decided_by"], d["seam"]) for d in got] == [("deny", "frame", "control_request")]
    assert "echo no > denied.txt" in got[0]["input"]["command"]
    assert os.listdir(work_dir) == []


def test_codex_under_a_deny_rule_in_inspect(tmp_path):
    # policy mode, bypass: the deny rule stops the first command, the second runs
    policy = tmp_path / "deny.json"
    policy.write_text(json.dumps({"permissions": {"deny": ["Bash(echo no*)"]}}))
    calls = [["exec_command", {"cmd": "echo no > denied.txt"}], ["exec_command", {"cmd": "echo yes > allowed.txt"}]]
    log, work_dir = run_eval_isolated("codex", {"policy": str(policy), "policy_mode": "bypass"}, calls, tmp_path)
    assert log.status == "success", log.error
    got = decisions(log)
    assert [(d["decision"], d["decided_by"]) for d in got] == [("deny", "policy"), ("allow", "policy")]
    assert "Bash(echo no*)" in got[0]["reason"]
    assert os.listdir(work_dir) == ["allowed.txt"]
