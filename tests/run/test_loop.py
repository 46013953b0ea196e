"""The run loop against a fake harness: protocol.md §§ 4–7 and the § 14 checklist items
about commands, decisions, deadlines, census, abandonment, run start and stream end."""

from __future__ import annotations

import asyncio
import json

import msgspec
import pytest

from metaharness.adapters.oharness import OHarnessAdapter
from metaharness.protocol.descriptor import CommandRefused
from metaharness.protocol.values import Abstain, Allow, Deny
from metaharness.run.spec import RunSpec

from .conftest import make_frame
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


# --- frame mode -----------------------------------------------------------------


async def test_frame_mode_without_frame_abstains_once_warned():
    events, code, adapter, *_ = await drive(spec(), turns=[Turn([READ, BASH])])
    assert code == 0
    assert_complete(events)
    warnings = [e for e in by(events, "warning") if e["code"] == "NO_FRAME_IN_FORCE"]
    assert len(warnings) == 1
    assert events.index(warnings[0]) < events.index(by(events, "tool.requested")[0])
    for requested in by(events, "tool.requested"):
        assert requested["seam"] == "none" and requested["decision_required"] is False
    for decided in by(events, "tool.decided"):
        assert decided["decision"] == {"decision": "abstain"}
        assert decided["decided_by"] == "adapter" and decided["seam"] == "none"
    assert by(events, "session.ended")[0]["census"]["abstained"] == 2
    census_matches(events)


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


async def test_uncovered_tool_denied_with_warning_first(frame_file):
    path = frame_file([{"op": "shell"}])
    events, *_ = await drive(spec(frame=path), turns=[Turn([Call("teleport", {})])])
    warning = [e for e in by(events, "warning") if e["code"] == "UNCOVERED_TOOL"][0]
    requested = by(events, "tool.requested")[0]
    assert events.index(warning) < events.index(requested)
    assert "operations" not in requested
    assert by(events, "tool.decided")[0]["decision"]["reason"] == (
        "teleport is outside the operation vocabulary this step was framed with, so this step does not admit it")


async def test_mcp_admitted_exactly(frame_file):
    path = frame_file([{"op": "mcp.call", "server": "github", "tool": "get_issue"}])
    events, *_ = await drive(spec(frame=path), turns=[Turn([
        Call("mcp__github__get_issue", {}), Call("mcp__github__create_issue", {}), Call("mcp__gitlab__get_issue", {})])])
    verdicts = [d["decision"]["decision"] for d in by(events, "tool.decided")]
    assert verdicts == ["allow", "deny", "deny"]


async def test_subject_scope(frame_file):
    path = frame_file([{"op": "file.read"}, {"op": "file.write"}], subjects=[
        {"subjects": ["file:src/**"], "operations": [{"op": "file.read"}, {"op": "file.write"}]},
        {"subjects": ["file:**"], "operations": [{"op": "file.read"}]},
    ])
    events, *_ = await drive(spec(frame=path, cwd="/w"), turns=[Turn([
        Call("write", {"path": "src/a/b.py", "content": ""}),
        Call("write", {"path": "docs/x.md", "content": ""}),
        Call("read", {"path": "docs/x.md"}),
        Call("write", {"path": "/w/src/../README", "content": ""}),
    ])])
    requested = by(events, "tool.requested")
    assert requested[0]["subjects"] == ["file:src/a/b.py"]
    assert requested[3]["subjects"] == ["file:README"]
    verdicts = [d["decision"]["decision"] for d in by(events, "tool.decided")]
    assert verdicts == ["allow", "deny", "allow", "deny"]
    assert "file:docs/x.md" in by(events, "tool.decided")[1]["decision"]["reason"]


# --- observe and deny-only ---------------------------------------------------------


