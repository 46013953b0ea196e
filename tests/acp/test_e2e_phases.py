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

import os
import shutil
import sys
from pathlib import Path

import pytest

from acp_support import E2E_ROOT, KINDS, VENDOR, AcpRun, scenario

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import phase_commands as pc  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


@pytest.fixture(params=KINDS)
def kind(request) -> str:
    if not (VENDOR / request.param).exists():
        pytest.fail(f"{request.param} is not installed in .vendor; run make vendor")
    return request.param


@pytest.fixture
def case(request, kind) -> Path:
    path = E2E_ROOT / f"{kind}-{request.node.originalname}"
    shutil.rmtree(path, ignore_errors=True)
    (path / "ws").mkdir(parents=True)
    yield path
    if not os.environ.get("MH_KEEP_E2E"):
        shutil.rmtree(path, ignore_errors=True)


SHELL_WRITE = {"op": "shell", "input": {"command": "echo hi > pwned.txt"}}


def start(kind: str, case: Path, turns: list[dict], *args: str) -> AcpRun:
    scenario(case / "scenario.json", turns)
    return AcpRun(kind, case, ["-p", "do the task", "--script", str(case / "scenario.json"), "--cwd", str(case / "ws"),
                               "--decisions", "ask", "--decision-timeout-ms", "30000", *args])


def write(mh: AcpRun, lines: list[bytes]) -> None:
    mh.proc.stdin.write(pc.blob(lines))
    mh.proc.stdin.flush()


def requested(e: dict) -> bool:
    return e["event"] == "tool.requested" and e["decision_required"]


def test_every_command_at_every_phase_of_one_run(kind, case):
    mh = start(kind, case, [{"text": "writing", "calls": [SHELL_WRITE]}, {"text": "after"}, {"text": "third"},
                            {"text": "fourth"}], "--keep-open")
    batches: dict[str, list[bytes]] = {}

    def at(phase: str) -> None:
        batches[phase] = pc.every_command(phase, kind)
        write(mh, batches[phase])

    at("early")
    pc.wait_for_a_child(pc.metaharness_pid(mh.proc.pid))
    at("spawning")
    mh.wait_for(requested)
    at("mid")  # its interrupt stops the turn on the pending call; its inject opens the next
    mh.wait_for(lambda e: e["event"] == "turn.ended" and e["turn"] == 2)
    at("between")  # its inject opens a third turn (which its interrupt may stop)
    mh.wait_for(lambda e: e["event"] == "turn.ended" and e["turn"] == 3)
    wind = pc.every_command("wind", kind)
    batches["wind"] = [pc.command("halt", "halt", reason="done"), *wind]
    write(mh, batches["wind"])
    mh.finish()
    mh.assert_complete()

    for phase, lines in batches.items():
        by_id = pc.answers(mh.events, lines)
        pc.assert_refusals(by_id, phase, kind)
    results = mh.of("command.result")
    assert mh.events[-2] == results[-1] and results[-1]["id"] == "halt"  # the halt is answered last
    assert results[-1]["outcome"] == {"result": "ok", "applies_at": None}
    pc.assert_winding_up(pc.answers(mh.events, wind), "wind", kind)
    mid = pc.answers(mh.events, batches["mid"])
    assert mid["mid-interrupt"] == {"result": "ok", "applies_at": None}
    assert mid["mid-decide"]["code"] == "UNKNOWN_CALL"
    assert all(pc.answers(mh.events, batches[p])[f"{p}-inject"] == {"result": "ok", "applies_at": "next turn"}
               for p in ("early", "spawning", "mid", "between"))
    assert not (case / "ws" / "pwned.txt").exists()  # the interrupt denied it


def test_every_command_after_the_child_died(kind, case):
    mh = start(kind, case, [{"text": "writing", "calls": [SHELL_WRITE]}, {"text": "done"}])
    mh.wait_for(requested)
    lines = pc.every_command("dead", kind)
    metaharness = pc.metaharness_pid(mh.proc.pid)
    with pc.frozen(metaharness):
        pc.kill_everything_below(metaharness)
        write(mh, lines)
    mh.finish()
    mh.assert_complete()
    by_id = pc.answers(mh.events, lines)
    pc.assert_refusals(by_id, "dead", kind)
    # nothing reaches a dead harness: refused, never `ok` (whether the run saw the death first
    # or the control found the channel closed)
    assert by_id["dead-interrupt"]["code"] == "TOO_LATE", by_id["dead-interrupt"]
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
