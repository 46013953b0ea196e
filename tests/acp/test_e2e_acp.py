"""End to end on the real opencode and Gemini CLI binaries, in a loopback-only namespace
against the per-run loopback model: every call is decided by metaharness before it runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from acp_support import KINDS, VENDOR, AcpRun, case_dir, frame, run_scenario

pytestmark = pytest.mark.timeout(240)


def _binary_present(kind: str) -> bool:
    return (VENDOR / kind).exists()


@pytest.fixture(params=KINDS)
def kind(request) -> str:
    if not _binary_present(request.param):
        pytest.fail(f"{request.param} is not installed in .vendor; run make vendor")
    return request.param


@pytest.fixture
def case(request, kind) -> Path:
    yield from case_dir(kind, request.node.originalname)


run = run_scenario


SHELL_WRITE = {"op": "shell", "input": {"command": "echo hi > pwned.txt"}}


def test_frame_denies_shell_and_search_and_admits_write_and_read(kind, case):
    """One frame (file.read, file.write), four calls: each decided by the frame before it runs."""
    (case / "ws" / "secret.txt").write_text("secret-content-42\n")
    frame(case / "frame.json", ["file.read", "file.write"])
    mh = run(kind, case, [
        {"text": "shell", "calls": [SHELL_WRITE]},
        {"text": "writing", "calls": [{"op": "file.write", "input": {"path": "out.txt", "content": "written\n"}}]},
        {"text": "reading", "calls": [{"op": "file.read", "input": {"path": "secret.txt"}}]},
        {"text": "searching", "calls": [{"op": "search", "input": {"pattern": "secret", "path": "."}}]},
        {"text": "done"}], "--frame", str(case / "frame.json"))
    assert mh.finish() == 0, mh.stderr()
    mh.assert_complete()
    shell, write, read, search = mh.of("tool.requested")
    assert shell["operations"] == ["shell"] and "echo hi > pwned.txt" in json.dumps(shell["input"])
    assert write["operations"] == ["file.write"] and write["subjects"] == ["file:out.txt"]
    assert read["operations"] == ["file.read"] and read["subjects"] == ["file:secret.txt"]
    assert search["operations"] == ["search"]
    decided = mh.decided()
    assert [decided[c["call_id"]]["decision"]["decision"] for c in (shell, write, read, search)] == \
        ["deny", "allow", "allow", "deny"]
    assert all(decided[c["call_id"]]["decided_by"] == "frame" for c in (shell, write, read, search))
    assert not (case / "ws" / "pwned.txt").exists()
    assert (case / "ws" / "out.txt").read_text() == "written\n"
    allow, reject = {"opencode": ("once", "reject"), "gemini": ("proceed_once", "cancel")}[kind]
    assert [a["optionId"] for a in mh.answers()] == [reject, allow, allow, reject]
    results = {r["call_id"]: r for r in mh.of("tool.result")}
    assert search["call_id"] not in results or results[search["call_id"]]["is_error"] is True
    # The model got the file (Gemini CLI reports no read output over ACP; opencode does).
    assert "secret-content-42" in json.dumps([r["body"] for r in mh.model_requests()])
    if kind == "opencode":
        assert "secret-content-42" in json.dumps(results[read["call_id"]]["content"])
    assert mh.of("session.ended")[0]["census"]["denied"] == 2


def test_ask_mode_the_embedder_answers_each_call(kind, case):
    mh = run(kind, case, [
        {"text": "first", "calls": [{"op": "file.write", "input": {"path": "a.txt", "content": "a\n"}}]},
        {"text": "second", "calls": [SHELL_WRITE]},
        {"text": "done"}], "--decisions", "ask")
    first = mh.wait_for(lambda e: e["event"] == "tool.requested")
    assert first["decision_required"] is True and first["deadline_ms"] == 55000
    mh.send("tool.decide", "d1", call_id=first["call_id"], decision={"decision": "allow"})
    second = mh.wait_for(lambda e: e["event"] == "tool.requested" and e["call_id"] != first["call_id"])
    # replace cannot travel over ACP: refused by name, and the call stays pending
    mh.send("tool.decide", "r2", call_id=second["call_id"],
            decision={"decision": "replace", "input": {"command": "echo safe"}})
    refused = mh.wait_for(lambda e: e["event"] == "command.result" and e["id"] == "r2")
    assert refused["outcome"]["result"] == "refused"
    assert refused["outcome"]["refused"]["code"] == "UNSUPPORTED_CONTROL"
    assert "replace" in refused["outcome"]["refused"]["reason"]
    mh.send("tool.decide", "d2", call_id=second["call_id"], decision={"decision": "deny", "reason": "no shell here"})
    mh.wait_for(lambda e: e["event"] == "turn.ended")
    assert mh.finish() == 0, mh.stderr()
    mh.assert_complete()
    assert (case / "ws" / "a.txt").exists() and not (case / "ws" / "pwned.txt").exists()
    decided = mh.decided()
    assert decided[first["call_id"]]["decided_by"] == "embedder"
    assert decided[second["call_id"]]["decision"] == {"decision": "deny", "reason": "no shell here"}
    assert [r["outcome"]["result"] for r in mh.of("command.result")] == ["ok", "refused", "ok"]


def test_the_deadline_fires_and_nothing_runs(kind, case):
    mh = run(kind, case, [{"text": "writing", "calls": [SHELL_WRITE]}, {"text": "done"}],
             "--decisions", "ask", "--decision-timeout-ms", "2000")
    requested = mh.wait_for(lambda e: e["event"] == "tool.requested")
    decided = mh.wait_for(lambda e: e["event"] == "tool.decided")
    assert decided["call_id"] == requested["call_id"] and decided["decided_by"] == "deadline"
    assert mh.finish() == 0, mh.stderr()
    mh.assert_complete()
    assert not (case / "ws" / "pwned.txt").exists()
    assert [a["outcome"] for a in mh.answers()] == ["selected"]


def test_a_workspace_config_that_turns_asking_off_is_ignored(kind, case):
    ws = case / "ws"
    if kind == "opencode":
        # Both places opencode reads a project's config from, in a git worktree.
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        allow_all = json.dumps({"permission": {"*": "allow", "bash": "allow"}})
        (ws / "opencode.json").write_text(allow_all)
        (ws / ".opencode").mkdir()
        (ws / ".opencode" / "opencode.json").write_text(allow_all)
        calls = [SHELL_WRITE]
    else:
        (ws / ".gemini").mkdir()
        (ws / ".gemini" / "settings.json").write_text(json.dumps(
            {"general": {"defaultApprovalMode": "auto_edit"}, "tools": {"allowed": ["run_shell_command", "write_file"]}}))
        calls = [{"op": "file.write", "input": {"path": "pwned.txt", "content": "x\n"}}]
    def files() -> dict:
        return {str(p): p.read_bytes() for p in ws.rglob("*") if p.is_file() and ".git" not in p.parts}

    before = files()
    frame(case / "frame.json", ["file.read"])
    mh = run(kind, case, [{"text": "writing", "calls": calls}, {"text": "done"}], "--frame", str(case / "frame.json"))
    assert mh.finish() == 0, mh.stderr()
    mh.assert_complete()
    (requested,) = mh.of("tool.requested")
    assert mh.decided()[requested["call_id"]]["decision"]["decision"] == "deny"
    assert not (ws / "pwned.txt").exists()
    assert files() == before  # nor rewritten, nor anything installed beside them


def test_a_child_dying_mid_call_leaves_nothing_undecided(kind, case):
    mh = run(kind, case, [{"text": "writing", "calls": [SHELL_WRITE]}, {"text": "done"}], "--decisions", "ask")
    requested = mh.wait_for(lambda e: e["event"] == "tool.requested")
    mh.kill_vendor()
    code = mh.finish()
    assert code == 3, mh.stderr()  # nobody found out how the session ended
    mh.assert_complete()
    decided = mh.decided()[requested["call_id"]]
    assert decided["decision"]["decision"] == "deny" and decided["decided_by"] == "adapter"
    assert not mh.of("session.ended")
    assert any(w["code"] == "NO_TERMINAL_RECORD" for w in mh.of("warning"))
    assert not (case / "ws" / "pwned.txt").exists()


def test_policy_mode_deny_rules_hold_in_bypass_mode(kind, case):
    policy = case / "policy.json"
    policy.write_text(json.dumps({"permissions": {"deny": ["Bash(echo gone*)", "Read(secret.txt)"],
                                                  "allow": ["Bash(echo ok*)"]}}))
    (case / "ws" / "secret.txt").write_text("secret-content-42\n")
    mh = run(kind, case, [
        {"text": "one", "calls": [{"op": "shell", "input": {"command": "echo gone > gone.txt"}}]},
        {"text": "two", "calls": [{"op": "shell", "input": {"command": "echo ok > ok.txt"}}]},
        {"text": "three", "calls": [{"op": "file.read", "input": {"path": "secret.txt"}}]},
        {"text": "done"}],
        "--decisions", "policy", "--policy", str(policy), "--policy-scopes", "none", "--policy-mode", "bypass")
    assert mh.finish() == 0, mh.stderr()
    mh.assert_complete()
    gone, ok, read = mh.of("tool.requested")
    decided = mh.decided()
    assert decided[gone["call_id"]]["decision"]["decision"] == "deny"
    assert decided[gone["call_id"]]["decided_by"] == "policy"
    assert decided[ok["call_id"]]["decision"]["decision"] == "allow"
    assert decided[read["call_id"]]["decision"]["decision"] == "deny"
    assert not (case / "ws" / "gone.txt").exists() and (case / "ws" / "ok.txt").exists()
    assert "secret-content-42" not in json.dumps([r["body"] for r in mh.model_requests()])


def test_interrupt_with_a_pending_call_then_inject_opens_the_next_turn(kind, case):
    mh = run(kind, case, [{"text": "writing", "calls": [SHELL_WRITE]}, {"text": "after"}, {"text": "second"}],
             "--decisions", "ask", "--decision-timeout-ms", "30000", "--keep-open")
    requested = mh.wait_for(lambda e: e["event"] == "tool.requested")
    mh.send("interrupt", "i1", reason="stop")
    ended = mh.wait_for(lambda e: e["event"] == "turn.ended")
    assert ended["stop_reason"] == "cancelled"
    decided = mh.decided()[requested["call_id"]]
    assert decided["decision"]["decision"] == "deny"
    names = mh.names()
    assert names.index("tool.decided") < names.index("command.result") < names.index("turn.ended")
    sent = mh.sent()
    answered = next(i for i, m in enumerate(sent) if isinstance(m.get("result"), dict) and "outcome" in m["result"])
    cancel = next(i for i, m in enumerate(sent) if m.get("method") == "session/cancel")
    # The cancel first, then the answer `cancelled`: an agent that read a reject before the cancel
    # would hand it to the model (one more model request). Gemini CLI holds a cancel until the
    # open request is answered `cancelled`; opencode ends the turn on the cancel.
    assert cancel < answered
    assert sent[answered]["result"]["outcome"] == {"outcome": "cancelled"}
    mh.send("message.inject", "m1", text="NOTE-NEXT-1")
    mh.wait_for(lambda e: e["event"] == "turn.ended" and e["turn"] == 2)
    prompts = [m for m in mh.sent() if m.get("method") == "session/prompt"]
    assert len(prompts) == 2 and "NOTE-NEXT-1" in json.dumps(prompts[1]["params"]["prompt"])
    assert "NOTE-NEXT-1" in json.dumps(mh.model_requests()[-1]["body"])
    mh.send("halt", "h1", reason="done")
    mh.finish()
    mh.assert_complete()
    assert not (case / "ws" / "pwned.txt").exists()


def test_frame_set_between_turns_decides_the_next_turn(kind, case):
    frame(case / "first.json", ["file.write"])
    mh = run(kind, case, [
        {"text": "writing", "calls": [{"op": "file.write", "input": {"path": "one.txt", "content": "1\n"}}]},
        {"text": "first done"},
        {"text": "again", "calls": [{"op": "file.write", "input": {"path": "two.txt", "content": "2\n"}}]},
        {"text": "second done"}], "--frame", str(case / "first.json"), "--keep-open",
        "--require-command", "frame.set")
    mh.wait_for(lambda e: e["event"] == "turn.ended")
    second = json.loads((frame(case / "second.json", ["file.read"])).read_text())
    second.pop("format", None)
    mh.send("frame.set", "f1", frame=second)
    mh.wait_for(lambda e: e["event"] == "turn.ended" and e["turn"] == 2)
    mh.send("halt", "h1", reason="done")
    mh.finish()
    mh.assert_complete()
    first_call, second_call = mh.of("tool.requested")
    decided = mh.decided()
    assert decided[first_call["call_id"]]["decision"]["decision"] == "allow"
    assert decided[second_call["call_id"]]["decision"]["decision"] == "deny"
    assert (case / "ws" / "one.txt").exists() and not (case / "ws" / "two.txt").exists()
    assert mh.of("turn.started")[1]["frame_digest"] == second["digest"]


def test_halt_with_a_pending_call(kind, case):
    mh = run(kind, case, [{"text": "writing", "calls": [SHELL_WRITE]}, {"text": "done"}],
             "--decisions", "ask", "--decision-timeout-ms", "30000")
    mh.wait_for(lambda e: e["event"] == "tool.requested")
    mh.send("halt", "h1", reason="stop")
    mh.finish()
    mh.assert_complete()
    assert mh.events[-1]["reason"] == "steer-halt"
    assert len(mh.answers()) == 1 and mh.answers()[0].get("optionId") in (None, "reject", "cancel")
    assert not (case / "ws" / "pwned.txt").exists()


def test_subagents_never_run_undecided(kind, case):
    mh = run(kind, case, [{"text": "spawning", "calls": [{"op": "subagent.spawn", "input": {"prompt": "list files"}}]},
                          {"text": "done"}], "--decisions", "observe")
    assert mh.finish() == 0, mh.stderr()
    mh.assert_complete()
    assert not mh.of("tool.decided")  # nothing was allowed
    if kind == "opencode":
        # task is denied by the pinning, so opencode does not even offer it to the model.
        offered = mh.model_requests()[0]["body"]["tools"]
        assert "task" not in [t["function"]["name"] for t in offered] and "bash" in [t["function"]["name"] for t in offered]
    else:
        (requested,) = mh.of("tool.requested")
        assert requested["name"] == "invoke_agent" and requested["decision_required"] is False
        assert [w["code"] for w in mh.of("warning")] == ["VENDOR_PERMISSION_DENIED"]
        (result,) = mh.of("tool.result")
        assert result["is_error"] is True and "denied by policy" in result["content"]
