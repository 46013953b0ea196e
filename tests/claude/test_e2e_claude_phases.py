"""Every command at every phase on the real Claude Code (issue 19), in the loopback-only
namespace against the loopback model.

One run walks the phases in order (the async twin of `phase_commands.walk`) — before the spawn (lines written the moment the process
starts), while metaharness spawns Claude Code (a process below it exists), mid-turn (a call
waits for its decision), between turns (a `--keep-open` run idle at its boundary), during
wind-up (a halt and the batch in one write: every line behind the halt is read while the
run winds up) — writing one batch of every command type at each; a second run reaches
"after the child died" (tests/phase_commands.py says how). Each line gets exactly one
`command.result`; `stream.closed` is last. (The interrupt on a pending call and the model
requests it must not cause: tests/claude/test_e2e_seam_holds.py.)
"""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

import phase_commands as pc  # tests/ is on sys.path for this package

from .support import ClaudeRun, scenario, shell

pytestmark = pytest.mark.timeout(180)

ASK = ["--decisions", "ask", "--decision-timeout-ms", "30000"]


def requested(e: dict) -> bool:
    return e["event"] == "tool.requested" and e["decision_required"]


def write(run: ClaudeRun, lines: list[bytes]) -> None:
    assert run.proc and run.proc.stdin
    run.proc.stdin.write(pc.blob(lines))


async def test_every_command_at_every_phase_of_one_run(tmp_path):
    run = await ClaudeRun(str(tmp_path), scenario({"calls": [shell("echo hi > pwned.txt")]}, {"text": "after"},
                                                  {"text": "third"}, {"text": "fourth"}),
                          [*ASK, "--keep-open"]).start()
    assert run.proc
    batches: dict[str, list[bytes]] = {}

    def at(phase: str) -> None:
        batches[phase] = pc.every_command(phase, "claude")
        write(run, batches[phase])

    at("early")
    metaharness = await asyncio.to_thread(pc.metaharness_pid, run.proc.pid)
    await asyncio.to_thread(pc.wait_for_a_child, metaharness)
    at("spawning")
    await run.wait_event(requested, timeout=60)
    at("mid")  # its interrupt stops the turn on the pending call; its inject opens the next
    await run.wait_event(pc.ended_after(await run.wait_event(pc.injected("mid"), timeout=60)), timeout=60)
    at("between")  # its inject opens one more turn (which its interrupt may stop)
    await run.wait_event(pc.ended_after(await run.wait_event(pc.injected("between"), timeout=60)), timeout=60)
    batches["wind"] = [pc.command("halt", "halt", reason="done"), *pc.every_command("wind", "claude")]
    write(run, batches["wind"])
    await run.finish()
    run.assert_complete()
    run.assert_no_dns()

    pc.check_walk(run.events, batches, "claude")
    assert not os.path.exists(run.path("pwned.txt"))  # the interrupt denied it


async def test_every_command_after_the_child_died(tmp_path):
    run = await ClaudeRun(str(tmp_path), scenario({"calls": [shell("echo hi > pwned.txt")]}, {"text": "done"}),
                          ASK).start()
    assert run.proc
    await run.wait_event(requested, timeout=60)
    lines = pc.every_command("dead", "claude")
    metaharness = await asyncio.to_thread(pc.metaharness_pid, run.proc.pid)

    os.kill(metaharness, signal.SIGSTOP)  # pc.frozen, across awaits
    try:
        await asyncio.to_thread(pc.kill_everything_below, metaharness)
        write(run, lines)
        await run.proc.stdin.drain()
    finally:
        os.kill(metaharness, signal.SIGCONT)
    await run.finish()
    run.assert_complete()
    pc.check_after_death(run.events, lines, "claude")
    assert not os.path.exists(run.path("pwned.txt"))
