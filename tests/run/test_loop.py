"""The run driver against a fake harness, end to end: commands through the queue and its
worker, deadlines on the loop's timer, controls carried to the child, turns waited for,
stops and the stream's end. The rules themselves are tested on the core, by plain calls
(tests/run/test_core.py)."""

from __future__ import annotations

import asyncio

from metaharness.protocol.values import Deny
from metaharness.run.loop import Run
from metaharness.run.spec import RunSpec

from .fake import Call, FakeAdapter, Turn, cmd, drive, names

READ = Call("read", {"path": "a.txt"})
WRITE = Call("write", {"path": "b.txt", "content": "x"})
BASH = Call("bash", {"command": "echo hi"})


def spec(**kw) -> RunSpec:
    kw.setdefault("kind", "oharness")
    kw.setdefault("prompt", "go")
    return RunSpec(**kw)


def by(events, name):
    return [e for e in events if e["event"] == name]


def assert_complete(events):
    assert events[-1]["event"] == "stream.closed"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["events"] == len(events) - 1
    assert {e["run"] for e in events} == {"test-run"}
    assert events[-1]["run_id"] == "test-run"
    assert names(events).count("stream.closed") == 1


def census_matches(events):
    decided = by(events, "tool.decided")
    census = by(events, "session.ended")[0]["census"]
    bucket = {"allow": "allowed", "deny": "denied", "replace": "replaced", "abstain": "abstained"}
    for key in bucket.values():
        assert census[key] == sum(1 for d in decided if bucket[d["decision"]["decision"]] == key)
    for seam in {d["seam"] for d in decided}:
        assert census["by_seam"][seam] == sum(1 for d in decided if d["seam"] == seam)
    for decider in {d["decided_by"] for d in decided}:
        assert census["by_decider"][decider] == sum(1 for d in decided if d["decided_by"] == decider)


# --- decisions, end to end -----------------------------------------------------------


async def test_launch_frame_boundary_lines_and_enforcement(frame_file):
    path = frame_file([{"op": "file.read"}, {"op": "search"}])
    events, code, adapter, *_ = await drive(spec(frame=path), turns=[Turn([READ, BASH, WRITE])])
    order = names(events)
    assert order[:4] == ["session.started", "step.entered", "injection", "turn.started"]
    frame_digest = events[1]["frame_digest"]
    assert events[3]["frame_digest"] == frame_digest
    assert events[2]["origin"] == "frame" and events[2]["text"].endswith(f"Frame {frame_digest}.")
    assert adapter.texts[0].startswith(events[2]["text"]) and adapter.texts[0].endswith("go")
    decided = {d["call_id"]: d for d in by(events, "tool.decided")}
    assert decided["call_1"]["decision"] == {"decision": "allow"}
    assert decided["call_1"]["decided_by"] == "frame"
    assert decided["call_2"]["decision"]["reason"] == (
        'this step admits ["file.read", "search"] and bash is shell, which it does not; '
        "a refusal is the answer, not an obstacle")
    assert decided["call_3"]["decision"]["decision"] == "deny"
    assert adapter.ran == ["call_1"]
    census_matches(events)


async def test_ask_mode_embedder_decides_in_any_order():
    def embedder(run, event):
        if event["event"] == "tool.requested":
            assert event["decision_required"] is True and event["deadline_ms"] == 55000
            verdict = {"decision": "allow"} if event["call_id"] == "call_1" else {"decision": "deny", "reason": "no"}
            run.feed_line(cmd("tool.decide", id=f"d-{event['call_id']}", call_id=event["call_id"], decision=verdict))

    events, code, adapter, *_ = await drive(spec(decisions="ask"), turns=[Turn([READ, BASH])], on_event=embedder)
    decided = by(events, "tool.decided")
    assert [d["decided_by"] for d in decided] == ["embedder", "embedder"]
    assert all(isinstance(d["latency_ms"], int) for d in decided)
    # tool.decided precedes its command.result ok
    first_result = [e for e in by(events, "command.result") if e["id"] == "d-call_1"][0]
    assert events.index(decided[0]) < events.index(first_result)
    assert first_result["outcome"] == {"result": "ok", "applies_at": None}
    assert adapter.ran == ["call_1"]
    census_matches(events)


async def test_ask_mode_deadline_denies():
    events, code, adapter, *_ = await drive(spec(decisions="ask", decision_timeout_ms=50), turns=[Turn([BASH])])
    decided = by(events, "tool.decided")[0]
    assert decided["decided_by"] == "deadline"
    assert decided["latency_ms"] >= 40
    assert decided["decision"]["reason"] == (
        "metaharness's own 50ms decision deadline expired before an answer arrived; it is strictly less than "
        "the vendor's 100ms timeout so the refusal is metaharness's and not an ambiguity")
    assert by(events, "tool.requested")[0]["deadline_ms"] == 50
    assert adapter.ran == []


