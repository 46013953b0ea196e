"""The run core's rules, driven by plain calls: no event loop, no child, a fake clock.

Decision modes, deadlines, the census, abandonment, the command pipeline's steps and
answers, boundaries, run-start refusals and wind-up (docs/reference/wire.md). The
driver's own part — waits, timers, phases, stops — is tests/run/test_loop.py's and
tests/run/test_phases.py's."""

from __future__ import annotations

import msgspec
import pytest

from metaharness.adapters.oharness import OHarnessAdapter
from metaharness.protocol.descriptor import CapabilityDescriptor, CommandRefused
from metaharness.protocol.values import Deny
from metaharness.run import commands
from metaharness.run.spec import RunSpec
from metaharness.run.start import RunRefused

from .conftest import make_frame
from .fake import CoreRun, cmd


def spec(**kw) -> RunSpec:
    kw.setdefault("kind", "oharness")
    kw.setdefault("prompt", "go")
    return RunSpec(**kw)


def started(descriptor: CapabilityDescriptor | None = None, **kw) -> CoreRun:
    run = CoreRun(spec(**kw), descriptor=descriptor)
    run.start()
    run.turn(first=True)
    return run


def decide(call_id: str, verdict: dict, id: str = "d") -> bytes:
    return cmd("tool.decide", id=id, call_id=call_id, decision=verdict)


def names(run: CoreRun) -> list[str]:
    return [e["event"] for e in run.events]


def census_matches(run: CoreRun) -> None:
    decided = run.by("tool.decided")
    census = run.core.census.snapshot()
    bucket = {"allow": "allowed", "deny": "denied", "replace": "replaced", "abstain": "abstained"}
    for word, key in bucket.items():
        assert getattr(census, key) == sum(1 for d in decided if d["decision"]["decision"] == word)
    for seam in {d["seam"] for d in decided}:
        assert census.by_seam[seam] == sum(1 for d in decided if d["seam"] == seam)
    for decider in {d["decided_by"] for d in decided}:
        assert census.by_decider[decider] == sum(1 for d in decided if d["decided_by"] == decider)


ALLOW = {"decision": "allow"}


# --- the decision modes ------------------------------------------------------------------


def test_frame_mode_without_a_frame_abstains_once_warned():
    run = started()
    run.call("read", {"path": "a.txt"}, "c1")
    run.call("bash", {"command": "echo hi"}, "c2")
    warnings = [e for e in run.by("warning") if e["code"] == "NO_FRAME_IN_FORCE"]
    assert len(warnings) == 1
    assert names(run).index("warning") < names(run).index("tool.requested")
    assert all(r["seam"] == "none" and r["decision_required"] is False for r in run.by("tool.requested"))
    assert all(d["decision"] == {"decision": "abstain"} and (d["decided_by"], d["seam"]) == ("adapter", "none")
               for d in run.by("tool.decided"))
    assert [d[2] for d in run.delivered] == ["adapter", "adapter"]
    census_matches(run)


def test_a_launch_frame_opens_the_first_turn_and_decides(frame_file):
    run = started(frame=frame_file([{"op": "file.read"}, {"op": "search"}]))
    assert names(run) == ["session.started", "step.entered", "injection", "turn.started"]
    step, injection, turn = run.events[1:]
    assert turn["frame_digest"] == step["frame_digest"] and injection["origin"] == "frame"
    assert injection["text"].endswith(f"Frame {step['frame_digest']}.")
    assert run.turn_inputs == [injection["text"] + "\n\ngo"]
    assert run.frames_set == [run.core.frame]  # the harness is handed the frame in force
    run.call("read", {"path": "a.txt"}, "c1")
    run.call("bash", {"command": "echo hi"}, "c2")
    first, second = run.by("tool.decided")
    assert (first["decision"], first["decided_by"]) == (ALLOW, "frame")
    assert second["decision"]["reason"] == (
        'this step admits ["file.read", "search"] and bash is shell, which it does not; '
        "a refusal is the answer, not an obstacle")
    census_matches(run)


def test_an_uncovered_tool_is_denied_with_its_warning_first(frame_file):
    run = started(frame=frame_file([{"op": "shell"}]))
    run.call("teleport", {}, "c1")
    kinds = names(run)
    assert kinds.index("warning") < kinds.index("tool.requested")
    assert "operations" not in run.by("tool.requested")[0]
    assert run.by("tool.decided")[0]["decision"]["reason"] == (
        "teleport is outside the operation vocabulary this step was framed with, so this step does not admit it")


