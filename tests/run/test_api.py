"""The embedder API: in-process and subprocess runs behave the same."""

from __future__ import annotations

import json

import pytest

from metaharness.api import spec_to_argv, start_run
from metaharness.protocol.events import StreamClosed, ToolRequested
from metaharness.protocol.values import Allow, Deny
from metaharness.run.spec import RunSpec


def _scenario(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [
        {"calls": [{"op": "shell", "input": {"command": "echo a > a.txt"}},
                   {"op": "shell", "input": {"command": "echo b > b.txt"}}]},
        {"text": "done"}]}))
    return str(path)


def _shape(lines: list[bytes]) -> list[tuple]:
    """What must agree between transports: events, decisions, results (not ids or timings)."""
    out = []
    for raw in lines:
        e = json.loads(raw)
        key = [e["event"]]
        if e["event"] == "tool.decided":
            key += [e["decision"]["decision"], e["decided_by"]]
        if e["event"] == "command.result":
            key += [e["id"], e["outcome"]["result"]]
        if e["event"] == "tool.result":
            key += [e["is_error"], e["exit_code"]]
        out.append(tuple(key))
    return out


@pytest.mark.parametrize("subprocess", [False, True])
async def test_decide_calls_through_the_api(tmp_path, subprocess):
    spec = RunSpec(kind="oharness", script=_scenario(tmp_path), decisions="ask", cwd=str(tmp_path), prompt="go")
    run = await start_run(spec, subprocess=subprocess)
    seen = []
    async with run:
        async for envelope, event in run:
            seen.append(type(event))
            if isinstance(event, ToolRequested) and event.decision_required:
                verdict = Allow() if "a.txt" in event.input["command"] else Deny(reason="only a.txt")
                await run.decide(event.call_id, verdict)
    assert run.exit_code == 0
    assert seen[-1] is StreamClosed
    assert (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()
    results = [json.loads(l) for l in run.lines if b'"command.result"' in l]
    assert [r["id"] for r in results] == ["c-1", "c-2"]
    return _shape(run.lines)


async def test_both_transports_agree(tmp_path):
    shapes = []
    for subprocess in (False, True):
        work = tmp_path / str(subprocess)
        work.mkdir()
        shapes.append(await test_decide_calls_through_the_api(work, subprocess))
    assert shapes[0] == shapes[1]


def test_spec_to_argv_round_trips_through_the_cli():
    from metaharness.cli.run import run as run_command

    spec = RunSpec(kind="codex", prompt="p", decisions="ask", deny_only=True, required_commands=["steer", "replace"],
                   max_turns=3, policy_files=[], hermetic="on")
    argv = spec_to_argv(spec)
    ctx = run_command.make_context("run", argv[1:])
    parsed = {name: list(value) if isinstance(value, tuple) else value for name, value in ctx.params.items()}
    assert RunSpec(**parsed) == spec


@pytest.mark.parametrize("subprocess", [False, True])
async def test_commands_sent_together_open_one_turn(tmp_path, subprocess, monkeypatch):
    """`send_together`: an inject and a frame.set reach the run as one unit, so the turn the
    inject opens is already under the new frame — even with the command worker made to yield
    to the loop before every command (in process)."""
    import metaharness.run.queue as queue
    from metaharness.protocol.commands import FrameSet, MessageInject
    from metaharness.protocol.events import TurnEnded, TurnStarted

    from .conftest import make_frame

    monkeypatch.setattr(queue, "WORKER_SLICE_S", 0.0)
    monkeypatch.setattr(queue, "WORKER_YIELD_PASSES", 50)
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [
        {"text": "one"}, {"calls": [{"op": "shell", "input": {"command": "echo b > b.txt"}}]}, {"text": "two"}]}))
    frame = make_frame([{"op": "shell"}], state="s2", index=2)
    spec = RunSpec(kind="oharness", script=str(script), cwd=str(tmp_path), prompt="go", keep_open=True)
    run = await start_run(spec, subprocess=subprocess)
    digests = []
    async with run:
        async for envelope, event in run:
            if isinstance(event, TurnStarted):
                digests.append(event.frame_digest)
            if isinstance(event, TurnEnded):
                if len(digests) == 1:
                    ids = await run.send_together(MessageInject(id="", text="step two"), FrameSet(id="", frame=frame))
                    assert ids == ["c-1", "c-2"]
                else:
                    await run.close_input()
    assert run.exit_code == 0, run.lines
    assert digests == [None, frame["digest"]]
    decided = [json.loads(line) for line in run.lines if b'"tool.decided"' in line]
    assert [(d["decision"]["decision"], d["decided_by"]) for d in decided] == [("allow", "frame")]
    assert (tmp_path / "b.txt").exists()