async def test_one_timer_serves_every_deadline_even_after_an_early_answer():
    """call_1 is answered at once (its deadline passes with nothing to expire), call_2 waits
    for its own deadline: the timer is armed again for it."""
    def embedder(run, event):
        if event["event"] == "tool.requested" and event["call_id"] == "call_1":
            run.feed_line(cmd("tool.decide", id="d1", call_id="call_1", decision={"decision": "allow"}))

    events, code, adapter, *_ = await drive(spec(decisions="ask", decision_timeout_ms=150),
                                            turns=[Turn([READ, BASH])], on_event=embedder)
    first, second = by(events, "tool.decided")
    assert (first["call_id"], first["decided_by"]) == ("call_1", "embedder")
    assert (second["call_id"], second["decided_by"]) == ("call_2", "deadline")
    assert second["latency_ms"] >= 140
    assert adapter.ran == ["call_1"]
    census_matches(events)


# --- commands carried to the child ------------------------------------------------------


async def test_steer_too_late_between_turns_and_ok_in_turn():
    state = {}

    def embedder(run, event):
        if event["event"] == "session.started":
            run.feed_line(cmd("steer", id="early", text="x"))
        if event["event"] == "tool.requested" and "mid" not in state:
            state["mid"] = 1
            run.feed_line(cmd("steer", id="mid", text="go left"))
            run.feed_line(cmd("tool.decide", id="d", call_id=event["call_id"], decision={"decision": "allow"}))

    events, code, adapter, *_ = await drive(spec(decisions="ask"), turns=[Turn([READ])], on_event=embedder)
    results = {e["id"]: e["outcome"] for e in by(events, "command.result")}
    assert results["early"]["refused"] == {"code": "TOO_LATE", "reason":
        "no turn is running, so there is nothing to steer; message.inject reaches the next turn"}
    assert results["mid"] == {"result": "ok", "applies_at": None}
    assert "steer:go left" in adapter.heard
    assert "steer:x" not in adapter.heard


async def test_permission_set_known_and_unknown_word():
    def embedder(run, event):
        if event["event"] == "turn.started":
            run.feed_line(cmd("permission.set", id="p1", posture="plan"))
            run.feed_line(cmd("permission.set", id="p2", posture="yolo"))

    events, code, adapter, *_ = await drive(spec(), turns=[Turn([READ])], on_event=embedder)
    results = {e["id"]: e["outcome"] for e in by(events, "command.result")}
    assert results["p1"] == {"result": "ok", "applies_at": None}
    assert results["p2"]["refused"]["code"] == "UNSUPPORTED_CONTROL" and "yolo" in results["p2"]["refused"]["reason"]


async def test_interrupt_abandons_pending_before_result_before_turn_end():
    def embedder(run, event):
        if event["event"] == "tool.requested":
            run.feed_line(cmd("interrupt", id="i1", reason="enough"))

    events, code, adapter, *_ = await drive(spec(decisions="ask"), turns=[Turn([BASH])], on_event=embedder)
    order = [(e["event"], e.get("id")) for e in events]
    decided = order.index(("tool.decided", None))
    result = order.index(("command.result", "i1"))
    ended = order.index(("turn.ended", None))
    assert decided < result < ended
    assert by(events, "tool.decided")[0]["decision"]["reason"] == (
        "the run was interrupted before this call was decided, so nothing ran")
    # the deny reached the child before the control
    assert adapter.delivered[0][1] == Deny(reason="the run was interrupted before this call was decided, so nothing ran")
    assert adapter.ran == []


async def test_halt_result_immediately_before_stream_closed():
    def embedder(run, event):
        if event["event"] == "tool.requested":
            run.feed_line(cmd("halt", id="h1", reason="budget spent"))
            run.feed_line(cmd("message.inject", id="late", text="x"))

    events, code, adapter, *_ = await drive(spec(decisions="ask"), turns=[Turn([BASH], hold=True)],
                                            on_event=embedder)
    assert events[-2]["event"] == "command.result" and events[-2]["id"] == "h1"
    assert events[-1]["reason"] == "steer-halt"
    late = [e for e in by(events, "command.result") if e["id"] == "late"][0]
    assert late["outcome"]["refused"] == {"code": "TOO_LATE", "reason": "the run is ending"}
    assert by(events, "tool.decided")[0]["decision"]["reason"].startswith("the run was halted")
    assert code == 3  # no terminal record
    assert_complete(events)


