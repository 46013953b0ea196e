"""The codex adapter against the scripted stub app-server: handshake, presentation,
answers on the wire, controls. The real binary is exercised in test_e2e.py."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from metaharness.adapters.base import ControlRefused, StartRefusal, resolve_tool
from metaharness.adapters.codex import CodexAdapter, launch
from metaharness.protocol.commands import Interrupt, PermissionSet, Steer
from metaharness.protocol.frame import seal
from metaharness.protocol.values import Abstain, Allow, Deny, Exited, Replace

from codex_helpers import FakeContext, make_spec, wire_log

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import phase_commands as pc  # noqa: E402  (the process-tree helpers the vendor phase tests share)

FRAME_FIELDS = {"workflow": {"id": "w", "version": "1"}, "node": {"id": "n"},
                "step": {"workflow": "w", "state": "n", "index": 1, "attempt": 1}, "prior": [], "obligations": [],
                "reaching": [], "next": [], "handoff": {"handoff": "none"}}


async def run_turn(adapter: CodexAdapter, ctx: FakeContext, text: str = "go", timeout: float = 15,
                   frame=None) -> None:
    ctx.turn_ended_event = asyncio.Event()
    await adapter.begin_turn(text, frame)
    await asyncio.wait_for(ctx.turn_ended_event.wait(), timeout)


async def finish(adapter: CodexAdapter) -> object:
    await adapter.finish()
    return await asyncio.wait_for(adapter.child.wait(), 15)


async def with_a_pending_call(tmp_path, vendor) -> tuple[CodexAdapter, FakeContext, object]:
    """An adapter on the stub whose first turn has presented its call (undecided)."""
    work = tmp_path / "work"
    work.mkdir()
    ctx = FakeContext(str(work))
    adapter = CodexAdapter(make_spec(work, vendor))
    adapter.plan()
    await adapter.start(ctx)
    ctx.turn_ended_event = asyncio.Event()
    await adapter.begin_turn("go")
    for _ in range(200):
        if ctx.calls:
            break
        await asyncio.sleep(0.02)
    return adapter, ctx, work


async def test_handshake_session_started_and_held_warning(tmp_path, stub_vendor):
    vendor = stub_vendor({"turns": [[{"text": "hello"}]]})
    work = tmp_path / "work"
    work.mkdir()
    ctx = FakeContext(str(work))
    adapter = CodexAdapter(make_spec(work, vendor))
    adapter.plan()
    await adapter.start(ctx)
    started = ctx.of("session.started")[0]
    assert started.adapter == "codex" and started.harness_version == "0.171.0"
    assert started.model == "gpt-5.5" and started.permission_mode == "workspaceWrite"
    assert started.session_id == "thread-stub-1" and started.cwd == str(work)
    # The configWarning came before the thread/start result: held, written right after.
    assert ctx.names()[:2] == ["session.started", "warning"]
    await run_turn(adapter, ctx)
    termination = await finish(adapter)
    assert termination == Exited(code=0)
    assert ctx.of("text")[0].text == "hello"
    ended = ctx.of("session.ended")[0]
    assert ended.final_answer.text == "hello" and ended.num_turns == 1 and ended.is_error is False
    assert ended.usage.input_tokens == 10
    sent = wire_log(vendor)
    start = next(m for m in sent if m.get("method") == "thread/start")
    assert start["params"]["approvalPolicy"] == "untrusted"
    # the config is the loopback-safe one
    config = (adapter.child.scratch / launch.CODEX_HOME / "config.toml").read_text()
    assert 'wire_api = "responses"' in config and "plugins = false" in config
    assert "enabled = false" in config and "check_for_update_on_startup = false" in config


async def test_other_approval_policy_is_refused_by_name(tmp_path, stub_vendor):
    vendor = stub_vendor({"approvalPolicy": "on-request"})
    work = tmp_path / "work"
    work.mkdir()
    adapter = CodexAdapter(make_spec(work, vendor))
    adapter.plan()
    with pytest.raises(StartRefusal) as refusal:
        await adapter.start(FakeContext(str(work)))
    assert "untrusted" in refusal.value.sentence and refusal.value.name == "VendorCapability"
    assert not any(m.get("method") == "turn/start" for m in wire_log(vendor))
    assert adapter.child.proc.returncode is not None


async def test_allow_accepts_and_command_runs(tmp_path, stub_vendor):
    vendor = stub_vendor({"turns": [[{"command": "echo hi > out.txt"}, {"text": "done"}]]})
    work = tmp_path / "work"
    work.mkdir()
    ctx = FakeContext(str(work), decide=lambda call: Allow())
    adapter = CodexAdapter(make_spec(work, vendor))
    ctx.adapter = adapter
    adapter.plan()
    await adapter.start(ctx)
    await run_turn(adapter, ctx)
    await finish(adapter)
    call = ctx.calls[0]
    assert call.name == "Bash" and call.seam == "control_request" and call.can_replace is False
    assert call.input == {"command": "/bin/bash -lc 'echo hi > out.txt'", "cwd": str(work)}
    assert call.at is not None and call.at.endswith("Z")
    assert (work / "out.txt").read_text() == "hi\n"
    result = ctx.of("tool.result")[0]
    assert result.exit_code == 0 and result.is_error is False and result.outcome_source == "item/completed"
    answers = [m for m in wire_log(vendor) if "result" in m and "method" not in m]
    assert answers == [{"id": 0, "result": {"decision": "accept"}}]
    assert resolve_tool(adapter.tools, call.name, call.input, call.cwd, adapter.spec.work_dir()).operations == [("shell", "", "")]


async def test_deny_steers_the_reason_first_then_declines(tmp_path, stub_vendor):
    vendor = stub_vendor({"turns": [[{"command": "echo hi > out.txt"}, {"text": "after"}]]})
    work = tmp_path / "work"
    work.mkdir()
    ctx = FakeContext(str(work), decide=lambda call: Deny(reason="this step admits no shell"))
    adapter = CodexAdapter(make_spec(work, vendor))
    ctx.adapter = adapter
    adapter.plan()
    await adapter.start(ctx)
    await run_turn(adapter, ctx)
    await finish(adapter)
    assert not (work / "out.txt").exists()
    sent = wire_log(vendor)
    steer_index = next(i for i, m in enumerate(sent) if m.get("method") == "turn/steer")
    decline_index = next(i for i, m in enumerate(sent) if m.get("result") == {"decision": "decline"})
    assert steer_index < decline_index
    call_id = ctx.calls[0].call_id
    steer = sent[steer_index]["params"]
    assert steer["input"][0]["text"] == f"metaharness refused the previous tool call {call_id}: this step admits no shell"
    assert steer["expectedTurnId"] == "turn-1" and steer["clientUserMessageId"] == f"mh-deny-{call_id}"
    injection = ctx.of("injection")[0]
    assert injection.origin == "deny-reason" and "this step admits no shell" in injection.text
    result = ctx.of("tool.result")[0]
    assert result.is_error is True and result.tool_use_result["status"] == "declined"
    assert not any(isinstance(m.get("result"), dict) and m["result"].get("decision") in
                   ("acceptForSession", "cancel") for m in sent)


async def test_abstain_accepts_and_replace_is_refused_by_name(tmp_path, stub_vendor):
    vendor = stub_vendor({"turns": [[{"command": "true"}, {"command": "echo b > b.txt"}]]})
    work = tmp_path / "work"
    work.mkdir()
    ctx = FakeContext(str(work))
    adapter = CodexAdapter(make_spec(work, vendor, decision_timeout_ms=1000))
    adapter.plan()
    await adapter.start(ctx)
    ctx.turn_ended_event = asyncio.Event()
    await adapter.begin_turn("go")
    for _ in range(200):
        if ctx.calls:
            break
        await asyncio.sleep(0.02)
    adapter.deliver(ctx.calls[0].call_id, Abstain(), "adapter")
    for _ in range(200):
        if len(ctx.calls) == 2:
            break
        await asyncio.sleep(0.02)
    with pytest.raises(ControlRefused) as refused:
        adapter.deliver(ctx.calls[1].call_id, Replace(input={"command": "echo c > c.txt"}), "embedder")
    assert refused.value.code == "UNSUPPORTED_CONTROL" and "replace" in refused.value.reason
    # The call stays pending; the adapter's ceiling (vendor_ms = 2 × 1000) declines it.
    await asyncio.wait_for(ctx.turn_ended_event.wait(), 15)
    await finish(adapter)
    assert not (work / "b.txt").exists() and not (work / "c.txt").exists()
    words = [m["result"]["decision"] for m in wire_log(vendor) if isinstance(m.get("result"), dict) and "decision" in m["result"]]
    assert words == ["accept", "decline"]


async def test_patch_presentation_and_per_entry_resolution(tmp_path, stub_vendor):
    vendor = stub_vendor({"turns": [[{"patch": [{"path": "w.txt", "kind": {"type": "add"}, "diff": "hello\n"},
                                                {"path": "notes.txt", "kind": {"type": "update", "move_path": None}, "diff": "@@"}]}]]})
    work = tmp_path / "work"
    work.mkdir()
    ctx = FakeContext(str(work), decide=lambda call: Allow())
    adapter = CodexAdapter(make_spec(work, vendor))
    ctx.adapter = adapter
    adapter.plan()
    await adapter.start(ctx)
    await run_turn(adapter, ctx)
    await finish(adapter)
    call = ctx.calls[0]
    assert call.name == "apply_patch"
    assert [c["path"] for c in call.input["changes"]] == [str(work / "w.txt"), str(work / "notes.txt")]
    resolution = resolve_tool(adapter.tools, call.name, call.input, call.cwd, adapter.spec.work_dir())
    assert resolution.operations == [("file.edit", "", ""), ("file.write", "", "")]
    assert resolution.subjects == [("file:w.txt", [("file.write", "", "")]), ("file:notes.txt", [("file.edit", "", "")])]
    assert (work / "w.txt").read_text() == "hello\n"
    assert ctx.of("tool.result")[0].exit_code is None


async def test_steer_and_too_late(tmp_path, stub_vendor):
    vendor = stub_vendor({"turns": [[{"sleep": 0.6}, {"text": "ok"}]]})
    work = tmp_path / "work"
    work.mkdir()
    ctx = FakeContext(str(work))
    adapter = CodexAdapter(make_spec(work, vendor))
    adapter.plan()
    await adapter.start(ctx)
    with pytest.raises(ControlRefused) as early:
        await adapter.control(Steer(id="s0", text="too early"))
    assert early.value.code == "TOO_LATE"
    ctx.turn_ended_event = asyncio.Event()
    await adapter.begin_turn("go")
    await adapter.control(Steer(id="s1", text="STEER-1"))
    await asyncio.wait_for(ctx.turn_ended_event.wait(), 15)
    with pytest.raises(ControlRefused):
        await adapter.control(Steer(id="s2", text="between turns"))
    await finish(adapter)
    steers = [m for m in wire_log(vendor) if m.get("method") == "turn/steer"]
    assert len(steers) == 1 and steers[0]["params"]["expectedTurnId"] == "turn-1"
    assert [(i.origin, i.text) for i in ctx.of("injection")] == [("steer", "STEER-1")]


async def test_posture_and_frame_drive_the_sandbox(tmp_path, stub_vendor):
    vendor = stub_vendor({})
    work = tmp_path / "work"
    work.mkdir()
    ctx = FakeContext(str(work))
    frame = {"operations": [{"op": "file.read"}]}
    adapter = CodexAdapter(make_spec(work, vendor, library_frame=frame))
    adapter.plan()
    await adapter.start(ctx)
    assert await adapter.control(PermissionSet(id="p1", posture="read-only")) == "next turn"
    with pytest.raises(ControlRefused) as never:
        await adapter.control(PermissionSet(id="p2", posture="never"))
    assert never.value.code == "UNSUPPORTED_CONTROL" and "never" in never.value.reason
    await run_turn(adapter, ctx)
    await adapter.control(PermissionSet(id="p3", posture="workspace-write"))
    await run_turn(adapter, ctx, frame=seal({**FRAME_FIELDS, "operations": [{"op": "file.write"}]}))
    await finish(adapter)
    sent = wire_log(vendor)
    start = next(m for m in sent if m.get("method") == "thread/start")
    assert start["params"]["sandbox"] == "read-only"
    turns = [m["params"] for m in sent if m.get("method") == "turn/start"]
    assert turns[0]["sandboxPolicy"] == {"type": "readOnly", "networkAccess": False}
    assert turns[1]["sandboxPolicy"]["type"] == "workspaceWrite" and turns[1]["sandboxPolicy"]["excludeSlashTmp"] is True
    assert all(m.get("params", {}).get("approvalPolicy") in (None, "untrusted") for m in sent)


async def test_interrupt_declines_first_then_turn_interrupt(tmp_path, stub_vendor):
    vendor = stub_vendor({"turns": [[{"command": "echo x > x.txt"}, {"sleep": 3}], [{"text": "second"}]]})
    adapter, ctx, work = await with_a_pending_call(tmp_path, vendor)
    await adapter.control(Interrupt(id="i1", reason="test"))
    await asyncio.wait_for(ctx.turn_ended_event.wait(), 15)
    assert ctx.of("turn.ended")[-1] == "interrupted"
    await run_turn(adapter, ctx)
    await finish(adapter)
    sent = wire_log(vendor)
    decline = next(i for i, m in enumerate(sent) if m.get("result") == {"decision": "decline"})
    interrupt = next(i for i, m in enumerate(sent) if m.get("method") == "turn/interrupt")
    assert decline < interrupt
    assert not (work / "x.txt").exists()
    assert ctx.of("text")[-1].text == "second"


async def test_an_interrupt_after_codex_died_reaches_nobody_and_says_so(tmp_path, stub_vendor):
    """Killed with a call pending: the adapter knows at once (before asyncio reaped it), and an
    interrupt raises, so the run answers it TOO_LATE rather than ok."""
    import signal
    import time

    vendor = stub_vendor({"turns": [[{"command": "echo x > x.txt"}]]})
    adapter, _ctx, work = await with_a_pending_call(tmp_path, vendor)
    assert adapter.child.alive()
    os.kill(adapter.child.proc.pid, signal.SIGKILL)
    for _ in range(500):  # no await: the loop has not seen the death (a watcher thread may have reaped it)
        if not pc.running(adapter.child.proc.pid):
            break
        time.sleep(0.01)
    assert adapter.child.proc.returncode is None and not adapter.child.alive()
    with pytest.raises(BrokenPipeError):
        await adapter.control(Interrupt(id="i1", reason="test"))
    await asyncio.wait_for(adapter.child.wait(), 10)
    assert not (work / "x.txt").exists()


async def test_halt_ends_the_process(tmp_path, stub_vendor):
    vendor = stub_vendor({"turns": [[{"command": "echo x > x.txt"}]]})
    adapter, _ctx, work = await with_a_pending_call(tmp_path, vendor)
    await adapter.halt()
    termination = await asyncio.wait_for(adapter.child.wait(), 10)
    assert termination is not None and adapter.child.proc.returncode is not None
    assert not (work / "x.txt").exists()
    assert any(m.get("result") == {"decision": "decline"} for m in wire_log(vendor))


async def test_unmapped_notifications_are_opaque(tmp_path, stub_vendor):
    vendor = stub_vendor({"turns": [[{"unknown": True}, {"text": "t"}]]})
    work = tmp_path / "work"
    work.mkdir()
    ctx = FakeContext(str(work))
    adapter = CodexAdapter(make_spec(work, vendor))
    adapter.plan()
    await adapter.start(ctx)
    await run_turn(adapter, ctx)
    await finish(adapter)
    opaque_types = [o[0] for o in ctx.of("opaque")]
    assert "stub/unknownThing" in opaque_types and "thread/started" in opaque_types
    # every opaque carries its transcript line number
    lines = adapter.child.scratch.transcript.read_bytes().splitlines()
    for vendor_type, _sub, number, raw in ctx.of("opaque"):
        assert lines[number - 1] == raw


def test_plan_refusals(tmp_path, stub_vendor):
    vendor = stub_vendor({})
    work = tmp_path / "work"
    work.mkdir()
    CodexAdapter(make_spec(work, vendor, codex_replace_relay=True)).plan()  # a relay run plans (the vendor rule “replace on Codex, and PreToolUse hooks inside app-server”)
    with pytest.raises(StartRefusal) as posture:
        CodexAdapter(make_spec(work, vendor, posture="bogus")).plan()
    assert "bogus" in posture.value.sentence
    with pytest.raises(StartRefusal) as prompt:
        CodexAdapter(make_spec(work, vendor, prompt=None)).plan()
    assert prompt.value.name == "NoPrompt"
    with pytest.raises(StartRefusal) as endpoint:
        CodexAdapter(make_spec(work, vendor, model_endpoint=None)).plan()
    assert endpoint.value.name == "NoModelEndpoint"


def test_missing_binary_is_named(tmp_path, monkeypatch):
    import shutil

    from metaharness.adapters.codex import launch

    empty = tmp_path / "empty"
    empty.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    if shutil.which("codex", path=launch.child_path(str(empty))):
        pytest.fail("a codex binary is installed system-wide; this test needs a PATH without one")
    with pytest.raises(StartRefusal) as missing:
        CodexAdapter(make_spec(work, empty)).plan()
    assert missing.value.name == "VendorMissing" and "codex is not on the child PATH" in missing.value.sentence


# --- a steer Codex did not take up opens the next turn (the vendor rule “commands”, X32) --------------


async def run_with_steer(tmp_path, vendor) -> tuple[list[dict], int]:
    """The whole run loop over the stub: a steer sent while turn 1 runs."""
    import json

    from metaharness.run.loop import Run

    work = tmp_path / "work"
    work.mkdir()
    events: list[dict] = []
    steered = asyncio.Event()

    def write(line: bytes) -> None:
        event = json.loads(line)
        events.append(event)
        if event["event"] == "turn.started" and event["turn"] == 1:
            steered.set()

    run = Run(make_spec(work, vendor), write, run_id="stub-run")
    task = asyncio.create_task(run.execute())
    await asyncio.wait_for(steered.wait(), 15)
    run.feed_line(json.dumps({"format": "metaharness.command/1", "id": "s1", "command": "steer", "text": "LATE-1"}).encode())
    run.stdin_ended()
    code = await asyncio.wait_for(task, 20)
    return events, code


@pytest.mark.parametrize("mode", ["refuse", "silent"])
async def test_undelivered_steer_opens_the_next_turn(tmp_path, stub_vendor, mode):
    # "refuse": the steer reached Codex after it went idle; "silent": accepted, never shown.
    # The carried turn starts late, so a loop that did not wait for it would wind up first.
    vendor = stub_vendor({"steer": mode, "later_turn_delay": 0.5,
                          "turns": [[{"sleep": 0.6}, {"text": "one"}], [{"sleep": 0.5}, {"text": "two"}]]})
    events, code = await run_with_steer(tmp_path, vendor)
    names = [e["event"] for e in events]
    assert code == 0 and names[-1] == "stream.closed" and events[-1]["reason"] == "completed"
    assert next(e for e in events if e["event"] == "command.result")["outcome"] == {"result": "ok", "applies_at": None}
    starts = [m for m in wire_log(vendor) if m.get("method") == "turn/start"]
    assert len(starts) == 2
    assert starts[1]["params"]["input"] == [{"type": "text", "text": "LATE-1", "text_elements": []}]
    assert starts[1]["params"]["clientUserMessageId"] == "mh-steer-1"
    steer_at = next(i for i, e in enumerate(events) if e["event"] == "injection" and e["origin"] == "steer")
    assert events[steer_at]["text"] == "LATE-1"
    # (the stub shows a turn's userMessage before its turn/started; Codex shows it after)
    first_end = names.index("turn.ended")
    assert len([e for e in events if e["event"] == "turn.started"]) == 2
    assert first_end < steer_at < names.index("session.ended")
    assert events[names.index("session.ended")]["num_turns"] == 2


async def test_steer_taken_in_the_turn_is_not_carried(tmp_path, stub_vendor):
    vendor = stub_vendor({"turns": [[{"sleep": 0.6}, {"text": "one"}]]})
    events, code = await run_with_steer(tmp_path, vendor)
    assert code == 0
    assert len([m for m in wire_log(vendor) if m.get("method") == "turn/start"]) == 1
    assert [e["text"] for e in events if e["event"] == "injection" and e["origin"] == "steer"] == ["LATE-1"]
    assert len([e for e in events if e["event"] == "turn.started"]) == 1