def test_mcp_is_admitted_exactly(frame_file):
    run = started(frame=frame_file([{"op": "mcp.call", "server": "github", "tool": "get_issue"}]))
    for i, name in enumerate(["mcp__github__get_issue", "mcp__github__create_issue", "mcp__gitlab__get_issue"]):
        run.call(name, {}, f"c{i}")
    assert [d["decision"]["decision"] for d in run.by("tool.decided")] == ["allow", "deny", "deny"]


def test_the_subject_scope(frame_file):
    run = started(cwd="/w", frame=frame_file([{"op": "file.read"}, {"op": "file.write"}], subjects=[
        {"subjects": ["file:src/**"], "operations": [{"op": "file.read"}, {"op": "file.write"}]},
        {"subjects": ["file:**"], "operations": [{"op": "file.read"}]},
    ]))
    run.call("write", {"path": "src/a/b.py", "content": ""}, "c1")
    run.call("write", {"path": "docs/x.md", "content": ""}, "c2")
    run.call("read", {"path": "docs/x.md"}, "c3")
    run.call("write", {"path": "/w/src/../README", "content": ""}, "c4")
    requested = run.by("tool.requested")
    assert requested[0]["subjects"] == ["file:src/a/b.py"] and requested[3]["subjects"] == ["file:README"]
    assert [d["decision"]["decision"] for d in run.by("tool.decided")] == ["allow", "deny", "allow", "deny"]
    assert "file:docs/x.md" in run.by("tool.decided")[1]["decision"]["reason"]


def test_observe_allows_and_records():
    run = started(decisions="observe")
    run.call("read", {"path": "a"}, "c1")
    run.call("bash", {"command": "x"}, "c2")
    assert [(d["decision"], d["decided_by"]) for d in run.by("tool.decided")] == [(ALLOW, "observe")] * 2
    assert run.by("session.started")[0]["hermetic"]["deny_only"] is False


def test_deny_only_delivers_an_allow_as_abstain(frame_file):
    run = started(frame=frame_file([{"op": "file.read"}]), deny_only=True)
    run.call("read", {"path": "a"}, "c1")
    run.call("bash", {"command": "x"}, "c2")
    assert [d["decision"]["decision"] for d in run.by("tool.decided")] == ["abstain", "deny"]
    assert run.delivered[0][1].__struct_config__.tag == "abstain"  # the child hears abstain too
    assert run.by("session.started")[0]["hermetic"]["deny_only"] is True
    census_matches(run)


# --- ask mode and deadlines -------------------------------------------------------------------


def test_ask_the_embedder_decides_in_any_order_and_latency_is_the_clocks():
    run = started(decisions="ask")
    run.call("read", {"path": "a"}, "c1")
    run.call("bash", {"command": "x"}, "c2")
    assert all(r["decision_required"] and r["deadline_ms"] == 55000 for r in run.by("tool.requested"))
    assert run.delivered == []
    run.clock.advance(0.25)
    assert run.send(decide("c2", {"decision": "deny", "reason": "no"}, id="d2")) is False
    run.clock.advance(0.5)
    run.send(decide("c1", ALLOW, id="d1"))
    assert [(d["call_id"], d["decided_by"], d["latency_ms"]) for d in run.by("tool.decided")] == [
        ("c2", "embedder", 250), ("c1", "embedder", 750)]
    kinds = [(e["event"], e.get("id")) for e in run.events]
    assert kinds.index(("tool.decided", None)) < kinds.index(("command.result", "d2"))  # decided, then ok
    assert run.result("d1") == {"result": "ok", "applies_at": None}
    census_matches(run)


