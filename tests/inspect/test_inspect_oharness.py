"""`inspect eval` of a task whose agent is oharness under metaharness (mockllm through the bridge)."""

from __future__ import annotations

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
