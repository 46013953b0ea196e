"""A decision for a call the real Codex app-server waited on, sent after it died and before the
run noticed (issue 23): refused TOO_LATE, the call closed by the wind-up's deny, no census
counting an allow, and the call never ran. In the loopback-only namespace against the per-run
loopback.

metaharness is frozen (SIGSTOP) while everything below it is killed and the decision written,
then resumed, so the decision is in its stdin before it can notice the death — once with the
app-server reaped as far as the kernel goes, once with it stopped and SIGKILLed and not waited
for (killed and not yet torn down: its end of the JSON-RPC pipe may still be open).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from e2e_support import CodexRun, fresh_case, scenario, shell  # noqa: F401  (fresh_case: a fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import phase_commands as pc  # noqa: E402

pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "killed-not-reaped"])
def test_a_decision_sent_to_a_dead_codex_is_too_late_and_the_call_is_the_wind_ups_deny(fresh_case, reaped):
    s = scenario(fresh_case / "s.json", [{"calls": [shell("echo hi > pwned.txt")]}, {"text": "done"}])
    run = CodexRun(fresh_case, ["--script", str(s), "--decisions", "ask", "--decision-timeout-ms", "60000",
                                "-p", "go", "--cwd", str(fresh_case / "work")])
    requested = run.wait_for(lambda e: e["event"] == "tool.requested" and e["decision_required"], timeout=120)
    metaharness = pc.metaharness_pid(run.proc.pid)
    with pc.frozen(metaharness):
        if reaped:
            pc.kill_everything_below(metaharness)
        else:
            pc.stop_and_kill_below(metaharness)
        run.proc.stdin.write(pc.blob([pc.command("late", "tool.decide", call_id=requested["call_id"],
                                                 decision={"decision": "allow"})]))
        run.proc.stdin.flush()
    run.finish(timeout=120)
    run.assert_complete()

    pc.check_decided_after_death(run.events, "late", requested["call_id"])
    assert not (fresh_case / "work" / "pwned.txt").exists()
