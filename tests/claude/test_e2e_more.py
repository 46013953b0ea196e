"""End-to-end cases C22, C27, C28 and C30 of the Claude Code end-to-end checklist against the real Claude
Code 2.1.328 through `metaharness run claude` (see test_e2e_claude.py for the others;
C34 lives beside C21 and C26 there, whose transcripts it replays)."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from metaharness.protocol import frame as frames

from .support import ClaudeRun, frame_doc, frame_obj, result_text, scenario, shell, tool_results_in

pytestmark = pytest.mark.timeout(120)

READ_ONLY = ["file.read", "dir.list", "search"]


def write_frame(tmp_path, ops, name="frame.json", **kw) -> str:
    path = tmp_path / name
    path.write_bytes(frame_doc(ops, **kw))
    return str(path)


def write_op(path: str = "w.txt", content: str = "written\n") -> dict:
    return {"op": "file.write", "input": {"path": path, "content": content}}


def index_of(run: ClaudeRun, pred) -> int:
    return next(i for i, e in enumerate(run.events) if pred(e))


def user_texts(message: dict) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"]


async def absent_after(path: str, seconds: float = 2.0) -> None:
    await asyncio.sleep(seconds)
    assert not os.path.exists(path), f"{path} exists: a denied call ran"


async def test_c22_interrupt_during_model_request(tmp_path):
    # Turn selection is stateless (the vendor rule “scenario and turn selection”): an aborted request leaves no assistant
    # message, so the next turn is answered by scenario turn 0 again (after its delay).
    run = await ClaudeRun(str(tmp_path), scenario({"text": "slow answer", "delay_ms": 3000}),
                          [], prompt="first").start()
    await run.wait_event(lambda e: e["event"] == "turn.started")
    await asyncio.sleep(1.0)  # the model request is in flight, inside its 3 s delay
    run.send("message.inject", text="NEXT")
    cid = run.send("interrupt", reason="enough")
    assert await run.finish() == 0
    run.assert_complete()
    run.assert_no_dns()
    results = [r for r in run.transcript() if r.get("type") == "result"]
    assert [r["terminal_reason"] for r in results][0] == "aborted_streaming", results
    assert results[0]["is_error"] is True and results[0]["subtype"] == "error_during_execution"
    interrupt_result = index_of(run, lambda e: e["event"] == "command.result" and e["id"] == cid)
    assert run.events[interrupt_result]["outcome"] == {"result": "ok", "applies_at": None}
    assert interrupt_result < run.names().index("turn.ended")
    assert [e["turn"] for e in run.of("turn.started")] == [1, 2]
    ended = run.one("session.ended")
    assert ended["is_error"] is False and ended["final_answer"]["text"] == "slow answer"
    assert run.events[-1]["reason"] == "completed"
    assert any("NEXT" in user_texts(m) for m in run.main_requests()[-1]["body"]["messages"] if m["role"] == "user")


async def test_c27_steer_during_last_model_request_becomes_next_turn(tmp_path):
    # Ask mode, and the steer's turn makes a call of its own: the run must still be fully
    # live in that turn (the embedder's decision honoured), not winding up.
    run = await ClaudeRun(str(tmp_path), scenario(
        {"calls": [shell("true")]}, {"text": "one", "delay_ms": 2000},
        {"calls": [shell("echo late > late.txt")]}, {"text": "two"}), ["--decisions", "ask"]).start()
    first = await run.wait_event(lambda e: e["event"] == "tool.requested" and e["decision_required"])
    run.send("tool.decide", call_id=first["call_id"], decision={"decision": "allow"})
    await run.wait_event(lambda e: e["event"] == "tool.result")
    await asyncio.sleep(0.5)  # the turn's last model request is waiting out its delay
    cid = run.send("steer", text="LATE-1")
    second = await run.wait_event(lambda e: e["event"] == "tool.requested" and e["call_id"] != first["call_id"])
    decide = run.send("tool.decide", call_id=second["call_id"], decision={"decision": "allow"})
    assert await run.finish() == 0
    assert next(e for e in run.of("command.result") if e["id"] == decide)["outcome"] == {"result": "ok", "applies_at": None}
    assert [d["decided_by"] for d in run.of("tool.decided")] == ["embedder", "embedder"]
    assert os.path.exists(run.path("late.txt"))
    run.assert_complete()
    run.assert_no_dns()
    assert next(e for e in run.of("command.result") if e["id"] == cid)["outcome"] == {"result": "ok", "applies_at": None}
    results = [r for r in run.transcript() if r.get("type") == "result"]
    assert [r.get("result") for r in results] == ["one", "two"], "claude did not start a new turn with the steer"
    names = run.names()
    assert [e["turn"] for e in run.of("turn.started")] == [1, 2]
    assert [e["turn"] for e in run.of("turn.ended")] == [1, 2]
    first_end = names.index("turn.ended")
    second_start = [i for i, n in enumerate(names) if n == "turn.started"][1]
    assert first_end < second_start
    steer = index_of(run, lambda e: e["event"] == "injection" and e["origin"] == "steer")
    assert run.events[steer]["text"] == "LATE-1" and first_end < steer
    assert run.one("session.ended")["final_answer"]["text"] == "two"
    assert run.events[-1]["reason"] == "completed"
    last = run.main_requests()[-1]["body"]["messages"]
    assert any("LATE-1" in user_texts(m) for m in last if m["role"] == "user")


async def test_c28_frames_and_inject_as_separate_text_blocks(tmp_path):
    frame_a_doc = frame_doc(READ_ONLY, state="s1", index=1)
    frame_a = frames.parse_frame_document(frame_a_doc)
    (tmp_path / "a.json").write_bytes(frame_a_doc)
    b_obj = frame_obj([*READ_ONLY, "file.write"], state="s2", index=2)
    frame_b = frames.frame_from_command(b_obj)
    run = await ClaudeRun(str(tmp_path), scenario(
        {"calls": [write_op()]}, {"text": "turn one done", "delay_ms": 500},
        {"calls": [write_op()]}, {"text": "turn two done"}), ["--frame", str(tmp_path / "a.json")]).start()
    denied = await run.wait_event(lambda e: e["event"] == "tool.decided")
    assert denied["decision"]["decision"] == "deny" and denied["decided_by"] == "frame"
    set_id = run.send("frame.set", frame=b_obj)
    inject_id = run.send("message.inject", text="NOTE-2")
    assert await run.finish() == 0
    run.assert_complete()
    run.assert_no_dns()
    names = run.names()
    starts = [i for i, n in enumerate(names) if n == "turn.started"]
    assert len(starts) == 2
    # Launch boundary: step.entered, injection{frame} = rendering of A, before turn.started{1}.
    assert names[:starts[0] + 1][-3:] == ["step.entered", "injection", "turn.started"]
    opening = run.events[starts[0] - 1]
    assert opening["origin"] == "frame" and opening["text"] == frames.render(frame_a)
    assert run.events[starts[0]]["frame_digest"] == frame_a.digest
    first_user = next(m for m in run.main_requests()[0]["body"]["messages"] if m["role"] == "user")
    first_texts = [t for t in user_texts(first_user) if not t.startswith("<system-reminder>")]
    assert first_texts == [frames.render(frame_a), "do the task"], first_texts  # after Claude's own reminder block
    results = {e["id"]: e["outcome"] for e in run.of("command.result")}
    assert results[set_id] == {"result": "ok", "applies_at": "next step"}
    assert results[inject_id] == {"result": "ok", "applies_at": "next turn"}
    # The boundary between turns.
    first_end = names.index("turn.ended")
    boundary = run.events[first_end + 1:starts[1] + 1]
    assert [e["event"] for e in boundary] == ["step.entered", "injection", "injection", "turn.started"], \
        [e["event"] for e in boundary]
    assert boundary[1]["origin"] == "frame" and boundary[1]["text"] == frames.render(frame_b)
    assert boundary[2]["origin"] == "message.inject" and boundary[2]["text"] == "NOTE-2"
    assert boundary[3]["frame_digest"] == frame_b.digest
    # The turn-2 request: one user message holding the rendering of B, then NOTE-2, as two blocks.
    turn2 = next(r for r in run.main_requests()
                 if any(user_texts(m) == [frames.render(frame_b), "NOTE-2"]
                        for m in r["body"]["messages"] if m["role"] == "user"))
    assert turn2 is not None
    decided = run.of("tool.decided")
    assert [(d["decision"]["decision"], d["decided_by"]) for d in decided] == [("deny", "frame"), ("allow", "frame")]
    assert os.path.exists(run.path("w.txt"))
    assert len([e for e in run.of("injection") if e["text"] == "NOTE-2"]) == 1


async def test_c30_allow_cannot_grant_in_plan_posture(tmp_path):
    frame = write_frame(tmp_path, ["file.write"])
    run = await ClaudeRun(str(tmp_path), scenario({"calls": [write_op()]}, {"text": "done"}),
                          ["--frame", frame, "--posture", "plan"]).start()
    assert await run.finish() == 0
    run.assert_complete()
    run.assert_no_dns()
    assert run.one("session.started")["permission_mode"] == "plan"
    decided = run.one("tool.decided")
    assert decided["decision"] == {"decision": "allow"} and decided["decided_by"] == "frame"
    result = run.one("tool.result")
    assert result["is_error"] is True
    text = result_text(tool_results_in(run.main_requests()[1])[-1])
    assert "Cannot write" in text and "plan mode" in text, text
    await absent_after(run.path("w.txt"))
