"""A decision for a call the real Claude Code waited on, sent after it died and before the run
noticed (issue 23): refused TOO_LATE, the call closed by the wind-up's deny, no census counting
an allow, and the call never ran. In the loopback-only namespace against the loopback model.

metaharness is frozen (SIGSTOP) while everything below it is killed and the decision written,
then resumed, so the decision is in its stdin before it can notice the death — once with the
harness reaped as far as the kernel goes, once with it stopped and SIGKILLed and not waited for
(killed and not yet torn down: its end of the hook channel may still be open).
"""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

import phase_commands as pc  # tests/ is on sys.path for this package

from .support import ClaudeRun, scenario, shell

pytestmark = pytest.mark.timeout(240)

ASK = ["--decisions", "ask", "--decision-timeout-ms", "60000"]


@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "killed-not-reaped"])
async def test_a_decision_sent_to_a_dead_claude_code_is_too_late_and_the_call_is_the_wind_ups_deny(tmp_path, reaped):
    run = await ClaudeRun(str(tmp_path), scenario({"calls": [shell("echo hi > pwned.txt")]}, {"text": "done"}),
                          ASK).start()
    assert run.proc and run.proc.stdin
    requested = await run.wait_event(lambda e: e["event"] == "tool.requested" and e["decision_required"],
                                     timeout=120)
    metaharness = await asyncio.to_thread(pc.metaharness_pid, run.proc.pid)

    os.kill(metaharness, signal.SIGSTOP)  # pc.frozen, across awaits
    try:
        if reaped:
            await asyncio.to_thread(pc.kill_everything_below, metaharness)
        else:
            pc.stop_and_kill_below(metaharness)
        run.write_raw(pc.command("late", "tool.decide", call_id=requested["call_id"],
                                 decision={"decision": "allow"}))
        await run.proc.stdin.drain()
    finally:
        os.kill(metaharness, signal.SIGCONT)
    await run.finish(timeout=120)
    run.assert_complete()

    pc.check_decided_after_death(run.events, "late", requested["call_id"])
    assert not os.path.exists(run.path("pwned.txt"))
