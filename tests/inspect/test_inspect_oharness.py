"""`inspect eval` of a task whose agent is oharness under metaharness (mockllm through the bridge)."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys


from inspect_ai.approval import Approval, ApprovalPolicy, approver
from inspect_ai.tool import ToolCall, ToolCallView

from metaharness.inspect import STORE_ATIF, STORE_DECISIONS, STORE_EVENTS, metaharness_agent

from inspect_support import COMMAND, decisions, frame, run_eval


def test_frame_denies_a_write_and_allows_a_shell_command(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    calls = [("write", {"path": "denied.txt", "content": "no"}),
             ("bash", {"command": "echo yes > allowed.txt"})]
    agent = metaharness_agent("oharness", frame=frame(["shell"]), cwd=str(work), command=COMMAND)
    log = run_eval(agent, calls, tmp_path / "logs")
    assert log.status == "success", log.error
    got = decisions(log)
    assert [(d["name"], d["decision"], d["decided_by"]) for d in got] == [
        ("write", "deny", "frame"), ("bash", "allow", "frame")]
    assert not (work / "denied.txt").exists()
    assert (work / "allowed.txt").read_text() == "yes\n"
    [sample] = log.samples
    assert sample.store[STORE_DECISIONS] == got
    names = [e["event"] for e in sample.store[STORE_EVENTS]]
    assert names.count("tool.decided") == 2 and names[-1] == "stream.closed"
    atif = sample.store[STORE_ATIF]
    extras = [c["extra"]["metaharness"] for s in atif["steps"] for c in s.get("tool_calls") or []]
    assert [(x["decision"], x["ran"]) for x in extras] == [("deny", False), ("allow", True)]


@approver
def scripted_approver():
    """Inspect's side: reject a write, rewrite `echo one`, terminate on `halt`, approve the rest."""

    async def approve(message: str, call: ToolCall, view: ToolCallView, history: list) -> Approval:
        command = call.arguments.get("command", "")
        if call.function == "write":
            return Approval(decision="reject", explanation="no writes here")
        if "echo one" in command:
            modified = ToolCall(id=call.id, function=call.function, arguments={"command": "echo two"})
            return Approval(decision="modify", modified=modified, explanation="rewritten")
        if "halt" in command:
            return Approval(decision="terminate", explanation="stop the sample")
        return Approval(decision="approve")

    return approve


def inspect_decided(tmp_path, calls):
    work = tmp_path / "work"
    work.mkdir()
    agent = metaharness_agent("oharness", decisions="inspect", cwd=str(work), command=COMMAND)
    log = run_eval(agent, calls, tmp_path / "logs",
                   approval=[ApprovalPolicy(approver=scripted_approver(), tools="*")])
    return log, work


def test_inspect_approval_decides_every_call(tmp_path):
    calls = [("write", {"path": "denied.txt", "content": "no"}),
             ("bash", {"command": "echo one > modified.txt"}),
             ("bash", {"command": "echo yes > allowed.txt"})]
    log, work = inspect_decided(tmp_path, calls)
    assert log.status == "success", log.error
    got = decisions(log)
    assert [(d["name"], d["decision"]) for d in got] == [("write", "deny"), ("bash", "replace"), ("bash", "allow")]
    assert got[0]["reason"] == "no writes here"
    [sample] = log.samples
    events = sample.store[STORE_EVENTS]
    [replaced] = [e for e in events if e["event"] == "tool.decided" and e["call_id"] == got[1]["call_id"]]
    assert replaced["decision"] == {"decision": "replace", "input": {"command": "echo two"}}
    # the replacement ran instead of the call (oharness's engine decides a replacement again, and
    # a plain echo needs nobody's approval); the denied write never ran
    [result] = [e for e in events if e["event"] == "tool.result" and e["call_id"] == got[1]["call_id"]]
    assert "two" in result["content"] and not result["is_error"]
    assert sorted(p.name for p in work.iterdir()) == ["allowed.txt"]
    assert (work / "allowed.txt").read_text() == "yes\n"
    # Inspect's own record of each approval sits in the same transcript (beside the bridge's `auto`
    # approval of each model response, which keeps the eval's policy from deciding a call twice)
    approvals = [(e.call.function, e.decision) for e in sample.events if e.event == "approval" and e.approver != "auto"]
    assert approvals == [("write", "reject"), ("bash", "modify"), ("bash", "approve")]


def test_an_approver_that_terminates_halts_the_run(tmp_path):
    calls = [("bash", {"command": "echo halt > halted.txt"}), ("bash", {"command": "echo no > after.txt"})]
    log, work = inspect_decided(tmp_path, calls)
    got = decisions(log)
    assert [(d["name"], d["decision"]) for d in got] == [("bash", "deny")]
    assert list(work.iterdir()) == []
    [sample] = log.samples
    assert sample.store[STORE_EVENTS][-1]["reason"] == "steer-halt"  # the halt the approver asked for


def test_a_policy_file_that_cannot_be_read_fails_the_sample_with_the_runs_own_refusal(tmp_path):
    agent = metaharness_agent("oharness", policy=str(tmp_path / "missing.json"), command=COMMAND)
    log = run_eval(agent, [("bash", {"command": "echo no > x.txt"})], tmp_path / "logs")
    assert log.status == "error"
    assert "PolicyInvalid: " in log.samples[0].error.message


def test_the_guide_program_prints_what_the_guide_says():
    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "guides" / "inspect.md").read_text()
    program = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    printed = re.search(r"It prints:\n\n```text\n(.*?)```", page, re.S).group(1)
    # the guide says `metaharness`; here it is this interpreter's (the local sandbox's PATH may lack it)
    assert 'metaharness_agent("oharness", frame=frame, cwd=work)' in program
    program = program.replace('metaharness_agent("oharness", frame=frame, cwd=work)',
                              f'metaharness_agent("oharness", frame=frame, cwd=work, command={list(COMMAND)!r})')
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == printed