async def test_observe_allows_and_records():
    events, code, *_ = await drive(spec(decisions="observe"), turns=[Turn([READ, BASH])])
    assert [d["decided_by"] for d in by(events, "tool.decided")] == ["observe", "observe"]
    assert all(d["decision"] == {"decision": "allow"} for d in by(events, "tool.decided"))
    assert by(events, "session.started")[0]["hermetic"]["deny_only"] is False


async def test_observe_with_frame_refused_at_start(frame_file):
    events, code, adapter, _, stderr = await drive(spec(decisions="observe", frame=frame_file([])),
                                                   turns=[Turn([READ])])
    assert code == 2
    assert names(events) == ["stream.closed"] and events[0]["events"] == 0 and events[0]["reason"] == "error"
    assert "ObserveWithFrame" in stderr[0]
    assert adapter.texts == []  # nothing spawned, no turn


async def test_deny_only_turns_allows_into_abstain(frame_file):
    path = frame_file([{"op": "file.read"}])
    events, *_ = await drive(spec(frame=path, deny_only=True), turns=[Turn([READ, BASH])])
    decisions = [d["decision"]["decision"] for d in by(events, "tool.decided")]
    assert decisions == ["abstain", "deny"]
    assert by(events, "tool.decided")[0]["decided_by"] == "frame"
    assert by(events, "session.started")[0]["hermetic"]["deny_only"] is True
    census_matches(events)


# --- ask mode ----------------------------------------------------------------------


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


async def test_tool_decide_outcomes_unknown_too_late_malformed():
    sent = []

    def embedder(run, event):
        if event["event"] == "tool.requested" and not sent:
            sent.append(1)
            run.feed_line(cmd("tool.decide", id="blank", call_id=event["call_id"],
                              decision={"decision": "deny", "reason": "  "}))
            run.feed_line(cmd("tool.decide", id="unknown", call_id="nope", decision={"decision": "allow"}))
            run.feed_line(cmd("tool.decide", id="first", call_id=event["call_id"], decision={"decision": "allow"}))
            run.feed_line(cmd("tool.decide", id="again", call_id=event["call_id"], decision={"decision": "allow"}))
            run.feed_line(b'{"format":"metaharness.command/1","id":"flat","command":"tool.decide","call_id":"x","decision":"allow"}')

    events, *_ = await drive(spec(decisions="ask"), turns=[Turn([READ])], on_event=embedder)
    results = {e["id"]: e["outcome"] for e in by(events, "command.result")}
    assert results["blank"]["refused"]["code"] == "MALFORMED"
    assert results["unknown"]["refused"] == {"code": "UNKNOWN_CALL", "reason": "nope does not correlate to an open request"}
    assert results["first"] == {"result": "ok", "applies_at": None}
    assert results["again"]["refused"]["code"] == "TOO_LATE"
    assert results["flat"]["refused"] == {"code": "MALFORMED", "reason":
        'malformed tool.decide: invalid type: string "allow", expected internally tagged enum Decision'}
    assert [e["id"] for e in by(events, "command.result")] == ["blank", "unknown", "first", "again", "flat"]


async def test_turn_end_abandons_pending_then_too_late():
    adapter_holder = {}

    def embedder(run, event):
        if event["event"] == "tool.requested":
            # end the turn under the pending call, as a harness that gave up would
            asyncio.get_running_loop().call_soon(run.turn_ended, "end_turn")
        if event["event"] == "warning" and event["code"] == "PENDING_CALL_ABANDONED":
            run.feed_line(cmd("tool.decide", id="late", call_id="call_1", decision={"decision": "allow"}))

    events, code, adapter, *_ = await drive(spec(decisions="ask"), turns=[Turn([BASH])], on_event=embedder)
    order = names(events)
    i = order.index("turn.ended")
    assert order[i + 1] == "tool.decided" and order[i + 2] == "warning"
    decided = by(events, "tool.decided")[0]
    assert decided["decided_by"] == "adapter"
    assert decided["decision"]["reason"] == "the turn ended before this call was decided, so nothing ran"
    assert by(events, "warning")[-1]["message"] == "call_1 was never decided by the embedder"
    late = [e for e in by(events, "command.result") if e["id"] == "late"][0]
    assert late["outcome"]["refused"]["code"] == "TOO_LATE"


