"""End-to-end cases of the Claude Code end-to-end checklist against the real Claude Code 2.1.328, through
`metaharness run claude` and a loopback model, inside a loopback-only network namespace
when the machine allows it (the DNS sink's log must stay empty).

"Absent" files are checked at least 2 s after the command's natural finish time.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import pytest

from metaharness.adapters.claude.translate import CONTROL_TYPES, Translator

from .support import ClaudeRun, frame_doc, frame_obj, result_text, scenario, shell, tool_results_in

pytestmark = pytest.mark.timeout(120)

WRITE = "echo hi > out.txt"


def write_frame(tmp_path, ops, name="frame.json", **kw) -> str:
    path = tmp_path / name
    path.write_bytes(frame_doc(ops, **kw))
    return str(path)


async def run_to_end(tmp_path, scen, args, **kw) -> tuple[ClaudeRun, int]:
    run = await ClaudeRun(str(tmp_path), scen, args, **kw).start()
    rc = await run.finish()
    run.assert_complete()
    run.assert_no_dns()
    return run, rc


async def absent_after(path: str, seconds: float = 2.0) -> None:
    await asyncio.sleep(seconds)
    assert not os.path.exists(path), f"{path} exists: a denied command ran"


# --- C01 / C02 -------------------------------------------------------------------------


async def test_c01_text_turn_only_loopback_traffic(tmp_path):
    run, rc = await run_to_end(tmp_path, scenario({"text": "hello there"}), [])
    assert rc == 0
    log = run.loopback_log()
    assert log and all(r["method"] == "POST" and r["path"] == "/v1/messages?beta=true" for r in log), log
    for r in log:
        assert r["headers"]["x-api-key"] == "sk-ant-metaharness-placeholder"
        assert r["headers"]["user-agent"] == "claude-cli/2.1.328 (external, sdk-cli)"
    started = run.one("session.started")
    assert started["harness_version"] == "2.1.328"
    assert len(started["offered_tools"]) == 22 and "Bash" in started["offered_tools"]
    assert run.one("session.ended")["final_answer"]["text"] == "hello there"
    assert run.events[-1]["reason"] == "completed"


async def test_c02_stub_without_fail_closed_capability_is_refused(tmp_path):
    stub_dir = tmp_path / "stub"
    stub_dir.mkdir()
    stub = stub_dir / "claude"
    stub.write_text("""#!/usr/bin/env python3
import sys, json
if "--version" in sys.argv:
    print("2.1.328 (Claude Code)"); sys.exit(0)
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("type") == "control_request" and msg["request"]["subtype"] == "initialize":
        print(json.dumps({"type": "control_response", "response": {"subtype": "success", "request_id": msg["request_id"],
              "response": {"claude_code_version": "2.1.328", "hooks_applied": True}}}), flush=True)
    else:
        print(json.dumps({"type": "unexpected", "line": msg}), flush=True)
