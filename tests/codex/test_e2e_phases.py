"""Every command at every phase on the real Codex app-server (issue 19), in the
loopback-only namespace against the per-run loopback.

One run walks the phases in order — before the spawn (lines written the moment the process
starts), while metaharness spawns the app-server (a process below it exists), mid-turn (a
call waits for its decision), between turns (a `--keep-open` run idle at its boundary),
during wind-up (a halt and the batch in one write: every line behind the halt is read while
the run winds up) — writing one batch of every command type at each; a second run reaches
"after the child died" (tests/phase_commands.py says how). Each line gets exactly one
`command.result`; `stream.closed` is last. (The interrupt on a pending call and the model
requests it must not cause: tests/codex/test_e2e_seam_holds.py.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from e2e_support import CodexRun, fresh_case, scenario, shell  # noqa: F401  (fresh_case: a fixture)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import phase_commands as pc  # noqa: E402

pytestmark = pytest.mark.e2e


def start(case: Path, turns: list[dict], *args: str) -> CodexRun:
    s = scenario(case / "s.json", turns)
    return CodexRun(case, ["--script", str(s), "--decisions", "ask", "--decision-timeout-ms", "30000",
                           "-p", "go", "--cwd", str(case / "work"), *args])


def write(run: CodexRun, lines: list[bytes]) -> None:
    run.proc.stdin.write(pc.blob(lines))
    run.proc.stdin.flush()


def requested(e: dict) -> bool:
    return e["event"] == "tool.requested" and e["decision_required"]


def test_every_command_at_every_phase_of_one_run(fresh_case):
    run = start(fresh_case, [{"calls": [shell("echo hi > pwned.txt")]}, {"text": "after"}, {"text": "third"},
                             {"text": "fourth"}], "--keep-open")
    batches: dict[str, list[bytes]] = {}

    def at(phase: str) -> None:
        batches[phase] = pc.every_command(phase, "codex")
        write(run, batches[phase])

    at("early")
    pc.wait_for_a_child(pc.metaharness_pid(run.proc.pid))
    at("spawning")
    run.wait_for(requested, timeout=60)
    at("mid")  # its interrupt stops the turn on the pending call; its inject opens the next
    run.wait_for(lambda e: e["event"] == "turn.ended" and e["turn"] == 2, timeout=60)
    at("between")  # its inject opens a third turn (which its interrupt may stop)
    run.wait_for(lambda e: e["event"] == "turn.ended" and e["turn"] == 3, timeout=60)
    wind = pc.every_command("wind", "codex")
    batches["wind"] = [pc.command("halt", "halt", reason="done"), *wind]
    write(run, batches["wind"])
    run.finish()
    run.assert_complete()

    for phase, lines in batches.items():
        pc.assert_refusals(pc.answers(run.events, lines), phase, "codex")
    results = run.of("command.result")
    assert run.events[-2] == results[-1] and results[-1]["id"] == "halt"  # the halt is answered last
    assert results[-1]["outcome"] == {"result": "ok", "applies_at": None}
    pc.assert_winding_up(pc.answers(run.events, wind), "wind", "codex")
    early = pc.answers(run.events, batches["early"])
    assert early["early-posture"]["result"] == "ok", early  # held until the app-server existed, then carried
    assert early["early-steer"]["code"] == "TOO_LATE"  # no turn was running
    mid = pc.answers(run.events, batches["mid"])
    assert mid["mid-interrupt"] == {"result": "ok", "applies_at": None}
    assert mid["mid-decide"]["code"] == "UNKNOWN_CALL"
    between = pc.answers(run.events, batches["between"])
    assert between["between-posture"]["result"] == "ok", between
    assert not (fresh_case / "work" / "pwned.txt").exists()  # the interrupt denied it


def test_every_command_after_the_child_died(fresh_case):
    run = start(fresh_case, [{"calls": [shell("echo hi > pwned.txt")]}, {"text": "done"}])
    run.wait_for(requested, timeout=60)
    lines = pc.every_command("dead", "codex")
    metaharness = pc.metaharness_pid(run.proc.pid)
    with pc.frozen(metaharness):
        pc.kill_everything_below(metaharness)
        write(run, lines)
    run.finish()
    run.assert_complete()
    by_id = pc.answers(run.events, lines)
    pc.assert_refusals(by_id, "dead", "codex")
    for what in ("interrupt", "posture", "steer"):  # nothing reaches a dead app-server: never `ok`
        assert by_id[f"dead-{what}"]["code"] == "TOO_LATE", (what, by_id[f"dead-{what}"])
    assert not (fresh_case / "work" / "pwned.txt").exists()
