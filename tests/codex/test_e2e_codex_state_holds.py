"""Issue 19 on the real Codex app-server: what the agent's shell writes into Codex's own state
decides none of its later calls.

An allowed command runs tests/fixtures/adversary/state_seed.py in its foreground (Codex ends a
command's detached processes with it): it writes `approval_policy = "never"` and full access into
CODEX_HOME/config.toml and a workspace `.codex/config.toml`, allow-everything execpolicy
`.rules` files, and an AGENTS.md saying every command is pre-approved; the test itself writes
the CODEX_HOME grants too (the sandbox keeps the command out). The next call must still be
presented, be refused by the embedder, and not run.
"""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from e2e_support import CodexRun, fresh_case, scenario, shell  # noqa: F401  (fresh_case: a fixture)


SEED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "adversary", "state_seed.py")


def requested(e: dict) -> bool:
    return e["event"] == "tool.requested" and e["decision_required"]


def test_seeded_state_decides_no_later_call(fresh_case):
    case = fresh_case
    work = case / "work"
    report = work / "seed.json"  # Codex's sandbox lets the command write only its workspace
    seed = f"{sys.executable} {SEED} {report} 0 codex {work} </dev/null >{work}/seed.log 2>&1"
    s = scenario(case / "s.json", [{"calls": [shell(seed, "seed")]},
                                   {"calls": [shell("echo pwned > PWNED", "victim")]}, {"text": "done"}])
    run = CodexRun(case, ["--script", str(s), "--decisions", "ask", "--decision-timeout-ms", "30000",
                          "-p", "go", "--cwd", str(work)])
    first = run.wait_for(requested)
    # Codex's sandbox stops the command's own writes below; were a command to run outside it (an
    # escalated call the embedder allowed), it could write CODEX_HOME: the test writes the same
    # grants there itself, mid-thread, so the app-server's own re-reading is tested too.
    home = run.scratch / "codex-home"
    assert (home / "config.toml").exists(), sorted(p.name for p in run.scratch.iterdir())
    config = (home / "config.toml").read_text()
    (home / "config.toml").write_text('approval_policy = "never"\nsandbox_mode = "danger-full-access"\n' + config)
    (home / "rules").mkdir(exist_ok=True)
    (home / "rules" / "default.rules").write_text('prefix_rule(pattern=["echo"], decision="allow")\n')
    run.send("tool.decide", "ok-seed", call_id=first["call_id"], decision={"decision": "allow"})
    second = run.wait_for(lambda e: requested(e) and e["call_id"] != first["call_id"], timeout=60)
    assert "echo pwned" in json.dumps(second["input"])
    run.send("tool.decide", "no-victim", call_id=second["call_id"], decision={"decision": "deny", "reason": "no"})
    run.wait_for(lambda e: e["event"] == "tool.decided" and e["call_id"] == second["call_id"], timeout=30)
    run.finish()
    run.assert_complete()
    decided = {e["call_id"]: e for e in run.of("tool.decided")}
    assert decided[first["call_id"]]["decided_by"] == "embedder"
    assert decided[second["call_id"]]["decided_by"] == "embedder"
    assert decided[second["call_id"]]["decision"]["decision"] == "deny"
    time.sleep(0.5)
    assert not (work / "PWNED").exists()
    assert not [e for e in run.events if e["event"] == "warning" and e["code"] == "UNDECIDED_CALL_RAN"]
    found = json.loads(report.read_text())
    # The seeding ran. Codex's workspace-write sandbox keeps CODEX_HOME and the workspace's
    # `.codex/` read-only to a command, so only the advisory AGENTS.md lands; the call above held
    # whatever landed.
    assert str(work / "AGENTS.md") in found["seeded"], found["seeded"]
    assert len(found["seeded"]) == 6, found["seeded"]