async def test_same_call_id_identical_and_mutated():
    turns = [Turn([Call("read", {"path": "a"}, call_id="x"), Call("read", {"path": "a"}, call_id="x"),
                   Call("read", {"path": "b"}, call_id="x")])]
    events, *_ = await drive(spec(decisions="observe"), turns=turns)
    assert len(by(events, "tool.requested")) == 3
    decided = by(events, "tool.decided")
    assert len(decided) == 2
    assert decided[1]["decided_by"] == "adapter"
    assert decided[1]["decision"]["reason"] == "this call id was already presented with a different input"
    mutated = [e for e in by(events, "warning") if e["code"] == "REQUEST_MUTATED"]
    assert len(mutated) == 1
    assert events.index(mutated[0]) < events.index(decided[1])
    census_matches(events)


async def test_replace_refused_under_deny_only_and_call_stays_pending():
    def embedder(run, event):
        if event["event"] == "tool.requested":
            run.feed_line(cmd("tool.decide", id="r", call_id=event["call_id"],
                              decision={"decision": "replace", "input": {"command": "true"}}))
            run.feed_line(cmd("tool.decide", id="d", call_id=event["call_id"],
                              decision={"decision": "deny", "reason": "no shell"}))

    events, *_ = await drive(spec(decisions="ask", deny_only=True), turns=[Turn([BASH])], on_event=embedder)
    results = {e["id"]: e["outcome"] for e in by(events, "command.result")}
    assert results["r"]["refused"] == {"code": "UNSUPPORTED_CONTROL",
                                       "reason": "this run is deny-only and replace would grant; answer deny or abstain"}
    assert results["d"] == {"result": "ok", "applies_at": None}


async def test_replace_never_becomes_allow_where_undeliverable():
    descriptor = msgspec.structs.replace(OHarnessAdapter.descriptor(), replace="unverified")

    def embedder(run, event):
        if event["event"] == "tool.requested":
            run.feed_line(cmd("tool.decide", id="r", call_id=event["call_id"],
                              decision={"decision": "replace", "input": {"command": "true"}}))

    events, code, adapter, *_ = await drive(spec(decisions="ask", decision_timeout_ms=100), turns=[Turn([BASH])],
                                            on_event=embedder, descriptor=descriptor)
    assert by(events, "command.result")[0]["outcome"]["refused"]["code"] == "UNSUPPORTED_CONTROL"
    assert by(events, "tool.decided")[0]["decided_by"] == "deadline"
    assert adapter.ran == []


# --- commands --------------------------------------------------------------------


async def test_frame_set_at_next_step_boundary(frame_file):
    new = make_frame([{"op": "shell"}], state="s2", index=2)
    seen = []

    def embedder(run, event):
        if event["event"] == "tool.decided" and not seen:
            seen.append(1)
            run.feed_line(cmd("frame.set", id="f1", frame=new))

    path = frame_file([{"op": "file.read"}])
    events, code, adapter, *_ = await drive(spec(frame=path), turns=[Turn([READ, BASH]), Turn([BASH])],
                                            on_event=embedder)
    result = [e for e in by(events, "command.result") if e["id"] == "f1"][0]
    assert result["outcome"] == {"result": "ok", "applies_at": "next step"}
    decided = by(events, "tool.decided")
    assert decided[1]["decision"]["decision"] == "deny"  # still the old frame in turn 1
    assert decided[2]["decision"]["decision"] == "allow"  # the new frame in turn 2
    rest = [e for e in events if e["event"] != "command.result"]
    order = names(rest)
    t1_end = order.index("turn.ended")
    assert order[t1_end + 1: t1_end + 4] == ["step.entered", "injection", "turn.started"]
    assert rest[t1_end + 3]["frame_digest"] == new["digest"]
    assert rest[t1_end + 2]["origin"] == "frame"
    assert adapter.texts[1] == rest[t1_end + 2]["text"]


