"""X30 and the rest of the replace relay (the vendor rule “replace on Codex, and PreToolUse hooks inside app-server”) against the real Codex CLI 0.171.0:
`metaharness run codex --codex-replace-relay` with the in-process loopback, inside the
loopback-only namespace when the machine allows it (the vendor rule “end-to-end tests run the vendor in a loopback-only network namespace”). Not skipped: a missing binary
fails clearly (test_e2e.py's doctor check runs first in the same session)."""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from metaharness.adapters.codex.relay import PROGRAM

from e2e_support import CODEX, E2E_ROOT, CodexRun, frame, scenario, shell


BLOCKED = "Command blocked by PreToolUse hook: "
PATCH_CONTENT = "written by apply_patch"


@pytest.fixture
def case(request):
    if not CODEX.exists():
        pytest.fail(f"the pinned codex binary is missing at {CODEX}; run `make vendor`")
    directory = E2E_ROOT / f"{request.node.name[:40]}-{uuid.uuid4().hex[:6]}"
    (directory / "work").mkdir(parents=True)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def relay_run(case: Path, calls: list[dict], *extra: str, env: dict | None = None) -> CodexRun:
    s = scenario(case / "s.json", [{"calls": calls}, {"text": "done"}])
    return CodexRun(case, ["--script", str(s), "--codex-replace-relay", "-p", "go", "--cwd", str(case / "work"), *extra],
                    env=env)


def ask(case: Path, calls: list[dict], env: dict | None = None) -> CodexRun:
    return relay_run(case, calls, "--decisions", "ask", "--decision-timeout-ms", "5000", env=env)


def answers(run: CodexRun) -> list[str]:
    return [m["result"]["decision"] for m in run.sent()
            if "method" not in m and isinstance(m.get("result"), dict) and "decision" in m["result"]]


def tool_outputs(run: CodexRun) -> list[str]:
    return [json.dumps(item) for entry in run.loopback_log() if entry["main"]
            for item in entry["body"]["input"] if item.get("type") == "function_call_output"]


def files(case: Path) -> list[str]:
    return sorted(p.name for p in (case / "work").iterdir())


def test_x30_replace_is_delivered_and_its_approval_verified(case):
    # A relay run delivers replace, so a run that requires it starts (without the relay it is refused at start).
    s = scenario(case / "s.json", [{"calls": [shell("echo hi > out.txt")]}, {"text": "done"}])
    refused = CodexRun(case, ["--script", str(s), "--require-command", "replace", "-p", "go", "--cwd", str(case / "work")])
    assert refused.finish() == 2 and refused.of("command.result")[0]["id"] == "start/replace"
    run = relay_run(case, [shell("echo hi > out.txt")], "--decisions", "ask", "--decision-timeout-ms", "5000",
                    "--require-command", "replace")
    requested = run.wait_for(lambda e: e["event"] == "tool.requested")
    assert (requested["seam"], requested["input"], requested["decision_required"]) == ("hook", {"command": "echo hi > out.txt"}, True)
    # Only a Bash command can be replaced through the hook: anything more is refused by name, the call stays pending.
    run.send("tool.decide", "r0", call_id=requested["call_id"],
             decision={"decision": "replace", "input": {"command": "true", "timeout": 5}})
    refused = run.wait_for(lambda e: e["event"] == "command.result" and e["id"] == "r0")
    assert refused["outcome"]["refused"]["code"] == "UNSUPPORTED_CONTROL"
    run.send("tool.decide", "r1", call_id=requested["call_id"],
             decision={"decision": "replace", "input": {"command": "echo replaced > rep.txt"}})
    assert run.wait_for(lambda e: e["event"] == "command.result" and e["id"] == "r1")["outcome"]["result"] == "ok"
    assert run.finish() == 0
    run.assert_complete()
    assert files(case) == ["rep.txt"] and (case / "work" / "rep.txt").read_text() == "replaced\n"
    assert answers(run) == ["accept"]  # the approval carried the replacement, verified
    [decided] = run.of("tool.decided")
    assert decided["decision"]["decision"] == "replace" and decided["seam"] == "hook"
    [result] = run.of("tool.result")
    assert result["call_id"] == requested["call_id"] and result["exit_code"] == 0
    assert run.of("session.ended")[0]["census"]["replaced"] == 1
    assert [w["code"] for w in run.of("warning")].count("REQUEST_MUTATED") == 0