def test_the_deadline_denies_at_the_clocks_time_and_not_before():
    run = started(decisions="ask", decision_timeout_ms=50)
    run.call("bash", {"command": "x"}, "c1")
    start = run.clock()
    run.clock.advance(0.02)
    run.call("bash", {"command": "y"}, "c2")
    assert run.core.next_deadline() == pytest.approx(start + 0.05)
    run.clock.now = start + 0.049
    run.expire()
    assert run.by("tool.decided") == []
    run.clock.now = start + 0.0501  # (a whole ms is 50 however the float rounds)
    run.expire()
    (decided,) = run.by("tool.decided")
    assert (decided["call_id"], decided["decided_by"], decided["latency_ms"]) == ("c1", "deadline", 50)
    assert decided["decision"]["reason"] == (
        "metaharness's own 50ms decision deadline expired before an answer arrived; it is strictly less than "
        "the vendor's 100ms timeout so the refusal is metaharness's and not an ambiguity")
    assert run.core.next_deadline() == pytest.approx(start + 0.07)  # the next call's, for the next timer
    run.clock.now = start + 1
    run.expire()
    assert [d["call_id"] for d in run.by("tool.decided")] == ["c1", "c2"]
    assert run.core.next_deadline() is None


def test_tool_decide_answers_unknown_too_late_and_malformed():
    run = started(decisions="ask")
    run.call("read", {"path": "a"}, "c1")
    run.send(decide("c1", {"decision": "deny", "reason": "  "}, id="blank"))
    run.send(decide("nope", ALLOW, id="unknown"))
    run.send(decide("c1", ALLOW, id="first"))
    run.send(decide("c1", ALLOW, id="again"))
    run.send(b'{"format":"metaharness.command/1","id":"flat","command":"tool.decide","call_id":"x","decision":"allow"}')
    assert run.result("blank") == {"result": "refused", "refused": {"code": "MALFORMED", "reason": (
        "malformed tool.decide: a deny needs a non-empty reason; it is the only part the model can act on")}}
    assert run.result("unknown")["refused"] == {"code": "UNKNOWN_CALL",
                                                "reason": "nope does not correlate to an open request"}
    assert run.result("first") == {"result": "ok", "applies_at": None}
    assert run.result("again")["refused"] == {"code": "TOO_LATE", "reason":
                                              "c1 was decided or its window closed; a decision cannot be replayed"}
    assert run.result("flat")["refused"] == {"code": "MALFORMED", "reason":
        'malformed tool.decide: invalid type: string "allow", expected internally tagged enum Decision'}


def test_a_turns_end_abandons_what_is_pending_and_a_later_answer_is_too_late():
    run = started(decisions="ask")
    run.call("bash", {"command": "x"}, "c1")
    run.core.turn_ended("end_turn")
    kinds = names(run)
    i = kinds.index("turn.ended")
    assert kinds[i + 1:] == ["tool.decided", "warning"]
    decided = run.by("tool.decided")[0]
    assert decided["decided_by"] == "adapter"
    assert decided["decision"]["reason"] == "the turn ended before this call was decided, so nothing ran"
    assert run.by("warning")[-1]["message"] == "c1 was never decided by the embedder"
    assert run.delivered == [("c1", Deny(reason="the turn ended before this call was decided, so nothing ran"),
                              "adapter")]
    run.send(decide("c1", ALLOW, id="late"))
    assert run.result("late")["refused"]["code"] == "TOO_LATE"


def test_the_same_call_id_again_shares_its_decision_and_a_changed_input_is_denied():
    run = started(decisions="observe")
    run.call("read", {"path": "a"}, "x")
    run.call("read", {"path": "a"}, "x")
    run.call("read", {"path": "b"}, "x")
    assert len(run.by("tool.requested")) == 3
    first, mutated = run.by("tool.decided")
    assert (mutated["decided_by"], mutated["decision"]["reason"]) == (
        "adapter", "this call id was already presented with a different input")
    assert [d[2] for d in run.delivered] == ["observe", "observe", "adapter"]  # the twin heard the same answer
    warning = [e for e in run.events if e.get("code") == "REQUEST_MUTATED"][0]
    assert run.events.index(warning) < run.events.index(mutated)
    census_matches(run)


def test_a_presentation_while_pending_waits_on_the_one_decision():
    run = started(decisions="ask")
    run.call("read", {"path": "a"}, "x")
    run.call("read", {"path": "a"}, "x")
    run.send(decide("x", ALLOW))
    assert [d[0] for d in run.delivered] == ["x", "x"]
    assert len(run.by("tool.decided")) == 1