async def test_frame_set_same_step_is_next_turn_and_superseded_warns(frame_file):
    path = frame_file([{"op": "file.read"}])
    a = make_frame([{"op": "shell"}])
    b = make_frame([{"op": "shell"}, {"op": "file.read"}])
    seen = []

    def embedder(run, event):
        if event["event"] == "tool.decided" and not seen:
            seen.append(1)
            run.feed_line(cmd("frame.set", id="fa", frame=a))
            run.feed_line(cmd("frame.set", id="fb", frame=b))

    events, *_ = await drive(spec(frame=path), turns=[Turn([READ]), Turn([])], on_event=embedder)
    results = {e["id"]: e["outcome"] for e in by(events, "command.result")}
    assert results["fa"]["applies_at"] == "next turn"
    not_applied = [e for e in by(events, "warning") if e["code"] == "COMMAND_NOT_APPLIED"]
    assert len(not_applied) == 1 and "fa" in not_applied[0]["message"]
    assert "step.entered" not in names(events)[3:]


async def test_stale_frame_set_is_malformed_before_capability():
    frame = make_frame([{"op": "shell"}])
    frame["operations"] = [{"op": "file.write"}]
    seen = []

    def embedder(run, event):
        if event["event"] == "session.started" and not seen:
            seen.append(1)
            run.feed_line(cmd("frame.set", id="stale", frame=frame))

    events, *_ = await drive(spec(decisions="observe"), turns=[Turn([])], on_event=embedder)
    assert by(events, "command.result")[0]["outcome"]["refused"]["code"] == "MALFORMED"


async def test_message_inject_and_not_applied_at_wind_up():
    seen = []

    def embedder(run, event):
        if event["event"] == "turn.started" and not seen:
            seen.append(1)
            run.feed_line(cmd("message.inject", id="m1", text="remember the handoff"))

    events, code, adapter, *_ = await drive(spec(), turns=[Turn([]), Turn([])], on_event=embedder)
    assert [e for e in by(events, "command.result") if e["id"] == "m1"][0]["outcome"] == {
        "result": "ok", "applies_at": "next turn"}
    injections = [e for e in by(events, "injection") if e["origin"] == "message.inject"]
    assert [i["text"] for i in injections] == ["remember the handoff"]
    assert adapter.texts[1] == "remember the handoff"
    assert len(by(events, "turn.started")) == 2


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
    assert "steer:go left" in adapter.controls
    assert "steer:x" not in adapter.controls


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


# --- run start -------------------------------------------------------------------


async def test_an_option_of_another_adapter_is_refused_at_start():
    """The run names no vendor: the refusal comes from the option's owner and the descriptor."""
    events, code, adapter, _, stderr = await drive(spec(codex_replace_relay=True), turns=[Turn([])])
    assert code == 2 and adapter.texts == []
    assert stderr == ["metaharness: --codex-replace-relay is a codex option and this run is oharness"]
    assert [e["event"] for e in events] == ["stream.closed"]


async def test_required_command_refused_at_start():
    descriptor = OHarnessAdapter.descriptor()
    descriptor = msgspec.structs.replace(descriptor, commands=dict(descriptor.commands, steer=CommandRefused()),
                                         replace="absent")
    events, code, adapter, _, stderr = await drive(
        spec(required_commands=["replace", "steer"]), turns=[Turn([])], descriptor=descriptor)
    assert code == 2
    assert [(e["event"], e.get("id")) for e in events] == [
        ("command.result", "start/steer"), ("command.result", "start/replace"), ("stream.closed", None)]
    assert events[0]["outcome"]["refused"] == {"code": "UNSUPPORTED_CONTROL", "reason":
        "this run's configuration needs steer and the oharness adapter refuses it"}
    assert events[1]["outcome"]["refused"]["reason"] == (
        "this run's configuration needs replace and the oharness adapter cannot deliver it")
    assert events[2]["events"] == 2 and events[2]["process"] == {"kind": "unknown"}
    assert adapter.texts == []


