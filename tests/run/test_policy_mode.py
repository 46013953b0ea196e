"""`--decisions policy`: the OHarness permission engine at metaharness's per-call seam
(permissions.md § 17), against the fake harness and through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from metaharness.run.spec import RunSpec

from .conftest import make_frame
from .fake import Call, Turn, cmd, drive


def settings(tmp_path, permissions: dict) -> str:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"permissions": permissions}))
    return str(path)


def spec(tmp_path, **kw) -> RunSpec:
    kw.setdefault("kind", "oharness")
    kw.setdefault("prompt", "go")
    kw.setdefault("decisions", "policy")
    kw.setdefault("cwd", str(tmp_path))
    kw.setdefault("policy_scopes", "none")
    kw.setdefault("retain_dir", str(tmp_path / "record"))
    return RunSpec(**kw)


def decided(events):
    return [e for e in events if e["event"] == "tool.decided"]


async def test_deny_rule_holds_and_names_rule_and_scope(tmp_path):
    policy = settings(tmp_path, {"deny": ["Bash(rm -rf *)"], "allow": ["Bash(echo *)"]})
    events, code, adapter, *_ = await drive(
        spec(tmp_path, policy_files=[policy], policy_mode="bypass"),
        turns=[Turn([Call("bash", {"command": "echo hi; rm -rf build"}), Call("bash", {"command": "echo hi"})])])
    first, second = decided(events)
    assert first["decision"]["decision"] == "deny" and first["decided_by"] == "policy"
    assert "Bash(rm -rf *)" in first["decision"]["reason"] and "file scope" in first["decision"]["reason"]
    assert second["decision"] == {"decision": "allow"} and second["decided_by"] == "policy"
    assert adapter.ran == ["call_2"]
    census = [e for e in events if e["event"] == "session.ended"][0]["census"]
    assert census["by_decider"] == {"policy": 2}
    trail = [json.loads(l) for l in (tmp_path / "record" / "decisions.jsonl").read_text().splitlines()]
    assert [t["kind"] for t in trail] == ["decision", "answer", "decision", "answer"]
    assert trail[0]["id"] == trail[1]["id"] and trail[1]["outcome"] == "denied"


async def test_ask_without_embedder_is_unavailable_deny(tmp_path):
    events, *_ = await drive(spec(tmp_path, policy_mode="manual"),
                             turns=[Turn([Call("bash", {"command": "make"})])])
    d = decided(events)[0]
    assert d["decision"]["decision"] == "deny" and d["decided_by"] == "policy"
    assert "nobody to ask; refused fail-closed" in d["decision"]["reason"]
    requested = [e for e in events if e["event"] == "tool.requested"][0]
    assert requested["decision_required"] is False and "policy" not in requested


async def test_ask_forwarded_to_embedder(tmp_path):
    def embedder(run, event):
        if event["event"] == "tool.requested" and event["decision_required"]:
            run.feed_line(cmd("tool.decide", id="d", call_id=event["call_id"], decision={"decision": "allow"}))

    events, code, adapter, *_ = await drive(spec(tmp_path, policy_mode="manual", policy_ask="embedder"),
                                            turns=[Turn([Call("bash", {"command": "make"})])], on_event=embedder)
    requested = [e for e in events if e["event"] == "tool.requested"][0]
    assert requested["decision_required"] is True
    assert list(requested["policy"]) == ["behavior", "reason", "rule", "scope", "principal"]
    assert requested["policy"]["principal"] == "Bash(make)"
    d = decided(events)[0]
    assert d["decision"] == {"decision": "allow"} and d["decided_by"] == "embedder"
    assert adapter.ran == ["call_1"]


async def test_embedder_abstain_does_not_answer_a_policy_question(tmp_path):
    def embedder(run, event):
        if event["event"] == "tool.requested" and event["decision_required"]:
            run.feed_line(cmd("tool.decide", id="d", call_id=event["call_id"], decision={"decision": "abstain"}))

    events, code, adapter, *_ = await drive(spec(tmp_path, policy_mode="manual", policy_ask="embedder"),
                                            turns=[Turn([Call("bash", {"command": "make"})])], on_event=embedder)
    assert decided(events)[0]["decision"]["decision"] == "deny"
    assert adapter.ran == []


async def test_policy_deny_before_frame_deny_and_frame_deny_next(tmp_path):
    from metaharness.protocol import frame as frames

    frame_path = tmp_path / "f.json"
    frame_path.write_bytes(frames.document_bytes(frames.seal(make_frame([{"op": "file.read"}]))))
    policy = settings(tmp_path, {"deny": ["Bash(rm *)"]})
    events, *_ = await drive(
        spec(tmp_path, policy_files=[policy], policy_mode="bypass", frame=str(frame_path)),
        turns=[Turn([Call("bash", {"command": "rm x"}), Call("bash", {"command": "ls"}),
                     Call("read", {"path": "a.txt"})])])
    d = decided(events)
    assert [x["decided_by"] for x in d] == ["policy", "frame", "policy"]
    assert [x["decision"]["decision"] for x in d] == ["deny", "deny", "allow"]
    assert not [e for e in events if e["event"] == "warning" and e["code"] == "NO_FRAME_IN_FORCE"]


async def test_deny_only_policy_allow_becomes_abstain(tmp_path):
    events, *_ = await drive(spec(tmp_path, policy_mode="bypass", deny_only=True),
                             turns=[Turn([Call("bash", {"command": "ls"})])])
    assert decided(events)[0]["decision"] == {"decision": "abstain"}


async def test_invalid_policy_refused_at_start(tmp_path):
    bad = settings(tmp_path, {"deny": ["Bash(unclosed"]})
    events, code, adapter, _, stderr = await drive(spec(tmp_path, policy_files=[bad]), turns=[Turn([])])
    assert code == 2 and [e["event"] for e in events] == ["stream.closed"]
    assert "Bash(unclosed" in stderr[0]
    hooks = tmp_path / "hooks.json"
    hooks.write_text(json.dumps({"hooks": {}}))
    events, code, _, _, stderr = await drive(spec(tmp_path, policy_files=[str(hooks)]), turns=[Turn([])])
    assert code == 2 and "hooks" in stderr[0]


def test_policy_mode_end_to_end_on_oharness(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [
        {"calls": [{"op": "shell", "input": {"command": "echo ok > ok.txt"}},
                   {"op": "shell", "input": {"command": "echo gone > .env.local"}},
                   {"op": "file.write", "input": {"path": ".env", "content": "SECRET=1"}}]},
        {"text": "done"}]}))
    policy = settings(tmp_path, {"deny": ["write(.env*)"], "allow": ["Bash(echo ok*)"]})
    proc = subprocess.run([sys.executable, "-m", "metaharness", "run", "oharness", "--script", str(tmp_path / "s.json"),
                           "-p", "go", "--cwd", str(tmp_path), "--decisions", "policy", "--policy", policy,
                           "--policy-scopes", "none", "--policy-mode", "bypass"],
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(l) for l in proc.stdout.splitlines()]
    verdicts = [(d["decision"]["decision"], d["decided_by"]) for d in decided(events)]
    assert verdicts == [("allow", "policy"), ("deny", "policy"), ("deny", "policy")]
    assert (tmp_path / "ok.txt").exists()
    assert not (tmp_path / ".env.local").exists() and not (tmp_path / ".env").exists()


def test_policy_flags_need_policy_mode():
    proc = subprocess.run([sys.executable, "-m", "metaharness", "run", "oharness", "--policy-ask", "embedder"],
                          capture_output=True, timeout=30)
    assert proc.returncode == 2 and proc.stdout == b""