def test_replace_is_refused_under_deny_only_and_the_call_stays_pending():
    run = started(decisions="ask", deny_only=True)
    run.call("bash", {"command": "x"}, "c1")
    run.send(decide("c1", {"decision": "replace", "input": {"command": "true"}}, id="r"))
    run.send(decide("c1", {"decision": "deny", "reason": "no shell"}, id="d"))
    assert run.result("r")["refused"] == {"code": "UNSUPPORTED_CONTROL", "reason":
                                          "this run is deny-only and replace would grant; answer deny or abstain"}
    assert run.result("d") == {"result": "ok", "applies_at": None}


def test_replace_never_becomes_allow_where_it_cannot_be_delivered():
    run = started(msgspec.structs.replace(OHarnessAdapter.descriptor(), replace="unverified"), decisions="ask")
    run.call("bash", {"command": "x"}, "c1")
    run.send(decide("c1", {"decision": "replace", "input": {"command": "true"}}, id="r"))
    assert run.result("r")["refused"] == {"code": "UNSUPPORTED_CONTROL", "reason":
        "the oharness adapter cannot deliver replace for this call; deny with a reason instead"}
    assert run.by("tool.decided") == [] and run.core.next_deadline() is not None  # still pending


def test_a_result_for_an_undecided_call_is_reported_as_such():
    run = started(decisions="ask")
    run.call("bash", {"command": "id"}, "forged")
    from metaharness.protocol.events import ToolResult

    run.core.emit(ToolResult(call_id="forged", is_error=False, content="ran", exit_code=0))
    run.core.turn_ended("end_turn")
    kinds = [(e["event"], e.get("code")) for e in run.events]
    warning = kinds.index(("warning", "UNDECIDED_CALL_RAN"))
    assert kinds[warning + 1] == ("tool.result", None) and "forged" in run.events[warning]["message"]
    assert run.by("tool.decided") == [] and ("warning", "PENDING_CALL_ABANDONED") not in kinds
    assert run.delivered == [] and run.core.census.snapshot().allowed == 0


# --- the command pipeline: its steps in order --------------------------------------------------


def test_the_reserved_id_is_refused_for_a_typed_command_too():
    from metaharness.protocol.commands import Halt

    run = started()
    run.core.take(Halt(id="-", reason="x"))
    assert run.events[-1]["id"] == "-" and run.carried == []  # refused, so nothing to carry
    assert run.events[-1]["id"] == "-" and run.events[-1]["outcome"]["refused"] == {
        "code": "MALFORMED", "reason": 'the id "-" is reserved for lines whose id could not be read'}


def test_malformed_lines_are_answered_under_the_id_they_could_read():
    run = started()
    for line in [b"not json", b"   \t", b"\xff\xfe",
                 b'{"format":"metaharness.command/1","id":"-","command":"halt","reason":"x"}']:
        run.send(line)
    run.send(cmd("permission.set", id="", posture="plan"))
    results = run.by("command.result")
    assert [r["id"] for r in results] == ["-", "-", "-"]
    assert all(r["outcome"]["result"] == "refused" for r in results)


def test_well_formedness_comes_before_capability():
    stale = make_frame([{"op": "shell"}])
    stale["operations"] = [{"op": "file.write"}]
    descriptor = OHarnessAdapter.descriptor()
    descriptor = msgspec.structs.replace(descriptor, commands=dict(descriptor.commands, **{"frame.set": CommandRefused()}))
    run = started(descriptor)
    run.send(cmd("frame.set", id="stale", frame=stale))
    run.send(cmd("frame.set", id="fresh", frame=make_frame([{"op": "shell"}])))
    assert run.result("stale")["refused"]["code"] == "MALFORMED"
    assert run.result("fresh")["refused"] == {"code": "UNSUPPORTED_CONTROL",
                                              "reason": "the oharness adapter refuses frame.set"}


def test_the_run_configuration_refuses_frame_set_in_observe_and_an_unknown_posture():
    run = started(decisions="observe")
    run.send(cmd("frame.set", id="f", frame=make_frame([{"op": "shell"}])))
    assert run.result("f")["refused"] == {"code": "UNSUPPORTED_CONTROL", "reason":
                                          "frame.set cannot be honoured in an observe run: observe enforces nothing"}
    assert run.send(cmd("permission.set", id="p2", posture="yolo")) is False
    assert run.result("p2")["refused"] == {"code": "UNSUPPORTED_CONTROL",
                                           "reason": "the oharness adapter does not accept the posture 'yolo'"}
    assert run.send(cmd("permission.set", id="p1", posture="plan")) is True  # the driver carries it