@pytest.mark.parametrize("content,detail", [
    (b"not json", "FrameInvalid"),
    (b"[]", "FrameInvalid"),
    (None, "FrameUnreadable"),
])
async def test_frame_refusals_at_start(tmp_path, content, detail):
    path = tmp_path / "f.json"
    if content is not None:
        path.write_bytes(content)
    events, code, adapter, _, stderr = await drive(spec(frame=str(path)), turns=[Turn([])])
    assert code == 2 and names(events) == ["stream.closed"] and events[0]["events"] == 0
    assert detail in stderr[0]


async def test_frame_conflict(frame_file):
    events, code, _, _, stderr = await drive(spec(frame=frame_file([]), library_frame=make_frame([])),
                                             turns=[Turn([])])
    assert code == 2 and "FrameConflict" in stderr[0]


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
    assert [e for e in by(events, "warning") if e["code"] == "COMMAND_NOT_APPLIED"]


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
    assert len(by(events, "turn.started")) == 1 and "finish" in adapter.controls


async def test_crashed_harness_still_closes_stream():
    events, code, *_ = await drive(spec(keep_open=True), turns=[Turn([])], crash_after_turn=1, end_session=False)
    assert code == 3
    assert events[-1]["reason"] == "error"
    assert [e for e in by(events, "warning") if e["code"] == "NO_TERMINAL_RECORD"]
    assert_complete(events)


async def test_held_vendor_lines_written_after_session_started():
    class Late(FakeAdapter):
        async def start(self, ctx):
            from metaharness.protocol.events import SessionStarted, WarningEvent
            from metaharness.protocol.values import HermeticAttestation, TranscriptRef

            self._ctx = ctx
            ctx.emit(WarningEvent(code="VENDOR_WARNING", message="early"))
            ctx.session_started(SessionStarted(adapter="oharness", transcript=TranscriptRef(),
                                               hermetic=HermeticAttestation()))

    s = spec()
    events, *_ = await drive(s, Late(s, [Turn([])]))
    assert names(events)[:2] == ["session.started", "warning"]


async def test_interrupt_result_precedes_turn_end_even_when_the_harness_reports_it_first():
    class EagerEnd(FakeAdapter):
        async def interrupt(self):
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


# --- a result for a call nobody decided (issue 19) -----------------------------------------


async def test_a_result_for_an_undecided_call_is_reported_as_such_and_never_as_not_run():
    """Whatever let the call run, the stream says what metaharness knows: a warning naming
    the call, no decision, and no later "nothing ran" abandonment."""
    from metaharness.protocol.events import ToolResult

    class Forged(FakeAdapter):
        async def _play(self, turn):
            ctx = self._ctx
            ctx.turn_started()
            from metaharness.adapters.base import PresentedCall

            ctx.present(PresentedCall(call_id="forged", name="bash", input={"command": "id"}, seam="owned_tool"))
            await asyncio.sleep(0.01)
            ctx.emit(ToolResult(call_id="forged", is_error=False, content="ran", exit_code=0))
            ctx.turn_ended("end_turn")

    s = spec(decisions="ask")
    events, code, adapter, *_ = await drive(s, Forged(s, [Turn()]))
    assert_complete(events)
    kinds = [(e["event"], e.get("code")) for e in events]
    warning = kinds.index(("warning", "UNDECIDED_CALL_RAN"))
    assert kinds[warning + 1] == ("tool.result", None)
    assert "forged" in events[warning]["message"]
    assert not by(events, "tool.decided")  # nothing claims a decision, nor that nothing ran
    assert not any(e["event"] == "warning" and e["code"] == "PENDING_CALL_ABANDONED" for e in events)
    assert adapter.delivered == []
    assert by(events, "session.ended")[0]["census"]["allowed"] == 0
