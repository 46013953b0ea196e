"""A harness that died before the run noticed: the stream never claims what did not happen.

* A `tool.decide` for a call the dead child was waiting on is refused TOO_LATE ("the harness
  can no longer be reached: …"); the call is recorded as the wind-up's deny (decided by the
  adapter), never as the embedder's allow, and the census counts that deny.
* A write a turn needs (its frame, its input) that finds the child gone ends the run cleanly,
  with the reason on stderr and in NO_TERMINAL_RECORD, never a traceback.
* The `message.inject` that opened that turn is refused TOO_LATE with the same sentence, and no
  `injection` line claims its text reached the model; one accepted earlier (while a turn ran) is
  said not applied (COMMAND_NOT_APPLIED), and so is a `frame.set` whose turn never reached the
  child (no `step.entered` claims it).

The real oharness child (scripted model), SIGKILLed with a call pending; the decision is sent
once the child has exited and before its output was read to the end (the window the run has
not noticed yet) — or written the instant after the child was stopped and SIGKILLed, before it
exited (its pipe still open, the write succeeds, no one reads it). The rules themselves are driven through the run core with a fake clock too.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal

from metaharness.adapters.oharness import OHarnessAdapter
from metaharness.adapters.process.lifecycle import Child
from metaharness.protocol.commands import MessageInject, ToolDecide
from metaharness.protocol.events import SessionEnded
from metaharness.protocol.values import Allow, DecisionCensus
from metaharness.run.loop import Run
from metaharness.run.spec import RunSpec

from .conftest import make_frame
from .fake import CoreRun, FakeAdapter, Turn, cmd, drive

BOUND_S = 40
UNREACHABLE = "the harness can no longer be reached: "
ALLOW = {"decision": "allow"}


def scenario(tmp_path, turns: list[dict]) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": turns}))
    return str(path)


class DiesAt(OHarnessAdapter):
    """The oharness adapter; `on_exit` runs once the child has exited, before its output is
    read to the end (so before the run notices the death), for as long as it awaits."""

    on_exit = None

    async def start(self, ctx) -> None:
        await super().start(ctx)
        child, wait = self.child, self.child.wait

        async def wait_after_exit():  # the run's wait for the child's end (`Child.wait`), hooked
            await child.proc.wait()
            if self.on_exit is not None:
                await self.on_exit()
            return await wait()

        child.wait = wait_after_exit


def kill(adapter: OHarnessAdapter) -> None:
    os.killpg(adapter.child.proc.pid, signal.SIGKILL)


def census_of(decided: list[dict]) -> dict:
    """What the census must hold for these tool.decided lines."""
    words = {"allow": "allowed", "deny": "denied", "replace": "replaced", "abstain": "abstained"}
    counts = {key: 0 for key in words.values()}
    by_decider: dict[str, int] = {}
    for line in decided:
        counts[words[line["decision"]["decision"]]] += 1
        by_decider[line["decided_by"]] = by_decider.get(line["decided_by"], 0) + 1
    return {**counts, "by_decider": by_decider}


async def test_a_decision_sent_to_a_dead_oharness_is_too_late_and_the_call_is_the_wind_ups_deny(tmp_path):
    script = scenario(tmp_path, [{"calls": [{"op": "shell", "input": {"command": "echo ran > ran.txt"}}]},
                                 {"text": "done"}])
    spec = RunSpec(kind="oharness", script=script, decisions="ask", cwd=str(tmp_path), prompt="go",
                   decision_timeout_ms=60_000)
    adapter = DiesAt(spec)
    events: list[dict] = []
    stderr: list[str] = []
    holder: dict = {}

    async def decide_now() -> None:
        call_id = holder["call_id"]
        holder["run"].feed_command(ToolDecide(id="d1", call_id=call_id, decision=Allow()))
        await asyncio.sleep(0.1)  # the worker takes it while the death is still unnoticed
        holder["noticed"] = holder["run"].core.winding_up

    adapter.on_exit = decide_now

    def write(raw: bytes) -> None:
        event = json.loads(raw)
        events.append(event)
        if event["event"] == "tool.requested" and event["decision_required"]:
            holder["call_id"] = event["call_id"]
            kill(adapter)

    run = Run(spec, write, adapter=adapter, run_id="dead", stderr=stderr.append)
    holder["run"] = run
    code = await asyncio.wait_for(run.execute(), BOUND_S)

    assert holder["noticed"] is False  # the decision came in the window before the run noticed
    (result,) = [e for e in events if e["event"] == "command.result" and e["id"] == "d1"]
    refusal = result["outcome"]["refused"]
    assert refusal["code"] == "TOO_LATE" and refusal["reason"].startswith(UNREACHABLE), refusal
    (decided,) = [e for e in events if e["event"] == "tool.decided"]
    assert decided["call_id"] == holder["call_id"]
    assert decided["decided_by"] == "adapter" and decided["decision"]["decision"] == "deny"
    assert not (tmp_path / "ran.txt").exists()
    census = run.core.census.snapshot()
    assert (census.allowed, census.denied, census.by_decider) == (0, 1, {"adapter": 1})
    assert code == 3 and events[-1]["event"] == "stream.closed"


async def test_a_dead_oharness_at_a_step_boundary_ends_a_plain_run_cleanly(tmp_path):
    """The child dies between turns; the boundary's turn input finds it gone."""
    spec = RunSpec(kind="oharness", script=scenario(tmp_path, [{"text": "one"}, {"text": "two"}]),
                   decisions="ask", cwd=str(tmp_path), prompt="go", keep_open=True)
    adapter = DiesAt(spec)
    events: list[dict] = []
    stderr: list[str] = []
    holder: dict = {}

    async def next_turn_now() -> None:
        holder["run"].feed_command(MessageInject(id="i1", text="again"))
        await asyncio.sleep(0.3)  # the boundary opens the next turn while the death is unnoticed
        holder["run"].stdin_ended()

    adapter.on_exit = next_turn_now

    def write(raw: bytes) -> None:
        event = json.loads(raw)
        events.append(event)
        if event["event"] == "turn.ended":
            kill(adapter)

    run = Run(spec, write, adapter=adapter, run_id="dead", stderr=stderr.append)
    holder["run"] = run
    code = await asyncio.wait_for(run.execute(), BOUND_S)  # no BrokenPipeError out of execute()

    assert code == 3 and events[-1]["event"] == "stream.closed" and events[-1]["reason"] == "error"
    (warning,) = [e for e in events if e["event"] == "warning" and e["code"] == "NO_TERMINAL_RECORD"]
    assert UNREACHABLE in warning["message"], warning
    assert any(line.startswith(f"metaharness: {UNREACHABLE}") for line in stderr), stderr
    (result,) = [e for e in events if e["event"] == "command.result"]
    assert result["id"] == "i1" and result["outcome"]["refused"]["code"] == "TOO_LATE", result
    assert result["outcome"]["refused"]["reason"] == UNREACHABLE + warning["message"].split(UNREACHABLE)[1]
    assert not [e for e in events if e["event"] == "injection"]
    assert [e["event"] for e in events if e["event"] == "turn.started"] == ["turn.started"]