def test_steer_between_turns_is_too_late_and_in_a_turn_is_carried():
    run = CoreRun(spec())
    run.start()
    assert run.send(cmd("steer", id="early", text="x")) is False
    assert run.result("early")["refused"] == {"code": "TOO_LATE", "reason":
        "no turn is running, so there is nothing to steer; message.inject reaches the next turn"}
    run.turn(first=True)
    assert run.send(cmd("steer", id="mid", text="go left")) is True
    commands.control_answered(run.core, "mid", None)
    assert run.result("mid") == {"result": "ok", "applies_at": None}


def test_an_interrupt_before_the_spawn_is_ok_and_after_it_is_carried():
    run = CoreRun(spec())
    run.core.check_start()
    assert run.send(cmd("interrupt", id="i0", reason="x")) is False
    assert run.result("i0") == {"result": "ok", "applies_at": None}
    run.core.spawn_begins()
    run.core.spawn_settles(spawned=True)
    assert run.send(cmd("interrupt", id="i1", reason="x")) is True


def test_an_interrupt_abandons_pending_then_answers_then_the_turn_ends():
    run = started(decisions="ask")
    run.call("bash", {"command": "x"}, "c1")
    assert run.send(cmd("interrupt", id="i1", reason="enough")) is True
    run.core.interrupt_begins()
    run.core.turn_ended("interrupted")  # the harness reports the end before the interrupt's reply
    commands.control_answered(run.core, "i1", None)
    run.core.interrupt_ends()
    kinds = [(e["event"], e.get("id")) for e in run.events]
    assert kinds.index(("tool.decided", None)) < kinds.index(("command.result", "i1")) < kinds.index(
        ("turn.ended", None))
    reason = "the run was interrupted before this call was decided, so nothing ran"
    assert run.delivered == [("c1", Deny(reason=reason), "adapter")]


def test_a_control_the_adapter_refuses_or_cannot_reach():
    from metaharness.adapters.base import ControlRefused

    run = started()
    commands.control_failed(run.core, "a", ControlRefused("UNSUPPORTED_CONTROL", "not now"))
    commands.control_failed(run.core, "b", BrokenPipeError("the pipe closed"))
    commands.unreachable(run.core, "c")
    run.core.child = False  # as if the spawn had failed
    commands.unreachable(run.core, "d")
    assert run.result("a")["refused"] == {"code": "UNSUPPORTED_CONTROL", "reason": "not now"}
    assert run.result("b")["refused"] == {"code": "TOO_LATE",
                                          "reason": "the harness can no longer be reached: the pipe closed"}
    assert run.result("c")["refused"]["reason"] == "the harness has exited, so nothing can reach it"
    assert run.result("d")["refused"]["reason"] == "the run is ending"


def test_a_halt_answers_right_before_stream_closed_and_later_commands_are_too_late():
    run = started(decisions="ask")
    run.call("bash", {"command": "x"}, "c1")
    assert run.send(cmd("halt", id="h1", reason="budget spent")) is True
    assert run.by("command.result") == []  # answered at wind-up
    run.send(cmd("message.inject", id="late", text="x"))
    run.call("bash", {"command": "y"}, "c2")  # presented after the halt: abandoned at once
    code = run.wind_up(queued=[decide("c1", ALLOW, id="queued"), b"garbage"])
    events = run.events
    assert (events[-2]["id"], events[-1]["reason"]) == ("h1", "steer-halt")
    assert run.result("late")["refused"] == {"code": "TOO_LATE", "reason": "the run is ending"}
    assert run.result("queued")["refused"]["reason"] == (
        "c1 was decided or its window closed; a decision cannot be replayed")
    assert run.result("-")["refused"]["code"] == "MALFORMED"
    assert [d["decision"]["reason"][:18] for d in run.by("tool.decided")] == ["the run was halted"] * 2
    assert code == 3  # no terminal record
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


# --- boundaries ----------------------------------------------------------------------------------


