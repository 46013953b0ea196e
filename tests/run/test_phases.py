"""Every command gets exactly one `command.result` at every phase of a run, and a stop
(halt, SIGTERM, SIGINT) at every phase ends the run with `stream.closed` last, in
bounded time (the wire rule “reading stdin (steering lines)” rule 9, the wire rule “wind-up”, the wire rule “processing one decoded command”).

The harness is the real oharness child (scripted model). The phases are reached
through a thin subclass of the oharness adapter that calls a hook at each one:
before spawn (lines fed before `execute()`), during spawn (inside `start()`, before
the child exists), mid-turn (a call pending in ask mode), between turns (a
`--keep-open` run idle at its boundary), after child death (the child SIGKILLed, its
output not yet read to the end), during wind-up (inside `finish()`).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from metaharness.adapters.oharness import OHarnessAdapter
from metaharness.run.loop import Run
from metaharness.run.spec import RunSpec

PHASES = ["before_spawn", "during_spawn", "mid_turn", "between_turns", "after_death", "wind_up"]
BOUND_S = 40  # generous: the machine is shared; a hang never ends


def _line(command: str, cid: str, **payload) -> bytes:
    return json.dumps({"format": "metaharness.command/1", "id": cid, "command": command, **payload}).encode()


def every_command(tag: str) -> list[bytes]:
    """One line of each command type but halt, plus a malformed one and a blank one."""
    frame = {"bad": "frame"}  # refused MALFORMED: still exactly one answer
    return [
        _line("tool.decide", f"{tag}-decide", call_id="nope", decision={"decision": "allow"}),
        _line("frame.set", f"{tag}-frame", frame=frame),
        _line("message.inject", f"{tag}-inject", text="hello"),
        _line("steer", f"{tag}-steer", text="go left"),
        _line("permission.set", f"{tag}-posture", posture="plan"),
        _line("permission.set", f"{tag}-posture-bad", posture="no-such-mode"),
        _line("interrupt", f"{tag}-interrupt", reason="stop"),
        json.dumps({"format": "metaharness.command/1", "id": f"{tag}-malformed", "command": "halt"}).encode(),
        b"   ",
    ]


def ids_of(lines: list[bytes]) -> list[str]:
    return [json.loads(line)["id"] for line in lines if line.strip()]


def scenario(tmp_path) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [
        {"calls": [{"op": "shell", "input": {"command": "echo one"}}]},
        {"text": "SECOND-REQUEST"},
    ]}))
    return str(path)


class Phased(OHarnessAdapter):
    """The oharness adapter with a hook at each phase (the hook is async, gets the phase)."""

    hook = None

    async def start(self, ctx) -> None:
        await self.hook("during_spawn")
        await super().start(ctx)
        child, wait = self.child, self.child.wait

        async def wait_after_exit():  # the run's wait for the child's end (`Child.wait`), hooked
            await child.proc.wait()
            await self.hook("after_death_exit")
            return await wait()

        child.wait = wait_after_exit

    async def finish(self) -> None:
        await self.hook("wind_up")
        await super().finish()



async def run_at(tmp_path, phase: str, lines: list[bytes], *, keep_open: bool | None = None,
                 signal_instead: int | None = None):
    """Run once, feeding `lines` (or raising a signal) at `phase`; returns the events."""
    spec = RunSpec(kind="oharness", script=scenario(tmp_path), decisions="ask", cwd=str(tmp_path), prompt="go",
                   keep_open=phase == "between_turns" if keep_open is None else keep_open,
                   decision_timeout_ms=60_000 if phase in ("mid_turn", "after_death") else 400)
    events: list[dict] = []
    adapter = Phased(spec)
    fired = asyncio.Event()
    run_holder: dict[str, Run] = {}

    async def fire():
        if fired.is_set():
            return
        fired.set()
        run = run_holder["run"]
        if signal_instead is not None:
            await run.request_stop()
        else:
            for line in lines:
                run.feed_line(line)
        if phase == "between_turns":
            run.stdin_ended()

    async def hook(name: str) -> None:
        if name == phase:
            await fire()
            await asyncio.sleep(0.05)  # let the worker take the lines while this phase lasts
        if name == "after_death_exit" and phase == "after_death":
            await fire()
            await asyncio.sleep(0.05)

    adapter.hook = hook

    def write(raw: bytes) -> None:
        event = json.loads(raw)
        events.append(event)
        if phase == "mid_turn" and event["event"] == "tool.requested" and event["decision_required"]:
            asyncio.ensure_future(fire())
        if phase == "between_turns" and event["event"] == "turn.ended":
            asyncio.get_running_loop().call_later(0.2, lambda: asyncio.ensure_future(fire()))
        if phase == "after_death" and event["event"] == "tool.requested" and event["decision_required"]:
            os.kill(adapter.child.proc.pid, signal.SIGKILL)

    run = Run(spec, write, adapter=adapter, run_id="phase-run")
    run_holder["run"] = run
    if phase == "before_spawn":
        await fire()
    code = await asyncio.wait_for(run.execute(), BOUND_S)
    assert fired.is_set(), f"the phase {phase} was never reached"
    return events, code


def flat(outcome: dict) -> dict:
    """{"result": "refused", "code": …, "reason": …} or the ok outcome as written."""
    return {"result": "refused", **outcome["refused"]} if outcome["result"] == "refused" else outcome


def assert_complete(events: list[dict]) -> None:
    assert events[-1]["event"] == "stream.closed"
    assert [e["event"] for e in events].count("stream.closed") == 1
    assert events[-1]["events"] == len(events) - 1


@pytest.mark.parametrize("phase", PHASES)
async def test_every_command_answered_once_at_every_phase(tmp_path, phase):
    lines = every_command(phase)
    events, _code = await run_at(tmp_path, phase, lines)
    assert_complete(events)
    results = [e for e in events if e["event"] == "command.result"]
    assert sorted(r["id"] for r in results) == sorted(ids_of(lines))  # one each, none lost, none extra
    by_id = {r["id"]: flat(r["outcome"]) for r in results}
    assert by_id[f"{phase}-malformed"]["code"] == "MALFORMED"
    assert by_id[f"{phase}-frame"]["code"] == "MALFORMED"
    assert by_id[f"{phase}-posture-bad"]["code"] == "UNSUPPORTED_CONTROL"
    if phase == "after_death":
        # the child is gone, its output not yet read to the end: nothing can reach it
        for cid in (f"{phase}-posture", f"{phase}-interrupt"):
            assert by_id[cid] == {"result": "refused", "code": "TOO_LATE",
                                  "reason": "the harness has exited, so nothing can reach it"}, cid
    if phase == "wind_up":
        # the wire rule “reading stdin (steering lines)” rule 9: everything read during wind-up is TOO_LATE (MALFORMED stays MALFORMED).
        for cid in (f"{phase}-decide", f"{phase}-inject", f"{phase}-posture", f"{phase}-interrupt", f"{phase}-steer"):
            assert by_id[cid] == {"result": "refused", "code": "TOO_LATE", "reason": "the run is ending"}, cid
    if phase in ("before_spawn", "during_spawn"):
        # held until the child exists, then carried
        assert by_id[f"{phase}-posture"] == {"result": "ok", "applies_at": None}
        assert by_id[f"{phase}-steer"]["code"] == "TOO_LATE"  # no turn is running
        assert by_id[f"{phase}-interrupt"]["result"] == "ok"
    if phase == "mid_turn":
        assert by_id[f"{phase}-interrupt"] == {"result": "ok", "applies_at": None}


@pytest.mark.parametrize("phase", PHASES)
async def test_halt_at_every_phase_ends_the_run(tmp_path, phase):
    lines = [_line("halt", f"{phase}-halt", reason="stop"), _line("message.inject", f"{phase}-after", text="x")]
    events, code = await run_at(tmp_path, phase, lines)
    assert_complete(events)
    results = [e for e in events if e["event"] == "command.result"]
    assert sorted(r["id"] for r in results) == sorted(ids_of(lines))
    halt = next(r for r in results if r["id"] == f"{phase}-halt")
    if phase == "wind_up":
        assert flat(halt["outcome"])["code"] == "TOO_LATE"
    else:
        assert halt["outcome"] == {"result": "ok", "applies_at": None}
        assert events[-2] is halt  # immediately before stream.closed
        assert events[-1]["reason"] == "steer-halt"
    if phase == "mid_turn":  # the halt stopped the turn on its pending call
        assert not any(e["event"] == "text" and e["text"] == "SECOND-REQUEST" for e in events)


@pytest.mark.parametrize("phase", PHASES)
async def test_stop_request_at_every_phase_ends_the_run(tmp_path, phase):
    """What SIGINT/SIGTERM do (host.py routes both to request_stop)."""
    events, _code = await run_at(tmp_path, phase, [], signal_instead=signal.SIGTERM)
    assert_complete(events)
    if phase in ("before_spawn", "during_spawn"):
        assert not any(e["event"] == "session.started" for e in events)  # nothing was spawned, or it was stopped


async def test_interrupt_on_a_pending_call_stops_the_turn_before_another_model_request(tmp_path):
    """The abandonment deny and the interrupt reach oharness as one: no further model request."""
    for attempt in range(5):
        work = tmp_path / str(attempt)
        work.mkdir()
        events, code = await run_at(work, "mid_turn", [_line("interrupt", "i", reason="stop")], keep_open=False)
        assert_complete(events)
        assert not any(e["event"] == "text" and e["text"] == "SECOND-REQUEST" for e in events), events
        ended = [e for e in events if e["event"] == "turn.ended"]
        assert ended and ended[0]["stop_reason"] == "interrupted"
        names = [e["event"] for e in events]
        result = next(i for i, e in enumerate(events) if e["event"] == "command.result" and e["id"] == "i")
        assert result < names.index("turn.ended")  # the wire rule “calls, decisions and commands” rule 8
