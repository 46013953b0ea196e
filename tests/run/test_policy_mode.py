"""`--decisions policy`: the OHarness permission engine at metaharness's per-call seam
(the permission rule “policy decision mode for metaharness”), on the run core by plain calls and through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from metaharness.run.spec import RunSpec
from metaharness.run.start import RunRefused

from .conftest import make_frame
from .fake import CoreRun, cmd


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


def started(s: RunSpec) -> CoreRun:
    run = CoreRun(s)
    run.start()
    run.turn(first=True)
    return run


def delivered_words(run: CoreRun) -> list[str]:
    return [decision.__struct_config__.tag for _, decision, _ in run.delivered]


def test_deny_rule_holds_and_names_rule_and_scope(tmp_path):
    policy = settings(tmp_path, {"deny": ["Bash(rm -rf *)"], "allow": ["Bash(echo *)"]})
    run = started(spec(tmp_path, policy_files=[policy], policy_mode="bypass"))
    run.call("bash", {"command": "echo hi; rm -rf build"}, "c1")
    run.call("bash", {"command": "echo hi"}, "c2")
    run.end_session()
    run.wind_up()
    first, second = decided(run.events)
    assert first["decision"]["decision"] == "deny" and first["decided_by"] == "policy"
    assert "Bash(rm -rf *)" in first["decision"]["reason"] and "file scope" in first["decision"]["reason"]
    assert second["decision"] == {"decision": "allow"} and second["decided_by"] == "policy"
    assert delivered_words(run) == ["deny", "allow"]
    assert run.by("session.ended")[0]["census"]["by_decider"] == {"policy": 2}
    trail = [json.loads(l) for l in (tmp_path / "record" / "decisions.jsonl").read_text().splitlines()]
    assert [t["kind"] for t in trail] == ["decision", "answer", "decision", "answer"]
    assert trail[0]["id"] == trail[1]["id"] and trail[1]["outcome"] == "denied"
    assert run.stderr == [f"metaharness: the policy decision trail is in {tmp_path / 'record' / 'decisions.jsonl'}"]


def test_ask_without_embedder_is_unavailable_deny(tmp_path):
    run = started(spec(tmp_path, policy_mode="manual"))
    run.call("bash", {"command": "make"}, "c1")
    d = decided(run.events)[0]
    assert d["decision"]["decision"] == "deny" and d["decided_by"] == "policy"
    assert "nobody to ask; refused fail-closed" in d["decision"]["reason"]
    requested = run.by("tool.requested")[0]
    assert requested["decision_required"] is False and "policy" not in requested


def test_ask_forwarded_to_embedder(tmp_path):
    run = started(spec(tmp_path, policy_mode="manual", policy_ask="embedder"))
    run.call("bash", {"command": "make"}, "c1")
    requested = run.by("tool.requested")[0]
    assert requested["decision_required"] is True
    assert list(requested["policy"]) == ["behavior", "reason", "rule", "scope", "principal"]
    assert requested["policy"]["principal"] == "Bash(make)"
    run.send(cmd("tool.decide", id="d", call_id="c1", decision={"decision": "allow"}))
    d = decided(run.events)[0]
    assert d["decision"] == {"decision": "allow"} and d["decided_by"] == "embedder"
    assert delivered_words(run) == ["allow"]


def test_embedder_abstain_does_not_answer_a_policy_question(tmp_path):
    run = started(spec(tmp_path, policy_mode="manual", policy_ask="embedder"))
    run.call("bash", {"command": "make"}, "c1")
    run.send(cmd("tool.decide", id="d", call_id="c1", decision={"decision": "abstain"}))
    assert decided(run.events)[0]["decision"]["decision"] == "deny"
    assert delivered_words(run) == ["deny"]


def test_a_forwarded_ask_whose_deadline_passes_is_resolved_by_the_engine_as_unanswered(tmp_path):
    run = started(spec(tmp_path, policy_mode="manual", policy_ask="embedder", decision_timeout_ms=1000))
    run.call("bash", {"command": "make"}, "c1")
    run.clock.advance(1.5)
    run.expire()
    d = decided(run.events)[0]
    assert (d["decision"]["decision"], d["decided_by"], d["latency_ms"]) == ("deny", "deadline", 1500)
    assert delivered_words(run) == ["deny"]


def test_policy_deny_before_frame_deny_and_frame_deny_next(tmp_path):
    from metaharness.protocol import frame as frames

    frame_path = tmp_path / "f.json"
    frame_path.write_bytes(frames.document_bytes(frames.seal(make_frame([{"op": "file.read"}]))))
    policy = settings(tmp_path, {"deny": ["Bash(rm *)"]})
    run = started(spec(tmp_path, policy_files=[policy], policy_mode="bypass", frame=str(frame_path)))
    run.call("bash", {"command": "rm x"}, "c1")
    run.call("bash", {"command": "ls"}, "c2")
    run.call("read", {"path": "a.txt"}, "c3")
    d = decided(run.events)
    assert [x["decided_by"] for x in d] == ["policy", "frame", "policy"]
    assert [x["decision"]["decision"] for x in d] == ["deny", "deny", "allow"]
    assert not [e for e in run.events if e["event"] == "warning" and e["code"] == "NO_FRAME_IN_FORCE"]


def test_deny_only_policy_allow_becomes_abstain(tmp_path):
    run = started(spec(tmp_path, policy_mode="bypass", deny_only=True))
    run.call("bash", {"command": "ls"}, "c1")
    assert decided(run.events)[0]["decision"] == {"decision": "abstain"}
    assert delivered_words(run) == ["abstain"]


def test_invalid_policy_refused_at_start(tmp_path):
    bad = settings(tmp_path, {"deny": ["Bash(unclosed"]})
    with pytest.raises(RunRefused, match=r"Bash\(unclosed"):
        CoreRun(spec(tmp_path, policy_files=[bad])).core.check_start()
    hooks = tmp_path / "hooks.json"
    hooks.write_text(json.dumps({"hooks": {}}))
    with pytest.raises(RunRefused, match="hooks"):
        CoreRun(spec(tmp_path, policy_files=[str(hooks)])).core.check_start()


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