def test_frame_set_takes_effect_at_the_next_step_boundary(frame_file):
    run = started(frame=frame_file([{"op": "file.read"}]))
    new = make_frame([{"op": "shell"}], state="s2", index=2)
    before = run.changes
    run.send(cmd("frame.set", id="f1", frame=new))
    assert run.result("f1") == {"result": "ok", "applies_at": "next step"} and run.changes == before + 1
    run.call("bash", {"command": "x"}, "c1")
    run.core.turn_ended("end_turn")
    assert run.landed() == "opening"  # a boundary waits: it opens the next turn
    run.turn()
    run.call("bash", {"command": "x"}, "c2")
    assert [d["decision"]["decision"] for d in run.by("tool.decided")] == ["deny", "allow"]
    rest = [e for e in run.events if e["event"] != "command.result"]
    at = [e["event"] for e in rest].index("turn.ended")
    assert [e["event"] for e in rest[at + 1:at + 4]] == ["step.entered", "injection", "turn.started"]
    assert rest[at + 3]["frame_digest"] == new["digest"]
    assert run.turn_inputs[1] == rest[at + 2]["text"] and len(run.frames_set) == 2


def test_frame_set_in_the_same_step_is_next_turn_and_a_superseded_one_is_said(frame_file):
    run = started(frame=frame_file([{"op": "file.read"}]))
    run.send(cmd("frame.set", id="fa", frame=make_frame([{"op": "shell"}])))
    run.send(cmd("frame.set", id="fb", frame=make_frame([{"op": "shell"}, {"op": "file.read"}])))
    assert run.result("fa")["applies_at"] == "next turn"
    run.core.turn_ended("end_turn")
    run.turn()
    not_applied = [e for e in run.by("warning") if e["code"] == "COMMAND_NOT_APPLIED"]
    assert len(not_applied) == 1 and "fa" in not_applied[0]["message"]
    assert names(run).count("step.entered") == 1


def test_message_inject_opens_the_next_turn_and_one_left_over_is_said_at_wind_up():
    run = started(keep_open=True)
    run.core.turn_ended("end_turn")
    assert run.landed() == "waiting"  # --keep-open: idle at the boundary
    run.send(cmd("message.inject", id="m1", text="remember the handoff"))
    assert not run.by("command.result")  # it opens the next turn now: answered once that reached the harness
    assert run.landed() == "opening"  # woken by it
    run.turn()
    assert run.result("m1") == {"result": "ok", "applies_at": "next turn"}
    assert run.turn_inputs[1] == "remember the handoff"
    assert [e["text"] for e in run.by("injection") if e["origin"] == "message.inject"] == ["remember the handoff"]
    run.core.turn_ended("end_turn")
    run.core.stdin_ended()
    assert run.landed() == "ending"
    run.send(cmd("message.inject", id="m2", text="never"))  # no turn will open for it
    run.end_session()
    assert run.wind_up() == 0
    assert run.result("m2") == {"result": "refused", "refused": {"code": "TOO_LATE", "reason": "the run is ending"}}
    assert not run.by("warning")
    assert run.events[-1]["reason"] == "completed"


def test_a_turn_the_harness_starts_itself_is_served_and_max_turns_is_the_budget():
    run = started(max_turns=1)
    run.send(cmd("message.inject", id="m", text="again"))
    run.core.turn_ended("end_turn")
    assert run.landed(True) == "serving"  # the harness said a turn of its own is coming
    run.core.turn_ended("end_turn")
    assert run.landed() == "ending"
    run.wind_up()
    assert run.events[-1]["reason"] == "budget"
    assert [e["code"] for e in run.by("warning")] == ["NO_TERMINAL_RECORD", "COMMAND_NOT_APPLIED"]


def test_lines_reported_before_session_started_are_held_until_it():
    from metaharness.protocol.events import WarningEvent

    run = CoreRun(spec())
    run.core.check_start()
    run.core.emit(WarningEvent(code="VENDOR_WARNING", message="early"))
    assert run.events == []
    run.start()
    assert names(run) == ["session.started", "warning"]


def test_a_harness_that_never_opened_still_gets_its_lines_and_one_stream_closed():
    from metaharness.protocol.events import WarningEvent

    run = CoreRun(spec())
    run.core.check_start()
    run.core.emit(WarningEvent(code="VENDOR_WARNING", message="early"))
    assert run.wind_up() == 3
    assert [(e["event"], e.get("code")) for e in run.events] == [
        ("warning", "VENDOR_WARNING"), ("warning", "NO_TERMINAL_RECORD"), ("stream.closed", None)]
    assert run.events[-1]["reason"] == "error"