async def test_malformed_lines_answered_and_reading_continues():
    def embedder(run, event):
        if event["event"] == "session.started":
            run.feed_line(b"not json")
            run.feed_line(b"   \t")
            run.feed_line(b"\xff\xfe")
            run.feed_line(b'{"format":"metaharness.command/1","id":"-","command":"halt","reason":"x"}')
            run.feed_line(cmd("permission.set", id="", posture="plan"))
            run.feed_line(cmd("permission.set", id="", posture="plan"))

    events, *_ = await drive(spec(), turns=[Turn([])], on_event=embedder)
    results = by(events, "command.result")
    assert [r["id"] for r in results] == ["-", "-", "-", "", ""]
    assert all(r["outcome"]["result"] == "refused" for r in results[:3])
    assert results[3]["outcome"]["result"] == "ok"


# --- turns, budget, keep-open, stream end -------------------------------------------


async def test_max_turns_budget():
    seen = []

    def embedder(run, event):
        if event["event"] == "turn.started" and not seen:
            seen.append(1)
            run.feed_line(cmd("message.inject", id="m", text="again"))

    events, code, adapter, *_ = await drive(spec(max_turns=1), turns=[Turn([]), Turn([])], on_event=embedder)
    assert events[-1]["reason"] == "budget"
    assert len(by(events, "turn.started")) == 1
    (result,) = [e["outcome"] for e in by(events, "command.result") if e["id"] == "m"]
    not_applied = [e for e in by(events, "warning") if e["code"] == "COMMAND_NOT_APPLIED"]
    # taken while the turn ran: accepted, then said not applied; taken once it ended: refused
    assert (result["result"] == "ok" and not_applied) or (
        result == {"result": "refused", "refused": {"code": "TOO_LATE", "reason": "the run is ending"}}
        and not not_applied), (result, not_applied)


async def test_keep_open_waits_then_stdin_end_ends():
    state = {"turns": 0}

    def embedder(run, event):
        if event["event"] == "turn.ended":
            state["turns"] += 1
            if state["turns"] == 1:
                run.feed_line(cmd("message.inject", id="m", text="next"))
            else:
                asyncio.get_running_loop().call_later(0.05, run.stdin_ended)

    events, code, *_ = await drive(spec(keep_open=True), turns=[Turn([]), Turn([])], on_event=embedder)
    assert len(by(events, "turn.started")) == 2
    assert code == 0 and events[-1]["reason"] == "completed"


async def test_without_keep_open_run_ends_after_prompt_turn():
    events, code, adapter, *_ = await drive(spec(), turns=[Turn([]), Turn([])])
    assert len(by(events, "turn.started")) == 1 and "finish" in adapter.heard


async def test_crashed_harness_still_closes_stream():
    events, code, *_ = await drive(spec(keep_open=True), turns=[Turn([])], crash_after_turn=1, end_session=False)
    assert code == 3
    assert events[-1]["reason"] == "error"
    assert [e for e in by(events, "warning") if e["code"] == "NO_TERMINAL_RECORD"]
    assert_complete(events)


async def test_interrupt_result_precedes_turn_end_even_when_the_harness_reports_it_first():
    class EagerEnd(FakeAdapter):
        async def interrupt(self, command):
            # Codex can send turn/completed before its reply to turn/interrupt.
            self._turn_task.cancel()
            await asyncio.sleep(0.05)
            assert self._turn_task.done()

    def embedder(run, event):
        if event["event"] == "tool.requested":
            run.feed_line(cmd("interrupt", id="i1", reason="enough"))

    s = spec(decisions="ask")
    events, *_ = await drive(s, EagerEnd(s, [Turn([BASH])]), on_event=embedder)
    order = [(e["event"], e.get("id")) for e in events]
    assert order.index(("command.result", "i1")) < order.index(("turn.ended", None))
    assert [e["stop_reason"] for e in by(events, "turn.ended")] == ["interrupted"]


