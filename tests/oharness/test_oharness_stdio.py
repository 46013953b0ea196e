"""`oharness --stdio` end to end, as a subprocess driven over stdin/stdout."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

TIMEOUT = 20


class Child:
    def __init__(self, process):
        self.p = process
        self.records = []

    @classmethod
    async def start(cls, tmp_path, turns, *extra, env=None):
        script = tmp_path / "scenario.json"
        script.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": turns}))
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "oharness", "--stdio", "--script", str(script), "--cwd", str(tmp_path), *extra,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        return cls(process)

    def send(self, **record):
        self.p.stdin.write((json.dumps(record) + "\n").encode())

    async def next(self):
        line = await asyncio.wait_for(self.p.stdout.readline(), TIMEOUT)
        assert line, "the child closed stdout early: " + (await self.p.stderr.read()).decode()
        record = json.loads(line)
        self.records.append(record)
        return record

    async def until(self, kind):
        while (record := await self.next())["type"] != kind:
            pass
        return record

    async def finish(self):
        self.p.stdin.close()
        out, _ = await asyncio.wait_for(self.p.communicate(), TIMEOUT)
        self.records += [json.loads(line) for line in out.decode().splitlines()]
        return self.p.returncode


async def test_the_whole_sequence(tmp_path):
    child = await Child.start(tmp_path, [
        {"text": "writing", "calls": [{"op": "shell", "input": {"command": "echo hi > out.txt; echo ok"}}]},
        {"text": "done"},
    ])
    init = await child.next()
    assert init["type"] == "init"
    assert list(init) == ["type", "session_id", "version", "model", "cwd", "tools", "permission_mode", "skills",
                          "mcp_servers", "transcript"]
    assert init["tools"][:6] == ["read", "write", "edit", "glob", "grep", "bash"]
    assert init["cwd"] == str(tmp_path) and init["model"] == "scripted:default" and init["transcript"] is None
    child.send(type="user", text="go")
    assert await child.next() == {"type": "turn_start", "turn_id": "turn_1"}
    assert await child.next() == {"type": "text", "text": "writing", "request_id": "req_1"}
    assert await child.next() == {"type": "usage", "request_id": "req_1", "model": "scripted:default",
                                  "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0,
                                            "cache_creation_input_tokens": 0}}
    call = await child.next()
    assert call == {"type": "tool_call", "call_id": "call_0_0", "name": "bash",
                    "input": {"command": "echo hi > out.txt; echo ok"}, "cwd": str(tmp_path)}
    await asyncio.sleep(0.2)
    assert not (tmp_path / "out.txt").exists(), "the call ran before its decision"
    child.send(type="decision", call_id="call_0_0", decision={"decision": "allow"}, decided_by="embedder")
    result = await child.next()
    assert result == {"type": "tool_result", "call_id": "call_0_0", "is_error": False, "exit_code": 0,
                      "content": "ok\n", "bytes": 3}
    assert (tmp_path / "out.txt").read_text() == "hi\n"
    assert (await child.next())["text"] == "done"
    assert (await child.next())["type"] == "usage"
    assert await child.next() == {"type": "turn_end", "stop_reason": "end_turn", "error": None}
    assert await child.finish() == 0
    final = child.records[-1]
    assert final["type"] == "result" and final["subtype"] == "success" and not final["is_error"]
    assert final["final_text"] == "done" and final["num_turns"] == 1 and final["total_cost_usd"] is None
    assert final["usage"] == {"input_tokens": 20, "output_tokens": 10, "cache_read_input_tokens": 0,
                              "cache_creation_input_tokens": 0}  # the scripted model's default usage, twice


async def test_deny_reason_reaches_the_model_as_an_error_result(tmp_path):
    child = await Child.start(tmp_path, [
        {"calls": [{"op": "file.write", "input": {"path": "w.txt", "content": "x"}}]},
        {"text": "then read"},
    ])
    await child.until("init")
    child.send(type="user", text="go")
    call = await child.until("tool_call")
    child.send(type="decision", call_id=call["call_id"], decided_by="frame",
               decision={"decision": "deny", "reason": "file.write is not admitted by the frame"})
    result = await child.next()
    assert result["is_error"] and result["content"] == "file.write is not admitted by the frame"
    assert result["exit_code"] is None
    assert not (tmp_path / "w.txt").exists()
    await child.until("turn_end")
    assert await child.finish() == 0


async def test_interrupt_kills_the_running_tool(tmp_path):
    child = await Child.start(tmp_path, [
        {"calls": [{"op": "shell", "input": {"command": "sleep 30"}}]},
        {"text": "second turn answer"},
    ])
    await child.until("init")
    child.send(type="user", text="go")
    call = await child.until("tool_call")
    child.send(type="decision", call_id=call["call_id"], decision={"decision": "allow"})
    await asyncio.sleep(0.3)
    child.send(type="interrupt")
    result = await child.next()
    assert result["type"] == "tool_result" and result["is_error"]
    assert await child.next() == {"type": "turn_end", "stop_reason": "interrupted", "error": None}
    child.send(type="user", text="again")
    await child.until("turn_start")
    assert (await child.next())["text"] == "second turn answer"
    await child.until("turn_end")
    assert await child.finish() == 0
    assert child.records[-1]["num_turns"] == 2


async def test_interrupt_during_a_model_request_and_an_undecided_call(tmp_path):
    child = await Child.start(tmp_path, [
        {"text": "slow", "delay_ms": 5000},
        {"calls": [{"op": "shell", "input": {"command": "true"}}]},
        {"text": "fine"},
    ])
    await child.until("init")
    child.send(type="user", text="go")
    await child.until("turn_start")
    await asyncio.sleep(0.2)
    child.send(type="interrupt")
    assert await child.next() == {"type": "turn_end", "stop_reason": "interrupted", "error": None}
    child.send(type="user", text="next")  # the abandoned request still counted: turn 1 answers
    await child.until("tool_call")
    child.send(type="interrupt")  # undecided: no result, just the end of the turn
    assert await child.next() == {"type": "turn_end", "stop_reason": "interrupted", "error": None}
    assert await child.finish() == 0


async def test_steer_is_echoed_as_an_injection(tmp_path):
    child = await Child.start(tmp_path, [
        {"calls": [{"op": "task.todo", "input": {"items": ["a"]}}]},
        {"text": "steered"},
    ])
    await child.until("init")
    child.send(type="steer", text="ignored: no turn runs")
    child.send(type="user", text="go")
    call = await child.until("tool_call")
    child.send(type="steer", text="prefer small diffs")
    child.send(type="decision", call_id=call["call_id"], decision={"decision": "allow"})
    await child.until("tool_result")
    assert await child.next() == {"type": "injection", "text": "prefer small diffs", "origin": "steer"}
    assert (await child.next())["text"] == "steered"
    assert await child.finish() == 0
    assert not any(r.get("text") == "ignored: no turn runs" for r in child.records)


async def test_set_mode_frame_and_bad_lines(tmp_path):
    child = await Child.start(tmp_path, [{"text": "hello"}], "--mode", "plan")
    init = await child.until("init")
    assert init["permission_mode"] == "plan"
    child.send(type="set_mode", mode="nonsense")
    assert "set_mode ignored" in (await child.next())["message"]
    child.p.stdin.write(b"not json\n")
    assert (await child.next())["type"] == "error"
    child.send(type="decision", call_id="nobody", decision={"decision": "allow"})
    assert "no call with that id" in (await child.next())["message"]
    child.send(type="set_mode", mode="accept-edits")
    child.send(type="frame", text="Frame abc.")
    child.send(type="user", text="go")
    await child.until("turn_end")
    assert await child.finish() == 0
    assert [r["type"] for r in child.records].count("error") == 3


async def test_eof_denies_a_call_waiting_for_its_decision(tmp_path):
    child = await Child.start(tmp_path, [{"calls": [{"op": "shell", "input": {"command": "touch x"}}]}])
    await child.until("init")
    child.send(type="user", text="go")
    await child.until("tool_call")
    assert await child.finish() == 0
    result = [r for r in child.records if r["type"] == "tool_result"][0]
    assert result["is_error"] and "stdin closed" in result["content"]
    assert not (tmp_path / "x").exists()
    assert child.records[-1]["type"] == "result"


async def test_start_refusal_names_the_turn(tmp_path):
    child = await Child.start(tmp_path, [
        {"text": "a"}, {"calls": [{"op": "mcp.call", "input": {"server": "s", "tool": "t", "arguments": {}}}]},
    ])
    assert await child.finish() == 2
    assert len(child.records) == 1 and child.records[0]["type"] == "error"
    assert "turn 1, call 0" in child.records[0]["message"]


async def test_session_dir_gets_a_transcript(tmp_path):
    session = tmp_path / "session"
    child = await Child.start(tmp_path, [{"text": "hi"}], "--session-dir", str(session))
    init = await child.until("init")
    assert init["transcript"] == str(session / "transcript.jsonl")
    child.send(type="user", text="go")
    await child.until("turn_end")
    assert await child.finish() == 0
    lines = (session / "transcript.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["type"] == "init" and json.loads(lines[-1])["type"] == "result"
