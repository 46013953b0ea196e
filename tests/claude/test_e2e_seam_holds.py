"""Issue 19 on the real Claude Code: only the embedder decides, and an interrupt on a
pending call stops the turn before any further model request.

The adversary is tests/fixtures/adversary/attack.py, started detached by an allowed
Bash call; it writes forged hook answers, permission-mode changes and metaharness
commands into every fd of the run's processes it can find while the next call waits
for a decision the embedder never sends. It touches only this run's processes."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from .support import ClaudeRun, scenario, shell

pytestmark = pytest.mark.timeout(120)

ATTACK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "adversary", "attack.py")
ASK = ["--decisions", "ask"]


def requested(e):
    return e["event"] == "tool.requested" and e["decision_required"]


async def test_interrupt_on_a_pending_call_makes_no_further_model_request(tmp_path):
    run = await ClaudeRun(str(tmp_path), scenario({"calls": [shell("echo hi > out.txt")]}, {"text": "SECOND"}),
                          ASK).start()
    await run.wait_event(requested)
    before = len(run.main_requests())
    cid = run.send("interrupt", reason="stop")
    assert await run.finish() == 0
    run.assert_complete()
    await asyncio.sleep(1.0)
    assert len(run.main_requests()) == before, "claude asked the model again after the interrupt"
    assert not any(e["event"] == "text" and "SECOND" in e.get("text", "") for e in run.events)
    names = run.names()
    result = next(i for i, e in enumerate(run.events) if e["event"] == "command.result" and e["id"] == cid)
    assert result < names.index("turn.ended")


async def test_a_halt_on_a_pending_call_makes_no_further_model_request(tmp_path):
    # A stop abandons the pending call like an interrupt: the interrupt reaches Claude Code
    # before the call's deny, so it never hands the deny to the model (it did, under load).
    run = await ClaudeRun(str(tmp_path), scenario({"calls": [shell("echo hi > out.txt")]}, {"text": "SECOND"}),
                          ASK).start()
    await run.wait_event(requested)
    before = len(run.main_requests())
    run.send("halt", reason="stop")
    await run.finish()
    run.assert_complete()
    await asyncio.sleep(1.0)
    assert len(run.main_requests()) == before, "claude asked the model again after the halt"
    assert not any(e["event"] == "text" and "SECOND" in e.get("text", "") for e in run.events)
    assert not os.path.exists(run.path("out.txt"))
    assert [d["decision"]["decision"] for d in run.of("tool.decided")] == ["deny"]


async def test_the_agents_shell_cannot_decide_its_next_call(tmp_path):
    report = tmp_path / "report.json"
    pid_file = tmp_path / "mh.pid"
    host_ns = os.readlink("/proc/self/ns/pid")
    attack = (f"setsid {sys.executable} {ATTACK} {report} 1.5 victim {pid_file} '{host_ns}' "
              f"</dev/null >{tmp_path}/attack.log 2>&1 &")
    scen = scenario({"calls": [shell(attack, id="attack")]},
                    {"calls": [shell("echo pwned > PWNED", id="victim")]}, {"text": "done"})
    run = await ClaudeRun(str(tmp_path), scen, ASK).start()
    pid_file.write_text(str(run.proc.pid))  # the run's top process: the attack stays below it
    first = await run.wait_event(requested)
    run.send("tool.decide", call_id=first["call_id"], decision={"decision": "allow"})
    second = await run.wait_event(lambda e: requested(e) and e["call_id"] != first["call_id"], timeout=60)
    assert await run.finish() == 0
    run.assert_complete()
    decided = {e["call_id"]: e for e in run.of("tool.decided")}
    assert decided[second["call_id"]]["decided_by"] == "deadline"  # nobody but the deadline answered it
    assert decided[second["call_id"]]["decision"]["decision"] == "deny"
    assert not os.path.exists(run.path("PWNED"))
    assert not [e for e in run.events if e["event"] == "warning" and e["code"] == "UNDECIDED_CALL_RAN"]
    assert not [e for e in run.of("command.result") if e["id"].startswith("forged")]
    for _ in range(50):
        if report.exists():
            break
        await asyncio.sleep(0.1)
    found = json.loads(report.read_text())
    assert (found["refused"] or found["fds_hidden"]) and set(found["refused"].values()) <= {"ENXIO"}, found
    assert not [k for k, t in found["opened_write"].items() if t.startswith("socket:")], found
    assert not [k for k, t in found["stole"].items() if t.startswith("socket:")], found


PROBE = ("import os, urllib.request as u\n"
         "for method, path in [('DELETE', '/v1/files/file-1'), ('POST', '/v1/messages/batches'), ('GET', '/v1/organizations/me')]:\n"
         "    r = u.Request(os.environ['ANTHROPIC_BASE_URL'] + path, method=method, data=b'{}' if method == 'POST' else None,\n"
         "                  headers={'x-api-key': os.environ['ANTHROPIC_API_KEY']})\n"
         "    try:\n"
         "        print(method, path, u.urlopen(r).status)\n"
         "    except Exception as e:\n"
         "        print(method, path, getattr(e, 'code', e))\n")


async def test_the_placeholder_key_reaches_only_the_model_endpoints(tmp_path):
    """--credentials loopback: the agent's shell reads the placeholder from its environment
    and calls other endpoints with it; each is refused 403, never forwarded, and named in a
    PROXY_REFUSED warning."""
    key = "sk-ant-api03-REALKEY-" + "y" * 40
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    run = ClaudeRun(str(tmp_path), scenario({"calls": [shell(f"{sys.executable} {probe} > probe.txt")]}, {"text": "done"}),
                    [*ASK, "--credentials", "loopback", "--model-endpoint", "@URL@"], env={"ANTHROPIC_API_KEY": key})
    await run.start()
    req = await run.wait_event(requested)
    run.send("tool.decide", call_id=req["call_id"], decision={"decision": "allow"})
    assert await run.finish() == 0
    run.assert_complete()
    answers = open(run.path("probe.txt")).read().split("\n")
    assert answers[:3] == ["DELETE /v1/files/file-1 403", "POST /v1/messages/batches 403",
                           "GET /v1/organizations/me 403"], answers
    warnings = [e["message"] for e in run.events if e["event"] == "warning" and e["code"] == "PROXY_REFUSED"]
    assert len(warnings) == 3 and "DELETE /v1/files/file-1" in warnings[0]
    assert all("/v1/messages" == r["path"].split("?")[0] for r in run.loopback_log() if r["path"] != "/api/hello")


def _every_command(tag: str) -> list[tuple[str, bytes]]:
    def line(cid, name, **payload):
        return cid, json.dumps({"format": "metaharness.command/1", "id": cid, "command": name, **payload}).encode()
    return [
        line(f"{tag}-decide", "tool.decide", call_id="nope", decision={"decision": "allow"}),
        line(f"{tag}-frame", "frame.set", frame={"bad": "frame"}),
        line(f"{tag}-inject", "message.inject", text="hello"),
        line(f"{tag}-steer", "steer", text="left"),
        line(f"{tag}-posture", "permission.set", posture="plan"),
        line(f"{tag}-interrupt", "interrupt", reason="stop"),
        (f"{tag}-malformed", json.dumps({"format": "metaharness.command/1", "id": f"{tag}-malformed",
                                          "command": "halt"}).encode()),
    ]


async def test_every_command_written_before_the_child_exists_is_answered(tmp_path):
    """Item 4 on the real Claude Code: commands written before the child exists are held and
    carried (permission.set) or refused by name — each gets exactly one command.result. (The
    other phases, the child's death included: tests/claude/test_e2e_claude_phases.py.)"""
    run = ClaudeRun(str(tmp_path), scenario({"calls": [shell("echo hi > out.txt")]}, {"text": "done"}), ASK)
    await run.start()
    # (an early interrupt held behind the held permission.set would stop the first turn: left out)
    early = [item for item in _every_command("early") if item[0] != "early-interrupt"]
    for _cid, raw in early:
        run.write_raw(raw)
    req = await run.wait_event(requested)
    run.send("tool.decide", call_id=req["call_id"], decision={"decision": "allow"})
    assert await run.finish() == 0
    run.assert_complete()
    results = run.of("command.result")
    assert sorted(r["id"] for r in results if r["id"].startswith("early")) == sorted(cid for cid, _ in early)
    by_id = {r["id"]: r["outcome"] for r in results}
    assert by_id["early-posture"] == {"result": "ok", "applies_at": None}  # held until claude existed
    assert by_id["early-steer"]["refused"]["code"] == "TOO_LATE"
    assert by_id["early-decide"]["refused"]["code"] == "UNKNOWN_CALL"
    assert by_id["early-frame"]["refused"]["code"] == "MALFORMED"
    assert by_id["early-inject"] == {"result": "ok", "applies_at": "next turn"}