class KilledAsItIsTold(OHarnessAdapter):
    """The oharness adapter whose child is stopped and SIGKILLed the instant before a decision
    is written to it: the write lands in the pipe of a child that is dying and not yet gone
    (its threads still hold the pipe open), so it succeeds — and no one reads it."""

    killed_at_write = 0

    def deliver(self, call_id, decision, decided_by):
        if decided_by == "embedder":
            os.killpg(self.child.proc.pid, signal.SIGSTOP)
            kill(self)
            self.killed_at_write += 1
        super().deliver(call_id, decision, decided_by)


async def test_a_decision_written_as_the_child_is_killed_is_too_late(tmp_path):
    """The window the exit checks cannot see: SIGKILL sent, the child not yet exited (nor a
    zombie), its channel still open. The decision is refused TOO_LATE in every interleaving."""
    script = scenario(tmp_path, [{"calls": [{"op": "shell", "input": {"command": "echo ran > ran.txt"}}]},
                                 {"text": "done"}])
    spec = RunSpec(kind="oharness", script=script, decisions="ask", cwd=str(tmp_path), prompt="go",
                   decision_timeout_ms=60_000)
    adapter = KilledAsItIsTold(spec)
    events: list[dict] = []
    holder: dict = {}

    def write(raw: bytes) -> None:
        event = json.loads(raw)
        events.append(event)
        if event["event"] == "tool.requested" and event["decision_required"]:
            holder["run"].feed_command(ToolDecide(id="d1", call_id=event["call_id"], decision=Allow()))

    run = Run(spec, write, adapter=adapter, run_id="dying", stderr=lambda _line: None)
    holder["run"] = run
    code = await asyncio.wait_for(run.execute(), BOUND_S)

    assert adapter.killed_at_write == 1
    (result,) = [e for e in events if e["event"] == "command.result" and e["id"] == "d1"]
    assert result["outcome"]["refused"]["code"] == "TOO_LATE", result
    assert result["outcome"]["refused"]["reason"].startswith(UNREACHABLE), result
    (decided,) = [e for e in events if e["event"] == "tool.decided"]
    assert decided["decided_by"] == "adapter" and decided["decision"]["decision"] == "deny"
    census = run.core.census.snapshot()
    assert (census.allowed, census.denied, census.by_decider) == (0, 1, {"adapter": 1})
    assert not (tmp_path / "ran.txt").exists()
    assert code == 3 and events[-1]["event"] == "stream.closed"


