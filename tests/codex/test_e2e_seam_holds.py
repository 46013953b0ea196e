"""Issue 19 on the real Codex app-server: only the embedder decides, and an interrupt on a
pending call stops the turn before any further model request.

The adversary is tests/fixtures/adversary/attack.py, run by an allowed command; it writes forged approvals (JSON-RPC results) and metaharness commands into
every fd of the run's processes it can find while the next call waits for a decision
the embedder never sends. It touches only this run's processes."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from e2e_support import CodexRun, fresh_case, scenario, shell  # noqa: F401  (fresh_case: a fixture)


ATTACK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "adversary", "attack.py")


@pytest.fixture
def case(fresh_case):
    return fresh_case


def main_requests(run: CodexRun) -> int:
    return sum(1 for entry in run.loopback_log() if entry["main"])


def test_interrupt_on_a_pending_call_makes_no_further_model_request(case):
    s = scenario(case / "s.json", [{"calls": [shell("echo hi > out.txt")]}, {"text": "SECOND"}])
    run = CodexRun(case, ["--script", str(s), "--decisions", "ask", "--decision-timeout-ms", "20000",
                          "-p", "go", "--cwd", str(case / "work")])
    run.wait_for(lambda e: e["event"] == "tool.requested" and e["decision_required"])
    before = main_requests(run)
    run.send("interrupt", "i1", reason="stop")
    ended = run.wait_for(lambda e: e["event"] == "turn.ended")
    assert ended["stop_reason"] == "interrupted"
    run.finish()
    run.assert_complete()
    time.sleep(1.0)
    assert main_requests(run) == before, "codex asked the model again after the interrupt"
    assert not any(e["event"] == "text" and "SECOND" in e.get("text", "") for e in run.events)


def test_the_agents_shell_cannot_decide_its_next_call(case):
    work = case / "work"
    report, pid_file = work / "report.json", work / "mh.pid"
    host_ns = os.readlink("/proc/self/ns/pid")
    # Codex ends a command's detached processes with the command, so the attack runs in the
    # foreground of its own (allowed) call, against the channels the next call will use.
    attack = f"{sys.executable} {ATTACK} {report} 1.5 victim {pid_file} '{host_ns}' </dev/null >{work}/attack.log 2>&1"
    s = scenario(case / "s.json", [{"calls": [shell(attack, "attack")]},
                                   {"calls": [shell("echo pwned > PWNED", "victim")]}, {"text": "done"}])
    run = CodexRun(case, ["--script", str(s), "--decisions", "ask", "--decision-timeout-ms", "4000",
                          "-p", "go", "--cwd", str(work)])
    pid_file.write_text(str(run.proc.pid))  # the run's top process: the attack stays below it
    first = run.wait_for(lambda e: e["event"] == "tool.requested" and e["decision_required"])
    run.send("tool.decide", "ok-attack", call_id=first["call_id"], decision={"decision": "allow"})
    second = run.wait_for(lambda e: e["event"] == "tool.requested" and e["decision_required"]
                          and e["call_id"] != first["call_id"], timeout=60)
    run.wait_for(lambda e: e["event"] == "tool.decided" and e["call_id"] == second["call_id"], timeout=30)
    run.finish()
    run.assert_complete()
    decided = {e["call_id"]: e for e in run.of("tool.decided")}
    assert decided[second["call_id"]]["decided_by"] == "deadline"  # nobody but the deadline answered it
    assert decided[second["call_id"]]["decision"]["decision"] == "deny"
    time.sleep(1.0)
    assert not (work / "PWNED").exists()
    assert not [e for e in run.events if e["event"] == "warning" and e["code"] == "UNDECIDED_CALL_RAN"]
    assert not [e for e in run.of("command.result") if e["id"].startswith("forged")]
    for _ in range(50):
        if report.exists():
            break
        time.sleep(0.1)
    log = (work / "attack.log").read_text() if (work / "attack.log").exists() else "(no log)"
    assert report.exists(), f"the attack wrote no report: {log}; results: {run.of('tool.result')}"
    found = json.loads(report.read_text())
    # Codex runs each command in a PID namespace of its own sandbox: the app-server is not even
    # visible there (what is visible are the command's own output pipes). Where a channel is
    # visible it does not reopen.
    assert set(found["refused"].values()) <= {"ENXIO"}, found
    assert not [k for k, t in found["opened_write"].items() if t.startswith("socket:")], found
    assert not [k for k, t in found["stole"].items() if t.startswith("socket:")], found


def _tree(root: int) -> list[int]:
    """root and its descendants, through the kernel's children lists."""
    found = [root]
    for pid in found:
        for task in (os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else []):
            try:
                found += [int(child) for child in open(f"/proc/{pid}/task/{task}/children").read().split()]
            except OSError:
                pass
    return found


def test_the_relay_secret_is_in_no_argv_and_no_file(case):
    """--codex-replace-relay: the hook gets the secret in its environment; no process's argv
    (readable by every local user) and not config.toml carries it, nor the environment of the
    commands the model runs (`shell_environment_policy` excludes it)."""
    s = scenario(case / "s.json", [{"calls": [shell("env > env.txt")]}, {"text": "done"}])
    run = CodexRun(case, ["--script", str(s), "--decisions", "ask", "--decision-timeout-ms", "20000",
                          "--codex-replace-relay", "-p", "go", "--cwd", str(case / "work")])
    call = run.wait_for(lambda e: e["event"] == "tool.requested" and e["decision_required"])  # the hook waits
    secret, argvs = None, []
    for pid in _tree(run.proc.pid):
        try:
            environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            argvs.append(open(f"/proc/{pid}/cmdline", "rb").read())
        except OSError:
            continue
        for item in environ:
            if item.startswith(b"METAHARNESS_RELAY_SECRET="):
                secret = item.split(b"=", 1)[1]
    assert secret, "no process of the run carries the relay secret"
    assert any(b"relay_program.py" in argv for argv in argvs), "the hook was not running"
    assert not [argv for argv in argvs if secret in argv]
    config = (run.scratch / "codex-home" / "config.toml").read_bytes()
    assert b"relay_program.py" in config and secret not in config
    run.send("tool.decide", "d", call_id=call["call_id"], decision={"decision": "allow"})
    assert run.finish() == 0
    run.assert_complete()
    seen = (case / "work" / "env.txt").read_bytes()
    assert b"PATH=" in seen and secret not in seen
