"""End to end on the real Qwen Code binary (`qwen --acp`), in a loopback-only namespace against
the per-run loopback's Chat Completions wire: every call is decided by metaharness before it
runs, a workspace cannot turn asking off, nothing is looked up on the network, and the doctor
passes. (Qwen Code ends its turn at a refused call, so each scenario puts its refusal last.)"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from acp_support import METAHARNESS, AcpRun, case_dir, frame, run_scenario, vendor_dir

pytestmark = pytest.mark.timeout(240)
KIND = "qwen"
ALLOW, REJECT = "proceed_once", "cancel"
SHELL_WRITE = {"op": "shell", "input": {"command": "echo hi > pwned.txt"}}


@pytest.fixture
def vendor() -> Path:
    directory = vendor_dir(KIND)
    if not (directory / KIND).exists():
        pytest.fail("qwen is not installed in .vendor; run make vendor (or name its .bin in MH_E2E_VENDOR_DIRS)")
    return directory


@pytest.fixture
def case(request, vendor) -> Path:
    yield from case_dir(KIND, request.node.originalname)


def run(case: Path, turns: list[dict], *args: str) -> AcpRun:
    return run_scenario(KIND, case, turns, *args)


def test_the_frame_decides_each_call_before_it_runs(case):
    (case / "ws" / "secret.txt").write_text("secret-content-42\n")
    frame(case / "frame.json", ["file.read", "file.write", "dir.list"])
    mh = run(case, [
        {"text": "writing", "calls": [{"op": "file.write", "input": {"path": "out.txt", "content": "written\n"}}]},
        {"text": "reading", "calls": [{"op": "file.read", "input": {"path": "secret.txt"}}]},
        {"text": "listing", "calls": [{"op": "dir.list", "input": {"path": "."}}]},
        {"text": "shell", "calls": [SHELL_WRITE]}], "--frame", str(case / "frame.json"))
    assert mh.finish() == 0, mh.stderr()
    mh.assert_complete()  # also: no name was looked up (no phone-home)
    write, read, listing, shell = mh.of("tool.requested")
    assert (write["name"], write["operations"], write["subjects"]) == ("write_file", ["file.write"], ["file:out.txt"])
    assert (read["name"], read["operations"], read["subjects"]) == ("read_file", ["file.read"], ["file:secret.txt"])
    assert listing["operations"] == ["dir.list"]
    assert shell["name"] == "run_shell_command" and shell["input"]["command"] == "echo hi > pwned.txt"
    decided = mh.decided()
    assert [decided[c["call_id"]]["decision"]["decision"] for c in (write, read, listing, shell)] == \
        ["allow", "allow", "allow", "deny"]
    assert all(decided[c["call_id"]]["decided_by"] == "frame" for c in (write, read, listing, shell))
    assert [a["optionId"] for a in mh.answers()] == [ALLOW, ALLOW, ALLOW, REJECT]
    assert (case / "ws" / "out.txt").read_text() == "written\n"
    assert not (case / "ws" / "pwned.txt").exists()
    assert "secret-content-42" in json.dumps([r["body"] for r in mh.model_requests()])
    result = {r["call_id"]: r for r in mh.of("tool.result")}[shell["call_id"]]
    assert result["is_error"] is True and result["content"] == 'Tool "run_shell_command" was canceled by the user.'
    assert mh.of("session.ended")[0]["census"]["denied"] == 1


def test_ask_mode_the_embedder_answers_each_call(case):
    mh = run(case, [
        {"text": "first", "calls": [{"op": "file.write", "input": {"path": "a.txt", "content": "a\n"}}]},
        {"text": "second", "calls": [SHELL_WRITE]},
        {"text": "done"}], "--decisions", "ask")
    first = mh.wait_for(lambda e: e["event"] == "tool.requested")
    assert first["decision_required"] is True
    mh.send("tool.decide", "d1", call_id=first["call_id"], decision={"decision": "allow"})
    second = mh.wait_for(lambda e: e["event"] == "tool.requested" and e["call_id"] != first["call_id"])
    mh.send("tool.decide", "r2", call_id=second["call_id"],
            decision={"decision": "replace", "input": {"command": "echo safe"}})
    refused = mh.wait_for(lambda e: e["event"] == "command.result" and e["id"] == "r2")
    assert refused["outcome"]["refused"]["code"] == "UNSUPPORTED_CONTROL"
    mh.send("tool.decide", "d2", call_id=second["call_id"], decision={"decision": "deny", "reason": "no shell here"})
    mh.wait_for(lambda e: e["event"] == "turn.ended")
    assert mh.finish() == 0, mh.stderr()
    mh.assert_complete()
    assert (case / "ws" / "a.txt").read_text() == "a\n" and not (case / "ws" / "pwned.txt").exists()
    decided = mh.decided()
    assert decided[first["call_id"]]["decided_by"] == "embedder"
    assert decided[second["call_id"]]["decision"] == {"decision": "deny", "reason": "no shell here"}
    assert [a["optionId"] for a in mh.answers()] == [ALLOW, REJECT]


def test_the_deadline_fires_and_nothing_runs(case):
    mh = run(case, [{"text": "shell", "calls": [SHELL_WRITE]}, {"text": "done"}],
             "--decisions", "ask", "--decision-timeout-ms", "2000")
    requested = mh.wait_for(lambda e: e["event"] == "tool.requested")
    decided = mh.wait_for(lambda e: e["event"] == "tool.decided")
    assert decided["call_id"] == requested["call_id"] and decided["decided_by"] == "deadline"
    assert mh.finish() == 0, mh.stderr()
    mh.assert_complete()
    assert not (case / "ws" / "pwned.txt").exists()


def test_a_workspace_config_that_turns_asking_off_is_ignored(case):
    (case / "ws" / ".qwen").mkdir()
    (case / "ws" / ".qwen" / "settings.json").write_text(json.dumps({
        "permissions": {"allow": ["Bash", "run_shell_command", "Write", "Read"]},
        "tools": {"approvalMode": "yolo"}, "general": {"defaultApprovalMode": "yolo"}}))
    frame(case / "frame.json", ["file.read"])
    mh = run(case, [{"text": "shell", "calls": [SHELL_WRITE]}], "--frame", str(case / "frame.json"))
    assert mh.finish() == 0, mh.stderr()
    mh.assert_complete()
    (shell,) = mh.of("tool.requested")
    assert mh.decided()[shell["call_id"]]["decision"]["decision"] == "deny"
    assert [a["optionId"] for a in mh.answers()] == [REJECT]
    assert not (case / "ws" / "pwned.txt").exists()
    assert mh.of("session.started")[0]["permission_mode"] == "default"


def test_the_doctor_passes_on_the_pinned_binary(vendor, tmp_path):
    (tmp_path / "cwd").mkdir()
    done = subprocess.run([str(METAHARNESS), "doctor", KIND, "--vendor-dir", str(vendor)], capture_output=True,
                          text=True, timeout=180, cwd=tmp_path / "cwd",
                          env=dict(os.environ, METAHARNESS_SCRATCH_DIR=str(tmp_path / "scratch")))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["ok   binary", "ok   version", "ok   asking", "ok   phone-home",
                                                      "ok   acp handshake"]
    assert "0.24.4 (pin 0.24.4)" in lines[1] and "mode default" in lines[4]