# --- the rules, through the run core (a fake harness, a fake clock) -----------------------------


def core_with_a_pending_call() -> CoreRun:
    run = CoreRun(RunSpec(kind="oharness", prompt="go", decisions="ask"))
    run.start()
    run.turn(first=True)
    run.call("bash", {"command": "ls"}, "c1")
    return run


def assert_the_wind_ups_deny_and_its_census(run: CoreRun) -> None:
    """The harness then writes its terminal record: its census counts what the harness was told."""
    run.core.session_ended(SessionEnded(is_error=False, subtype="success", census=DecisionCensus()))
    (decided,) = run.by("tool.decided")
    assert decided["decided_by"] == "adapter" and decided["decision"]["decision"] == "deny"
    (ended,) = run.by("session.ended")
    assert {k: ended["census"][k] for k in ("allowed", "denied", "replaced", "abstained", "by_decider")} \
        == census_of([decided])


def test_a_write_that_fails_refuses_the_decision_and_leaves_the_call_pending():
    run = core_with_a_pending_call()

    def gone(call_id, decision, decided_by):
        raise BrokenPipeError("the harness's channel closed under the write")

    run.adapter.deliver = gone
    run.send(cmd("tool.decide", id="d1", call_id="c1", decision=ALLOW))
    assert run.result("d1") == {"result": "refused", "refused": {"code": "TOO_LATE", "reason": (
        "the harness can no longer be reached: the harness's channel closed under the write; "
        "this decision reached no one, and the call closes with the run's end")}}
    assert not run.by("tool.decided") and "c1" in run.core.calls.pending
    run.send(cmd("tool.decide", id="d2", call_id="c1", decision=ALLOW))  # still nobody to hear it
    assert run.result("d2")["refused"]["code"] == "TOO_LATE"
    assert_the_wind_ups_deny_and_its_census(run)


class _Unreachable:
    """An RPC channel that no longer reaches its peer."""

    def reaches_the_peer(self) -> bool:
        return False


def child_gone(adapter) -> None:
    """The adapter's child is known to be out of reach (`Child.alive` is False)."""
    adapter.child = Child()
    adapter.child.channel = _Unreachable()


def test_a_harness_known_to_have_exited_is_not_written_to():
    run = core_with_a_pending_call()
    child_gone(run.adapter)
    run.send(cmd("tool.decide", id="d1", call_id="c1", decision=ALLOW))
    refusal = run.result("d1")["refused"]
    assert refusal["code"] == "TOO_LATE" and refusal["reason"].startswith(UNREACHABLE + "it has exited")
    assert run.delivered == [] and not run.by("tool.decided")
    assert_the_wind_ups_deny_and_its_census(run)


def test_a_harness_that_went_away_under_the_write_is_not_claimed_to_have_heard_it():
    """A write to a dead peer need not fail; a harness found gone right after it did not hear it."""
    run = core_with_a_pending_call()
    deliver = run.adapter.deliver

    def dies_meanwhile(call_id, decision, decided_by):
        deliver(call_id, decision, decided_by)
        child_gone(run.adapter)

    run.adapter.deliver = dies_meanwhile
    run.send(cmd("tool.decide", id="d1", call_id="c1", decision=ALLOW))
    assert run.result("d1")["refused"]["code"] == "TOO_LATE"
    assert not run.by("tool.decided")
    run.adapter.deliver = deliver
    assert_the_wind_ups_deny_and_its_census(run)


def test_a_live_harness_still_hears_the_embedder():
    run = core_with_a_pending_call()
    run.send(cmd("tool.decide", id="d1", call_id="c1", decision=ALLOW))
    assert run.result("d1") == {"result": "ok", "applies_at": None}
    (decided,) = run.by("tool.decided")
    assert decided["decided_by"] == "embedder" and decided["decision"] == ALLOW


class GoneAtTheBoundary(FakeAdapter):
    async def begin_turn(self, text: str, frame=None) -> None:
        if self.texts:  # the second turn's input finds the child gone
            self._done.set()
            raise BrokenPipeError("the harness has exited")
        await super().begin_turn(text, frame)


async def test_a_turn_input_that_finds_the_child_gone_winds_up_with_the_reason():
    spec = RunSpec(kind="oharness", prompt="go", decisions="ask", keep_open=True)
    adapter = GoneAtTheBoundary(spec, [Turn(text="one"), Turn(text="two")], end_session=False)

    def on_event(run, event):
        if event["event"] == "turn.ended":
            run.feed_line(cmd("message.inject", id="i1", text="again"))

    events, code, _adapter, _lines, stderr = await drive(spec, adapter, on_event=on_event)
    assert code == 3 and events[-1]["event"] == "stream.closed"
    (warning,) = [e for e in events if e["event"] == "warning" and e["code"] == "NO_TERMINAL_RECORD"]
    assert warning["message"].endswith(UNREACHABLE + "the harness has exited")
    assert stderr == [f"metaharness: {UNREACHABLE}the harness has exited; the run ends"]
    assert "halt" in adapter.heard  # the run stopped what was left of it
    assert [e["outcome"] for e in events if e["event"] == "command.result"] == [
        {"result": "refused", "refused": {"code": "TOO_LATE", "reason": UNREACHABLE + "the harness has exited"}}]
    assert not [e for e in events if e["event"] == "injection"]


