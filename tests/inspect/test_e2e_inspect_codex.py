"""`inspect eval` of a task whose agent is the real Codex under metaharness: mockllm's scripted
calls reach it through Inspect's bridge (Responses API), a frame decides each call."""

from __future__ import annotations

import os

from inspect_support import decisions, run_eval_isolated


def test_codex_under_a_frame_in_inspect(tmp_path):
    # the frame admits reading only: the first command (a shell command) is denied and never runs;
    # a second frame would be needed to admit one, so the allowed path is the Claude and oharness tests'
    calls = [["exec_command", {"cmd": "echo no > denied.txt"}]]
    log, work_dir = run_eval_isolated("codex", ["file.read"], calls, tmp_path)
    assert log.status == "success", log.error
    got = decisions(log)
    assert [(d["decision"], d["decided_by"], d["seam"]) for d in got] == [("deny", "frame", "control_request")]
    assert "echo no > denied.txt" in got[0]["input"]["command"]
    assert os.listdir(work_dir) == []