# --- run start ----------------------------------------------------------------------------------


def refused_start(run: CoreRun) -> RunRefused:
    with pytest.raises(RunRefused) as refusal:
        run.core.check_start()
    assert run.core.refuse_start(refusal.value) == 2
    assert run.events[-1]["event"] == "stream.closed" and run.events[-1]["reason"] == "error"
    return refusal.value


def test_required_commands_are_refused_at_start_each_by_name():
    descriptor = OHarnessAdapter.descriptor()
    descriptor = msgspec.structs.replace(descriptor, commands=dict(descriptor.commands, steer=CommandRefused()),
                                         replace="absent")
    run = CoreRun(spec(required_commands=["replace", "steer"]), descriptor=descriptor)
    refusal = refused_start(run)
    assert [(e["event"], e.get("id")) for e in run.events] == [
        ("command.result", "start/steer"), ("command.result", "start/replace"), ("stream.closed", None)]
    assert run.events[0]["outcome"]["refused"] == {"code": "UNSUPPORTED_CONTROL", "reason":
        "this run's configuration needs steer and the oharness adapter refuses it"}
    assert run.events[1]["outcome"]["refused"]["reason"] == (
        "this run's configuration needs replace and the oharness adapter cannot deliver it")
    assert run.events[2]["events"] == 2 and run.events[2]["process"] == {"kind": "unknown"}
    assert refusal.sentence.startswith(
        "CommandUnavailable: the oharness adapter cannot honour what this run requires: steer, replace")
    assert run.stderr == [f"metaharness: {refusal.sentence}"]


def test_observe_with_a_frame_is_refused_at_start(frame_file):
    refusal = refused_start(CoreRun(spec(decisions="observe", frame=frame_file([]))))
    assert refusal.sentence.startswith("ObserveWithFrame")


@pytest.mark.parametrize("content,name", [(b"not json", "FrameInvalid"), (b"[]", "FrameInvalid"),
                                          (None, "FrameUnreadable")])
def test_frame_refusals_at_start(tmp_path, content, name):
    path = tmp_path / "f.json"
    if content is not None:
        path.write_bytes(content)
    run = CoreRun(spec(frame=str(path)))
    assert refused_start(run).sentence.startswith(name)
    assert [e["event"] for e in run.events] == ["stream.closed"] and run.events[0]["events"] == 0


def test_a_frame_given_twice_is_a_conflict(frame_file):
    refusal = refused_start(CoreRun(spec(frame=frame_file([]), library_frame=make_frame([]))))
    assert refusal.sentence.startswith("FrameConflict")


def test_a_posture_the_adapter_does_not_accept_and_a_vendor_option_of_another_kind():
    assert "does not accept the posture 'yolo'" in refused_start(CoreRun(spec(posture="yolo"))).sentence
    assert refused_start(CoreRun(spec(codex_replace_relay=True))).sentence == (
        "OptionForeign: --codex-replace-relay is a codex option and this run is oharness")


def test_lines_read_before_a_refused_start_are_answered():
    run = CoreRun(spec(posture="yolo"))
    with pytest.raises(RunRefused) as refusal:
        run.core.check_start()
    from metaharness.protocol.decode import decode_command_line

    run.core.refuse_start(refusal.value, [decode_command_line(cmd("halt", id="h", reason="x"))])
    assert run.result("h")["refused"] == {"code": "TOO_LATE", "reason": "the run is ending"}


def test_the_pipeline_has_one_route_per_command_under_its_wire_name():
    from metaharness.protocol.commands import COMMAND_TYPES

    assert set(commands.PIPELINE) == set(COMMAND_TYPES)
    assert all(route.name == kind.__struct_config__.tag for kind, route in commands.PIPELINE.items())


@pytest.mark.parametrize("module", ["core", "calls", "commands", "start", "harness", "decide"])
def test_the_core_modules_need_no_event_loop(module):
    """The rules stay drivable by plain calls: no module of the core imports asyncio (the driver,
    run/loop.py, is the only one that waits)."""
    import ast
    import pathlib

    import metaharness.run as package

    source = (pathlib.Path(package.__file__).parent / f"{module}.py").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module.split(".")[0])
    assert "asyncio" not in imported and "threading" not in imported