async def test_an_interrupt_read_before_the_spawn_is_not_carried_to_a_turn_begun_after_it():
    """Behind a permission.set held until the child exists, an interrupt read before the spawn
    is still answered ok without reaching the child: no turn could be running when it was sent,
    so it must not stop the first turn."""
    import json

    class SlowStart(FakeAdapter):
        async def start(self, ctx) -> None:
            await asyncio.sleep(0.1)
            await super().start(ctx)

    s = RunSpec(kind="oharness", prompt="go", decisions="ask", keep_open=True)
    adapter = SlowStart(s, [Turn([])])
    lines: list[bytes] = []

    def write(line: bytes) -> None:
        lines.append(line)
        event = json.loads(line)
        if event["event"] == "turn.ended":
            run.feed_lines([cmd("halt", id="h", reason="done")])

    run = Run(s, write, adapter=adapter, run_id="test-run")
    run.feed_lines([cmd("permission.set", id="p", posture="plan"), cmd("interrupt", id="i", reason="stop")])
    await asyncio.wait_for(run.execute(), 20)
    events = [json.loads(line) for line in lines]
    assert events[-1]["event"] == "stream.closed"
    outcomes = {e["id"]: e["outcome"] for e in events if e["event"] == "command.result"}
    assert outcomes["p"]["result"] == "ok" and outcomes["i"] == {"result": "ok", "applies_at": None}
    assert "interrupt" not in adapter.heard and adapter.heard[0] == "posture:plan"  # never carried
    assert [e["stop_reason"] for e in events if e["event"] == "turn.ended"] != ["interrupted"]


async def test_an_inject_and_a_frame_set_sent_together_open_the_same_turn_however_the_worker_yields(monkeypatch):
    """A workflow's step boundary: an inject and a frame.set, queued back to back at a --keep-open
    boundary. The worker is made to yield to the loop before every command it takes (a slice of
    zero, and many passes at each yield): the wake from the inject must not open the next turn
    before the frame.set behind it has landed."""
    import metaharness.run.queue as queue
    from .conftest import make_frame

    monkeypatch.setattr(queue, "WORKER_SLICE_S", 0.0)
    monkeypatch.setattr(queue, "WORKER_YIELD_PASSES", 50)
    step_two = make_frame([{"op": "shell"}], state="s2", index=2)
    state = {"turns": 0}

    def embedder(run, event):
        if event["event"] == "turn.ended":
            state["turns"] += 1
            if state["turns"] == 1:
                run.feed_line(cmd("message.inject", id="m", text="step two"))
                run.feed_line(cmd("frame.set", id="f", frame=step_two))
            else:
                run.stdin_ended()

    events, code, adapter, *_ = await drive(spec(keep_open=True), turns=[Turn([]), Turn([BASH])], on_event=embedder)
    assert code == 0, events
    started = by(events, "turn.started")
    assert len(started) == 2
    assert started[1]["frame_digest"] == step_two["digest"]
    assert [d["decided_by"] for d in by(events, "tool.decided")] == ["frame"]
    assert by(events, "tool.decided")[0]["decision"] == {"decision": "allow"}
    assert adapter.texts[1].endswith("step two")


class _StopOrder(FakeAdapter):
    """Records, in order, what a stop tells the harness: `abandoning("stop")`, each decision, `halt`."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.log: list = []

    def abandoning(self, cause) -> None:
        self.log.append(cause)

    def deliver(self, call_id, decision, decided_by) -> None:
        self.log.append(("deliver", type(decision).__name__))
        super().deliver(call_id, decision, decided_by)

    async def halt(self):
        self.log.append("halt")
        await super().halt()


async def _stopped_with_a_call_pending(how: str) -> list:
    spec = RunSpec(kind="oharness", prompt="go", decisions="ask")
    adapter = _StopOrder(spec, [Turn([BASH])])

    def embedder(run, event):
        if event["event"] == "tool.requested":
            if how == "halt":
                run.feed_command(cmd_halt())
            else:
                asyncio.ensure_future(run.request_stop())

    await drive(spec, adapter, on_event=embedder)
    return adapter.log


def cmd_halt():
    from metaharness.protocol.decode import decode_command_line

    return decode_command_line(cmd("halt", id="h", reason="enough"))


async def test_a_stop_tells_the_harness_before_it_abandons_the_pending_call():
    # A harness that read the deny first could hand it to the model before the stop reached it
    # (Claude Code and Gemini CLI did, under load); `stopping` lets it stop first.
    for how in ("halt", "signal"):
        assert await _stopped_with_a_call_pending(how) == ["stop", ("deliver", "Deny"), "halt"], how


async def test_a_stop_with_no_call_pending_tells_the_harness_nothing_before_halt():
    spec = RunSpec(kind="oharness", prompt="go", decisions="ask", keep_open=True)
    adapter = _StopOrder(spec, [Turn([])])

    def embedder(run, event):
        if event["event"] == "turn.ended":
            asyncio.ensure_future(run.request_stop())

    await drive(spec, adapter, on_event=embedder)
    assert adapter.log == ["halt"]
