"""Every command at every phase on the real Codex app-server (issue 19), in the
loopback-only namespace against the per-run loopback.

One run walks the phases in order — before the spawn (lines written the moment the process
starts), while metaharness spawns the app-server, mid-turn (a call waits for its decision),
between turns (a `--keep-open` run idle at its boundary), during wind-up (a halt and the
batch in one write: every line behind the halt is read while the run winds up) — writing
one batch of every command type at each; a second run reaches "after the child died"
(tests/phase_commands.py says how each is reached). Each line gets exactly one
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



def start(case: Path, turns: list[dict], *args: str) -> CodexRun:
    s = scenario(case / "s.json", turns)
    return CodexRun(case, ["--script", str(s), "--decisions", "ask", "--decision-timeout-ms", "30000",
                           "-p", "go", "--cwd", str(case / "work"), *args])


def test_every_command_at_every_phase_of_one_run(fresh_case):
    run = start(fresh_case, [{"calls": [shell("echo hi > pwned.txt")]}, {"text": "after"}, {"text": "third"},
                             {"text": "fourth"}], "--keep-open")
    batches = pc.walk(run, "codex")
    run.finish()
    run.assert_complete()
    pc.check_walk(run.events, batches, "codex")
    assert not (fresh_case / "work" / "pwned.txt").exists()  # the interrupt denied it


def test_every_command_after_the_child_died(fresh_case):
    run = start(fresh_case, [{"calls": [shell("echo hi > pwned.txt")]}, {"text": "done"}])
    run.wait_for(lambda e: e["event"] == "tool.requested" and e["decision_required"], timeout=60)
    lines = pc.kill_then_write(run, "codex")
    run.finish()
    run.assert_complete()
    pc.check_after_death(run.events, lines, "codex")
    assert not (fresh_case / "work" / "pwned.txt").exists()