""")
    stub.chmod(0o755)
    run = ClaudeRun(str(tmp_path), scenario({"text": "x"}), [])
    run.args[run.args.index("--vendor-dir") + 1] = str(stub_dir)
    await run.start()
    rc = await run.finish()
    assert rc == 2
    run.assert_complete()
    assert run.names() == ["stream.closed"] and run.events[0]["reason"] == "error"
    assert b"hook_on_failure_supported" in run.stderr
    assert run.loopback_log() == []


# --- frame mode --------------------------------------------------------------------------


async def test_c03_frame_allows_shell(tmp_path):
    frame = write_frame(tmp_path, ["shell"])
    run, rc = await run_to_end(tmp_path, scenario({"calls": [shell(WRITE)]}, {"text": "done"}), ["--frame", frame])
    assert rc == 0
    req = run.one("tool.requested")
    assert req["seam"] == "hook" and req["decision_required"] is False
    decided = run.one("tool.decided")
    assert decided["decision"] == {"decision": "allow"} and decided["decided_by"] == "frame"
    assert run.one("tool.result")["is_error"] is False
    assert os.path.exists(run.path("out.txt"))
    names = run.names()
    assert names.index("step.entered") < names.index("injection") < names.index("turn.started")


async def test_c04_frame_denies_shell(tmp_path):
    frame = write_frame(tmp_path, ["file.read"])
    run, rc = await run_to_end(tmp_path, scenario({"calls": [shell(WRITE)]}, {"text": "done"}), ["--frame", frame])
    decided = run.one("tool.decided")
    assert decided["decision"]["decision"] == "deny" and decided["decided_by"] == "frame"
    reason = decided["decision"]["reason"]
    await absent_after(run.path("out.txt"))
    results = tool_results_in(run.main_requests()[1])
    assert results[-1]["is_error"] is True
    assert result_text(results[-1]) == f"PreToolUse:Bash hook error: {reason}"
    denials = run.one("session.ended")["permission_denials"]
    assert [d["tool_use_id"] for d in denials] == [decided["call_id"]]


async def test_c05_no_frame_default_posture_claude_denies_write(tmp_path):
    run, rc = await run_to_end(tmp_path, scenario({"calls": [shell(WRITE)]}, {"calls": [shell("ls")]}, {"text": "ok"}), [])
    warnings = [w["code"] for w in run.of("warning")]
    assert "NO_FRAME_IN_FORCE" in warnings and "VENDOR_PERMISSION_DENIED" in warnings
    assert [d["decision"]["decision"] for d in run.of("tool.decided")] == ["abstain", "abstain"]
    results = run.of("tool.result")
    assert results[0]["is_error"] is True and results[1]["is_error"] is False
    await absent_after(run.path("out.txt"))


async def test_c09_accept_edits_posture_runs_abstained_write(tmp_path):
    run, rc = await run_to_end(tmp_path, scenario({"calls": [shell(WRITE)]}, {"text": "ok"}), ["--posture", "acceptEdits"])
    assert rc == 0
    assert run.one("tool.decided")["decision"] == {"decision": "abstain"}
    assert os.path.exists(run.path("out.txt"))


# --- ask mode ------------------------------------------------------------------------------

ASK = ["--decisions", "ask"]


async def ask_run(tmp_path, scen, args=(), **kw) -> ClaudeRun:
    return await ClaudeRun(str(tmp_path), scen, [*ASK, *args], **kw).start()


def requested(e):
    return e["event"] == "tool.requested" and e["decision_required"]


async def test_c06_ask_allow(tmp_path):
    run = await ask_run(tmp_path, scenario({"calls": [shell(WRITE)]}, {"text": "done"}))
    req = await run.wait_event(requested)
    assert req["deadline_ms"] == 2000
    run.send("tool.decide", call_id=req["call_id"], decision={"decision": "allow"})
    assert await run.finish() == 0
    run.assert_complete()
    decided = run.one("tool.decided")
    assert decided["decided_by"] == "embedder" and isinstance(decided["latency_ms"], int)
    assert os.path.exists(run.path("out.txt"))
    run.assert_no_dns()


async def test_c07_ask_deny_reason_reaches_model(tmp_path):
    run = await ask_run(tmp_path, scenario({"calls": [shell(WRITE)]}, {"text": "done"}))
    req = await run.wait_event(requested)
    run.send("tool.decide", call_id=req["call_id"], decision={"decision": "deny", "reason": "REASON-R not now"})
    assert await run.finish() == 0
    await absent_after(run.path("out.txt"))
    assert result_text(tool_results_in(run.main_requests()[1])[-1]).endswith("REASON-R not now")


async def test_c08_ask_replace_runs_rewritten_input(tmp_path):
    run = await ask_run(tmp_path, scenario({"calls": [shell(WRITE)]}, {"text": "done"}))
    req = await run.wait_event(requested)
    run.send("tool.decide", call_id=req["call_id"],
             decision={"decision": "replace", "input": {"command": "echo replaced > r.txt", "description": "r"}})
    assert await run.finish() == 0
    assert run.one("tool.decided")["decision"]["decision"] == "replace"
    assert os.path.exists(run.path("r.txt"))
    await absent_after(run.path("out.txt"))
    history = [b for m in run.main_requests()[1]["body"]["messages"] if isinstance(m.get("content"), list)
               for b in m["content"] if b.get("type") == "tool_use"]
    assert history[-1]["input"]["command"] == WRITE


async def test_c10_deadline_denies_before_vendor_timeout(tmp_path):
    run = await ask_run(tmp_path, scenario({"calls": [shell(WRITE)]}, {"text": "done"}))
    await run.wait_event(requested)
    assert await run.finish() == 0
    decided = run.one("tool.decided")
    assert decided["decided_by"] == "deadline"
    assert decided["decision"]["reason"].startswith("metaharness's own 2000ms decision deadline expired")
    assert 1900 <= decided["latency_ms"] <= 3500
    assert not any(r.get("type") == "control_cancel_request" for r in run.transcript())
    await absent_after(run.path("out.txt"))


async def test_c11_embedder_gone_denies_at_deadline(tmp_path):
    run = await ask_run(tmp_path, scenario({"calls": [shell(WRITE)]}, {"text": "done"}))
    await run.wait_event(requested)
    run.close_stdin()
    assert await run.finish() == 0
    assert run.one("tool.decided")["decided_by"] == "deadline"
    assert run.one("session.ended")["is_error"] is False
    await absent_after(run.path("out.txt"))


def _children(pid: int) -> list[int]:
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                out += [int(p) for p in handle.read().split()]
    except OSError:
        pass
    return out


def _descendants(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        kids = _children(frontier.pop())
        found += kids
        frontier += kids
    return found


async def test_c12_sigkill_metaharness_leaves_nothing_running(tmp_path):
    run = await ask_run(tmp_path, scenario({"calls": [shell(WRITE)]}, {"text": "done"}))
    await run.wait_event(requested)
    metaharness = _children(run.proc.pid)[0]
    vendor = _descendants(metaharness)
    assert vendor, "no vendor process found under metaharness"
    os.kill(metaharness, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") and _alive(p) for p in vendor):
        await asyncio.sleep(0.1)
    assert not any(_alive(p) for p in vendor), "a vendor process survived metaharness"
    await run.finish()
    await absent_after(run.path("out.txt"))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


async def test_c13_malformed_answer_stays_pending_then_deadline(tmp_path):
    run = await ask_run(tmp_path, scenario({"calls": [shell(WRITE)]}, {"text": "done"}))
    req = await run.wait_event(requested)
    cid = run.send("tool.decide", call_id=req["call_id"], decision="allow")
    result = await run.wait_event(lambda e: e["event"] == "command.result" and e["id"] == cid)
    assert result["outcome"]["refused"]["code"] == "MALFORMED"
    assert await run.finish() == 0
    assert run.one("tool.decided")["decided_by"] == "deadline"
    await absent_after(run.path("out.txt"))


async def test_c14_garbage_on_stdin_never_reaches_claude(tmp_path):
    frame = write_frame(tmp_path, ["shell"])
    run = await ClaudeRun(str(tmp_path), scenario({"calls": [shell("sleep 1")]}, {"text": "done"}),
                          ["--frame", frame]).start()
    await run.wait_event(lambda e: e["event"] == "tool.requested")
    run.write_raw(b"not json at all")
    run.write_raw(b"\xff\xfe broken")
    run.send("no.such.command", id="u1")
    assert await run.finish() == 0
    refusals = [e for e in run.of("command.result") if "refused" in e["outcome"]]
    assert len(refusals) == 3 and all(e["outcome"]["refused"]["code"] == "MALFORMED" for e in refusals)
    assert [e["id"] for e in refusals] == ["-", "-", "u1"]
    assert run.one("session.ended")["is_error"] is False
    assert b"Error parsing" not in run.stderr


# --- interrupt / halt -------------------------------------------------------------------------


async def test_c20_interrupt_with_pending_call(tmp_path):
    run = await ask_run(tmp_path, scenario({"calls": [shell(WRITE)]}, {"text": "done"}))
    req = await run.wait_event(requested)
    cid = run.send("interrupt", reason="stop")
    assert await run.finish() == 0
    names = run.names()
    decided = run.one("tool.decided")
    assert decided["decided_by"] == "adapter" and decided["decision"]["decision"] == "deny"
    result_at = next(i for i, e in enumerate(run.events) if e["event"] == "command.result" and e["id"] == cid)
    assert names.index("tool.decided") < result_at < names.index("turn.ended")
    transcript = run.transcript()
    assert any(r.get("type") == "result" and r.get("subtype") == "error_during_execution" for r in transcript)
    await absent_after(run.path("out.txt"))


async def test_c23_halt_with_pending_call(tmp_path):
    run = await ask_run(tmp_path, scenario({"calls": [shell(WRITE)]}, {"text": "done"}))
    await run.wait_event(requested)
    cid = run.send("halt", reason="stop now")
    await run.finish()
    run.assert_complete()
    assert run.events[-1]["reason"] == "steer-halt"
    assert run.events[-2]["event"] == "command.result" and run.events[-2]["id"] == cid
    assert [w["code"] for w in run.of("warning")].count("PENDING_CALL_ABANDONED") == 1
    await absent_after(run.path("out.txt"))


# Live runs of C21 and C26, kept for C34 (which replays their transcripts); C34 runs a
# flow itself when its run happened in another process (pytest-xdist) or was deselected.
# Each live flow's run and the retained transcript's bytes, read as the flow ends: a passed
# test's tmp_path is removed (tmp_path_retention_policy = "failed"), so c34 cannot reopen it.
LIVE: dict[str, tuple[ClaudeRun, bytes]] = {}


def _keep(case: str, run: ClaudeRun) -> None:
    LIVE[case] = (run, open(os.path.join(run.tmp, "retained", "claude-transcript.jsonl"), "rb").read())


async def c21_flow(tmp_path) -> tuple[ClaudeRun, str]:
    frame = write_frame(tmp_path, ["shell"])
    late = "sleep 5; echo late > late.txt"
    run = await ClaudeRun(str(tmp_path), scenario({"calls": [shell(late)]}, {"text": "second turn"}),
                          ["--frame", frame]).start()
    await run.wait_event(lambda e: e["event"] == "tool.decided")
    await asyncio.sleep(1)
    run.send("message.inject", text="NEXT")
    cid = run.send("interrupt", reason="enough")
    assert await run.finish() == 0
    run.assert_complete()
    _keep("c21", run)
    return run, cid


async def test_c21_interrupt_kills_running_command_and_next_turn_works(tmp_path):
    run, cid = await c21_flow(tmp_path)
    names = run.names()
    result_at = next(i for i, e in enumerate(run.events) if e["event"] == "command.result" and e["id"] == cid)
    assert result_at < names.index("turn.ended")
    assert len(run.of("turn.started")) == 2
    assert any(r.get("type") == "result" and r.get("terminal_reason") == "aborted_tools" for r in run.transcript())
    await absent_after(run.path("late.txt"), 6)


async def test_c24_halt_kills_running_command(tmp_path):
    frame = write_frame(tmp_path, ["shell"])
    run = await ClaudeRun(str(tmp_path), scenario({"calls": [shell("sleep 5; echo late > late.txt")]}, {"text": "x"}),
                          ["--frame", frame]).start()
    await run.wait_event(lambda e: e["event"] == "tool.decided")
    await asyncio.sleep(1)
    run.send("halt", reason="stop")
    await run.finish()
    run.assert_complete()
    assert run.events[-1]["reason"] == "steer-halt"
    assert run.one("session.ended")["is_error"] is True
    await absent_after(run.path("late.txt"), 6)


# --- boundaries, steer, posture ------------------------------------------------------------------


async def test_c25_inject_starts_next_turn(tmp_path):
    frame = write_frame(tmp_path, ["shell"])
    run = await ClaudeRun(str(tmp_path), scenario({"calls": [shell("sleep 1")]}, {"text": "one"}, {"text": "two"}),
                          ["--frame", frame]).start()
    await run.wait_event(lambda e: e["event"] == "tool.decided")
    cid = run.send("message.inject", text="NOTE-1")
    assert await run.finish() == 0
    assert next(e for e in run.of("command.result") if e["id"] == cid)["outcome"] == {"result": "ok", "applies_at": "next turn"}
    names = run.names()
    inject_at = next(i for i, e in enumerate(run.events) if e["event"] == "injection" and e["origin"] == "message.inject")
    assert names.index("turn.ended") < inject_at < [i for i, n in enumerate(names) if n == "turn.started"][1]
    last = run.main_requests()[-1]["body"]["messages"]
    assert any("NOTE-1" in json.dumps(m) for m in last if m["role"] == "user")
    assert len([e for e in run.of("injection") if e["text"] == "NOTE-1"]) == 1


async def c26_flow(tmp_path) -> tuple[ClaudeRun, str]:
    frame = write_frame(tmp_path, ["shell"])
    run = await ClaudeRun(str(tmp_path), scenario({"calls": [shell("sleep 2")]}, {"text": "done"}),
                          ["--frame", frame]).start()
    await run.wait_event(lambda e: e["event"] == "tool.decided")
    await asyncio.sleep(0.5)
    cid = run.send("steer", text="STEER-1")
    assert await run.finish() == 0
    run.assert_complete()
    _keep("c26", run)
    return run, cid


async def test_c26_steer_lands_after_tool_result(tmp_path):
    run, cid = await c26_flow(tmp_path)
    assert next(e for e in run.of("command.result") if e["id"] == cid)["outcome"] == {"result": "ok", "applies_at": None}
    assert len(run.of("turn.ended")) == 1
    names = run.names()
    steer_at = next(i for i, e in enumerate(run.events) if e["event"] == "injection" and e["origin"] == "steer")
    assert names.index("tool.result") < steer_at
    second = run.main_requests()[1]["body"]["messages"]
    assert any(m["role"] == "system" and json.dumps(m).find("The user sent a new message while you were working:\\nSTEER-1") >= 0
               for m in second)


@pytest.mark.parametrize("case", ["c21", "c26"])
async def test_c34_live_transcripts_replay_through_the_translator(tmp_path, case):
    if case not in LIVE:
        await {"c21": c21_flow, "c26": c26_flow}[case](tmp_path)
    run, transcript = LIVE[case]
    raw_lines = transcript.splitlines(keepends=True)
    translator = Translator()
    held_lines = 0
    replayed: list[tuple] = []
    results = []
    for number, raw in enumerate(raw_lines, 1):
        record = json.loads(raw)
        was_started = translator.started
        items = translator.feed(raw, number)  # never raises
        if record.get("type") in CONTROL_TYPES:
            assert [i[0] for i in items] == ["control"], (number, items)
            continue
        if record.get("type") == "result":
            results.append(record)
        if not was_started and not items:
            held_lines += 1  # written right after session.started (held before system/init)
            continue
        mine = items
        if not was_started:  # the opening line: session_started, the held lines' items, turn_started
            assert items[0][0] == "session_started" and len(items) - 2 >= held_lines, items
            mine = [items[0], items[-1]]
        kinds = [i[0] for i in mine]
        assert kinds, f"line {number} ({record.get('type')}) yielded nothing"
        assert "opaque" not in kinds or kinds == ["opaque"], (number, kinds)
        replayed += items
    assert results, "the transcript holds no result"
    last = results[-1]
    ended = translator.last_result
    assert ended is not None and ended.total_cost_usd == last["total_cost_usd"]
    assert {m: (u.cost_usd, u.input_tokens, u.output_tokens) for m, u in ended.model_usage.items()} == {
        m: (u["costUSD"], u["inputTokens"], u["outputTokens"]) for m, u in last["modelUsage"].items()}
    # The live stream's session.ended carries the same cumulative values, never a sum.
    live = run.one("session.ended")
    assert live["total_cost_usd"] == last["total_cost_usd"]
    assert {m: u["cost_usd"] for m, u in live["model_usage"].items()} == {
        m: u["costUSD"] for m, u in last["modelUsage"].items()}
    if len(results) > 1:  # per-turn records carry cumulative cost: the last one is not a sum
        assert last["total_cost_usd"] > results[0]["total_cost_usd"]
        assert live["total_cost_usd"] != sum(r["total_cost_usd"] for r in results)
    # What the translator replays matches what the live run wrote.
    live_texts = [e["text"] for e in run.of("text")]
    assert [i[1].text for i in replayed if i[0] == "emit" and type(i[1]).__name__ == "Text"] == live_texts
    assert [i[1] for i in replayed if i[0] == "call"] == [e["call_id"] for e in run.of("tool.requested")]
    assert len([i for i in replayed if i[0] == "turn_ended"]) == len(run.of("turn.ended"))


async def test_c29_permission_set(tmp_path):
    run = await ask_run(tmp_path, scenario({"calls": [shell("echo two > two.txt")]}, {"text": "done"}))
    req = await run.wait_event(requested)
    ok = run.send("permission.set", posture="acceptEdits")
    await run.wait_event(lambda e: e["event"] == "command.result" and e["id"] == ok)
    # The refused postures are sent while the turn waits on the call: sent after its tool.result,
    # they raced the turn's end (Claude's last answer), after which any command is TOO_LATE.
    bypass = run.send("permission.set", posture="bypassPermissions")
    bogus = run.send("permission.set", posture="bogus")
    await run.wait_event(lambda e: e["event"] == "command.result" and e["id"] == bogus)
    run.send("tool.decide", call_id=req["call_id"], decision={"decision": "abstain"})
    await run.wait_event(lambda e: e["event"] == "tool.result")
    assert await run.finish() == 0
    results = {e["id"]: e["outcome"] for e in run.of("command.result")}
    assert results[ok] == {"result": "ok", "applies_at": None}
    assert os.path.exists(run.path("two.txt"))
    assert "bypass_not_launched" in results[bypass]["refused"]["reason"]
    assert results[bogus]["refused"]["code"] == "UNSUPPORTED_CONTROL"


async def test_c31_two_pending_calls_answered_out_of_order(tmp_path):
    run = await ask_run(tmp_path, scenario({"calls": [shell("echo a > a.txt"), shell("echo b > b.txt")]}, {"text": "done"}))
    first = await run.wait_event(requested)
    second = await run.wait_event(lambda e: requested(e) and e["call_id"] != first["call_id"])
    await asyncio.sleep(0.3)
    run.send("tool.decide", call_id=second["call_id"], decision={"decision": "deny", "reason": "no b"})
    run.send("tool.decide", call_id=first["call_id"], decision={"decision": "allow"})
    assert await run.finish() == 0
    assert {e["call_id"] for e in run.of("tool.decided")} == {first["call_id"], second["call_id"]}
    assert os.path.exists(run.path("a.txt"))
    await absent_after(run.path("b.txt"))


async def test_c32_project_settings_are_not_loaded(tmp_path):
    frame = write_frame(tmp_path, ["shell"])
    run = ClaudeRun(str(tmp_path), scenario({"calls": [shell(WRITE)]}, {"text": "done"}), ["--frame", frame])
    os.makedirs(os.path.join(run.work, ".claude"))
    with open(os.path.join(run.work, ".claude", "settings.json"), "w") as handle:
        json.dump({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "exit 2"}]}]}}, handle)
    await run.start()
    assert await run.finish() == 0
    assert os.path.exists(run.path("out.txt"))
    assert run.one("session.started")["mcp_servers"] == []


async def test_c33_loopback_credentials_never_reach_the_child(tmp_path):
    key = "sk-ant-api03-REALKEY-" + "x" * 40
    frame = write_frame(tmp_path, ["shell"])
    run = ClaudeRun(str(tmp_path), scenario({"calls": [shell("sleep 1; echo hi > out.txt")]}, {"text": "done"}),
                    ["--frame", frame, "--credentials", "loopback", "--model-endpoint", "@URL@"],
                    env={"ANTHROPIC_API_KEY": key})
    await run.start()
    await run.wait_event(lambda e: e["event"] == "tool.decided")
    metaharness = _children(run.proc.pid)[0]
    seen_env = seen_argv = b""
    for pid in _descendants(metaharness):
        try:
            seen_env += open(f"/proc/{pid}/environ", "rb").read()
            seen_argv += open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            pass
    scratch = [p for p in seen_env.split(b"\0") if p.startswith(b"CLAUDE_CONFIG_DIR=")]
    assert scratch, "no vendor environment was read"
    assert await run.finish() == 0
    assert key.encode() not in seen_env and key.encode() not in seen_argv
    assert b"ANTHROPIC_API_KEY=sk-ant-metaharness-run-" in seen_env
    root = os.path.dirname(scratch[0].split(b"=", 1)[1].decode())
    assert os.path.isdir(root) and any(files for _, _, files in os.walk(root)), "the scratch was not kept to inspect"
    for folder, _dirs, files in os.walk(root):
        for name in files:
            with open(os.path.join(folder, name), "rb") as handle:
                assert key.encode() not in handle.read(), os.path.join(folder, name)
    assert os.path.exists(run.path("out.txt"))
    # The upstream (the loopback) got the real key from the proxy.
    assert all(r["headers"].get("x-api-key") == key for r in run.main_requests())


async def test_c35_unrenderable_operation_fails_clearly(tmp_path):
    run, rc = await run_to_end(tmp_path, scenario({"calls": [{"op": "search", "input": {"pattern": "x", "path": "."}}]}), [])
    errors = [r for r in run.loopback_log() if r["status"] == 400]
    assert errors and "search" in errors[0]["error"] and "Bash" in errors[0]["error"]
    assert run.one("session.ended")["is_error"] is True
    assert run.of("tool.requested") == []


async def test_c36_read_then_edit_subjects_normalised(tmp_path):
    frame = write_frame(tmp_path, ["file.read", "file.edit"])
    run = ClaudeRun(str(tmp_path), scenario(
        {"calls": [{"op": "file.read", "input": {"path": "notes.txt"}}]},
        {"calls": [{"op": "file.edit", "input": {"path": "notes.txt", "old": "two", "new": "TWO"}}]},
        {"text": "done"}), ["--frame", frame])
    with open(run.path("notes.txt"), "w") as handle:
        handle.write("one\ntwo\nthree\n")
    await run.start()
    assert await run.finish() == 0
    reqs = run.of("tool.requested")
    assert [r["name"] for r in reqs] == ["Read", "Edit"]
    assert all(r["subjects"] == ["file:notes.txt"] and r["input"]["file_path"] == run.path("notes.txt") for r in reqs)
    assert open(run.path("notes.txt")).read() == "one\nTWO\nthree\n"


async def test_default_scratch_is_deleted_with_the_run(tmp_path):
    """Without an operator-chosen scratch base, the run's scratch homes die with it."""
    run, rc = await run_to_end(tmp_path, scenario({"text": "hi"}), [],
                               env={"METAHARNESS_SCRATCH_DIR": ""})  # empty = not chosen
    assert rc == 0
    seen = [p for p in run.events if p["event"] == "session.started"][0]["transcript"]["path"]
    assert seen and not os.path.exists(os.path.dirname(seen))


async def test_policy_mode_decides_claude_calls(tmp_path):
    """`--decisions policy` on the real binary: a deny rule holds (bypass mode included) and its reason,
    naming the rule, reaches the model; an allowed command runs."""
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"permissions": {"deny": ["Bash(echo gone*)"], "allow": ["Bash(echo ok*)"]}}))
    scen = scenario({"calls": [shell("echo ok > ok.txt")]}, {"calls": [shell("echo gone > gone.txt")]}, {"text": "done"})
    run, rc = await run_to_end(tmp_path, scen, ["--decisions", "policy", "--policy", str(policy),
                                                "--policy-scopes", "none", "--policy-mode", "bypass"])
    assert rc == 0
    decided = run.of("tool.decided")
    assert [(d["decision"]["decision"], d["decided_by"], d["seam"]) for d in decided] == [
        ("allow", "policy", "hook"), ("deny", "policy", "hook")]
    assert "Bash(echo gone*)" in decided[1]["decision"]["reason"]
    assert os.path.exists(run.path("ok.txt"))
    await absent_after(run.path("gone.txt"))
    results = tool_results_in(run.main_requests()[2])
    assert results[-1]["is_error"] is True and "Bash(echo gone*)" in result_text(results[-1])