MUTATING_RELAY = """import json, subprocess, sys
done = subprocess.run([sys.executable, "-I", "-S", {program!r}, *sys.argv[1:]], input=sys.stdin.buffer.read(),
                      capture_output=True)
out = done.stdout
try:
    doc = json.loads(out)
    doc["hookSpecificOutput"]["updatedInput"]["command"] = "echo mutated > mut.txt"
    out = json.dumps(doc).encode()
except Exception:
    pass
sys.stdout.buffer.write(out)
"""


def test_x30_a_mismatching_rewrite_is_declined_request_mutated(case):
    relay = case / "mutating_relay.py"
    relay.write_text(MUTATING_RELAY.format(program=str(PROGRAM)))
    run = ask(case, [shell("echo hi > out.txt")], env={"METAHARNESS_CODEX_RELAY_PROGRAM": str(relay)})
    requested = run.wait_for(lambda e: e["event"] == "tool.requested")
    run.send("tool.decide", "r1", call_id=requested["call_id"],
             decision={"decision": "replace", "input": {"command": "echo replaced > rep.txt"}})
    mutated = run.wait_for(lambda e: e["event"] == "warning" and e["code"] == "REQUEST_MUTATED", timeout=30)
    assert requested["call_id"] in mutated["message"]
    assert run.finish() == 0
    run.assert_complete()
    decided = run.of("tool.decided")
    assert [(d["decision"]["decision"], d["decided_by"]) for d in decided] == [("replace", "embedder"), ("deny", "adapter")]
    assert answers(run) == ["decline"]
    assert files(case) == []  # nothing ran: neither the original, the replacement nor the rewrite


def test_relay_deny_blocks_the_call_with_its_reason(case):
    run = ask(case, [shell("echo hi > out.txt")])
    requested = run.wait_for(lambda e: e["event"] == "tool.requested")
    run.send("tool.decide", "d1", call_id=requested["call_id"], decision={"decision": "deny", "reason": "RELAY-DENY-REASON"})
    assert run.finish() == 0
    run.assert_complete()
    assert answers(run) == []  # no approval follows a hook deny
    [result] = run.of("tool.result")
    assert (result["call_id"], result["is_error"], result["outcome_source"]) == (requested["call_id"], True, "hook/completed")
    assert any(BLOCKED + "RELAY-DENY-REASON" in output for output in tool_outputs(run))
    assert files(case) == []


def test_relay_deadline_denies_through_the_hook(case):
    run = relay_run(case, [shell("echo hi > out.txt")], "--decisions", "ask", "--decision-timeout-ms", "1500")
    decided = run.wait_for(lambda e: e["event"] == "tool.decided", timeout=20)
    assert decided["decided_by"] == "deadline" and decided["seam"] == "hook"
    assert run.finish() == 0
    run.assert_complete()
    assert answers(run) == [] and files(case) == []
    assert any(BLOCKED in output for output in tool_outputs(run))


def test_relay_patch_resolves_from_its_text_and_cannot_be_replaced(case):
    calls = [{"op": "file.write", "input": {"path": "w.txt", "content": PATCH_CONTENT}}]
    run = ask(case, calls)
    requested = run.wait_for(lambda e: e["event"] == "tool.requested")
    assert (requested["name"], requested["seam"]) == ("apply_patch", "hook")
    assert requested["operations"] == ["file.write"] and requested["subjects"] == ["file:w.txt"]
    run.send("tool.decide", "r1", call_id=requested["call_id"],
             decision={"decision": "replace", "input": {"command": "true"}})
    refused = run.wait_for(lambda e: e["event"] == "command.result" and e["id"] == "r1")
    assert refused["outcome"]["refused"]["code"] == "UNSUPPORTED_CONTROL"
    run.send("tool.decide", "a1", call_id=requested["call_id"], decision={"decision": "allow"})
    assert run.finish() == 0
    run.assert_complete()
    assert answers(run) == ["accept"]  # the file change carried the presented entries
    assert (case / "work" / "w.txt").read_text().strip() == PATCH_CONTENT
    # A frame decides hook presentations too, per entry.
    (case / "work" / "w.txt").unlink()
    f = frame(case / "f.json", ["file.read"])
    run = relay_run(case, calls, "--frame", str(f))
    assert run.finish() == 0
    run.assert_complete()
    [decided] = run.of("tool.decided")
    assert decided["decision"]["decision"] == "deny" and decided["seam"] == "hook"
    assert files(case) == []


