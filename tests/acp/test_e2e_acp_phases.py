"""Every command at every phase, and an interrupt on a pending call, on the real opencode
and Gemini CLI (issue 19), in the loopback-only namespace against the per-run loopback.

One run walks the phases a run passes through in order — before the spawn (lines written
the moment the process starts), while metaharness spawns the harness (a process below it
exists), mid-turn (a call waits for its decision), between turns (a `--keep-open` run idle
at its boundary), during wind-up (a halt and the batch in one write: every line behind the
halt is read while the run winds up) — writing one batch of every command type at each;
a second run reaches "after the child died" (tests/phase_commands.py says how). Each line
gets exactly one `command.result`; `stream.closed` is last.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from acp_support import AcpRun, scenario
from test_e2e_acp import case, kind  # noqa: F401  (fixtures: each kind, a fresh case directory)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import phase_commands as pc  # noqa: E402

pytestmark = pytest.mark.timeout(240)


SHELL_WRITE = {"op": "shell", "input": {"command": "echo hi > pwned.txt"}}


def start(kind: str, case: Path, turns: list[dict], *args: str) -> AcpRun:
    scenario(case / "scenario.json", turns)
    return AcpRun(kind, case, ["-p", "do the task", "--script", str(case / "scenario.json"), "--cwd", str(case / "ws"),
                               "--decisions", "ask", "--decision-timeout-ms", "30000", *args])


def requested(e: dict) -> bool:
    return e["event"] == "tool.requested" and e["decision_required"]


def test_every_command_at_every_phase_of_one_run(kind, case):
    mh = start(kind, case, [{"text": "writing", "calls": [SHELL_WRITE]}, {"text": "after"}, {"text": "third"},
                            {"text": "fourth"}], "--keep-open")
    batches = pc.walk(mh, kind)
    mh.finish()
    mh.assert_complete()
    pc.check_walk(mh.events, batches, kind)
    assert not (case / "ws" / "pwned.txt").exists()  # the interrupt denied it


def test_every_command_after_the_child_died(kind, case):
    mh = start(kind, case, [{"text": "writing", "calls": [SHELL_WRITE]}, {"text": "done"}])
    mh.wait_for(requested)
    lines = pc.kill_then_write(mh, kind)
    mh.finish()
    mh.assert_complete()
    pc.check_after_death(mh.events, lines, kind)
    assert not (case / "ws" / "pwned.txt").exists()


def test_interrupt_on_a_pending_call_makes_no_further_model_request(kind, case):
    mh = start(kind, case, [{"text": "writing", "calls": [SHELL_WRITE]}, {"text": "SECOND"}])
    mh.wait_for(requested)
    before = len(mh.model_requests())
    mh.send("interrupt", "i1", reason="stop")
    ended = mh.wait_for(lambda e: e["event"] == "turn.ended")
    assert ended["stop_reason"] == "cancelled"
    assert mh.finish() in (0, 3), mh.stderr()
    mh.assert_complete()
    assert len(mh.model_requests()) == before, f"{kind} asked the model again after the interrupt"
    assert not any(e["event"] == "text" and "SECOND" in e.get("text", "") for e in mh.events)
    assert not (case / "ws" / "pwned.txt").exists()
    names = mh.names()
    result = next(i for i, e in enumerate(mh.events) if e["event"] == "command.result" and e["id"] == "i1")
    assert result < names.index("turn.ended")


def test_a_halt_on_a_pending_call_cancels_first_and_makes_no_further_model_request(kind, case):
    # A stop abandons the pending call like an interrupt does: the cancel goes out before the
    # call's answer (`cancelled`), so the agent never hands a reject to the model.
    mh = start(kind, case, [{"text": "writing", "calls": [SHELL_WRITE]}, {"text": "SECOND"}])
    mh.wait_for(requested)
    before = len(mh.model_requests())
    mh.send("halt", "h1", reason="stop")
    assert mh.finish() in (0, 3), mh.stderr()
    mh.assert_complete()
    assert len(mh.model_requests()) == before, f"{kind} asked the model again after the halt"
    assert not any(e["event"] == "text" and "SECOND" in e.get("text", "") for e in mh.events)
    assert not (case / "ws" / "pwned.txt").exists()
    assert [d["decision"]["decision"] for d in mh.of("tool.decided")] == ["deny"]
    sent = mh.sent()
    answered = next(i for i, m in enumerate(sent) if isinstance(m.get("result"), dict) and "outcome" in m["result"])
    cancel = next(i for i, m in enumerate(sent) if m.get("method") == "session/cancel")
    assert cancel < answered
    assert sent[answered]["result"]["outcome"] == {"outcome": "cancelled"}