def test_an_inject_accepted_during_a_turn_whose_boundary_finds_the_child_gone_is_not_applied():
    run = CoreRun(RunSpec(kind="oharness", prompt="go", decisions="ask", keep_open=True))
    run.start()
    run.turn(first=True)
    run.send(cmd("message.inject", id="i1", text="later"))  # a turn runs: accepted for the next one
    assert run.result("i1") == {"result": "ok", "applies_at": "next turn"}
    run.core.turn_ended("end_turn")
    assert run.landed() == "opening"  # the core opened the next turn (`BeginTurn`)
    run.core.harness_unreachable("the harness has exited")  # the boundary's write found it gone
    run.send(cmd("message.inject", id="i2", text="and then"))  # read before the run noticed: owed
    run.end_session()
    run.wind_up()
    assert not run.by("injection")
    assert [e["message"] for e in run.by("warning") if e["code"] == "COMMAND_NOT_APPLIED"] == [
        f"message.inject i1 never took effect: {UNREACHABLE}the harness has exited"]
    assert run.result("i2") == {"result": "refused", "refused": {"code": "TOO_LATE", "reason": "the run is ending"}}


def test_a_refused_decision_keeps_the_call_in_deadline_order():
    run = core_with_a_pending_call()
    run.clock.advance(1)
    run.call("bash", {"command": "pwd"}, "c2")

    def gone(call_id, decision, decided_by):
        raise BrokenPipeError("gone")

    run.adapter.deliver = gone
    run.send(cmd("tool.decide", id="d1", call_id="c1", decision=ALLOW))
    assert run.result("d1")["refused"]["code"] == "TOO_LATE"
    assert list(run.core.calls.pending) == ["c1", "c2"]
    assert run.core.next_deadline() == run.core.calls.pending["c1"].deadline_at


def test_a_frame_set_at_an_idle_boundary_whose_turn_finds_the_child_gone_is_not_applied():
    """A `--keep-open` run idle at its boundary: the frame.set is accepted (it applies at the
    next step), its turn opens, and the write finds the child gone. Like an inject, it is said
    not applied; no `step.entered` or frame `injection` claims it; the frame before stays in force."""
    run = CoreRun(RunSpec(kind="oharness", prompt="go", decisions="ask", keep_open=True))
    run.start()
    run.turn(first=True)
    run.core.turn_ended("end_turn")
    assert run.landed() == "waiting"  # idle at the boundary
    run.send(cmd("frame.set", id="f1", frame=make_frame([{"op": "shell"}], state="s2")))
    assert run.result("f1") == {"result": "ok", "applies_at": "next step"}
    assert run.landed() == "opening"  # woken by it
    frame = run.begun().frame
    assert frame is not None and run.core.frame is frame  # taken for the turn
    run.core.harness_unreachable("the harness has exited")  # the frame's write found it gone
    run.end_session()
    run.wind_up()
    assert [e["message"] for e in run.by("warning") if e["code"] == "COMMAND_NOT_APPLIED"] == [
        f"frame.set f1 never took effect: {UNREACHABLE}the harness has exited"]
    assert not run.by("step.entered") and not run.by("injection")
    assert run.core.frame is None  # what the harness had: no frame


def test_a_frame_set_whose_turn_was_taken_and_never_written_is_not_applied_at_wind_up():
    """The same at the wind-up (the turn was taken, the run stopped before writing it)."""
    run = CoreRun(RunSpec(kind="oharness", prompt="go", decisions="ask", keep_open=True))
    run.start()
    run.turn(first=True)
    run.send(cmd("frame.set", id="f1", frame=make_frame([{"op": "shell"}], state="s1")))
    run.send(cmd("frame.set", id="f2", frame=make_frame([{"op": "shell"}], state="s1")))
    first = run.core.frame
    run.core.turn_ended("end_turn")
    assert run.landed() == "opening"  # the core opened the next turn (`BeginTurn`)
    run.end_session()
    run.wind_up()
    assert [e["message"] for e in run.by("warning") if e["code"] == "COMMAND_NOT_APPLIED"] == [
        "frame.set f1 was superseded by a later frame.set before its boundary",
        "frame.set f2 never took effect: the run is ending"]
    assert not run.by("step.entered") and not run.by("injection")
    assert run.core.frame is first