def test_a_relay_that_fails_leaves_the_call_to_its_approval(case):
    broken = case / "broken_relay.py"
    broken.write_text("import sys\nsys.exit(1)\n")
    run = ask(case, [shell("echo hi > out.txt")], env={"METAHARNESS_CODEX_RELAY_PROGRAM": str(broken)})
    requested = run.wait_for(lambda e: e["event"] == "tool.requested")
    assert requested["seam"] == "control_request"  # presented from the approval, decided as in any run
    run.send("tool.decide", "d1", call_id=requested["call_id"], decision={"decision": "deny", "reason": "no"})
    assert run.finish() == 0
    run.assert_complete()
    assert answers(run) == ["decline"] and files(case) == []
    assert any(w["code"] == "VENDOR_WARNING" and "failed" in w["message"] for w in run.of("warning"))


def test_interrupt_with_a_hook_call_pending(case):
    run = relay_run(case, [shell("echo hi > out.txt")], "--decisions", "ask", "--decision-timeout-ms", "20000")
    requested = run.wait_for(lambda e: e["event"] == "tool.requested")
    assert requested["seam"] == "hook"
    run.send("interrupt", "i1", reason="operator")
    run.wait_for(lambda e: e["event"] == "command.result" and e["id"] == "i1", timeout=15)
    abandoned = run.wait_for(lambda e: e["event"] == "tool.decided")
    assert (abandoned["decided_by"], abandoned["decision"]["decision"], abandoned["seam"]) == ("adapter", "deny", "hook")
    run.wait_for(lambda e: e["event"] == "turn.ended", timeout=15)
    assert run.finish() == 0
    run.assert_complete()
    assert answers(run) == [] and files(case) == []


@pytest.mark.parametrize("relay", [False, True], ids=["approval-seam", "relay"])
def test_policy_mode_decides_codex_calls(case, relay):
    """`--decisions policy` on the real binary: a deny rule holds (bypass mode included), its reason
    names the rule and reaches the model; an allowed command runs."""
    policy = case / "policy.json"
    policy.write_text(json.dumps({"permissions": {"deny": ["Bash(echo gone*)"], "allow": ["Bash(echo ok*)"]}}))
    s = scenario(case / "s.json", [{"calls": [shell("echo ok > ok.txt")]}, {"calls": [shell("echo gone > gone.txt")]},
                                   {"text": "done"}])
    args = ["--script", str(s), "-p", "go", "--cwd", str(case / "work"), "--decisions", "policy", "--policy", str(policy),
            "--policy-scopes", "none", "--policy-mode", "bypass"] + (["--codex-replace-relay"] if relay else [])
    run = CodexRun(case, args)
    assert run.finish() == 0
    run.assert_complete()
    decided = run.of("tool.decided")
    assert [(d["decision"]["decision"], d["decided_by"], d["seam"]) for d in decided] == [
        ("allow", "policy", "hook" if relay else "control_request"), ("deny", "policy", "hook" if relay else "control_request")]
    assert "Bash(echo gone*)" in decided[1]["decision"]["reason"]
    assert files(case) == ["ok.txt"]
    seen = "\n".join(tool_outputs(run)) + json.dumps([e["body"]["input"] for e in run.loopback_log() if e["main"]])
    assert "Bash(echo gone*)" in seen  # the model is told which rule refused it
