"""The `chat` provider (Chat Completions through the official openai SDK) against the local fake
model server on 127.0.0.1: text, tool calls assembled from streamed deltas, usage, and the
conversation sent back as Chat Completions messages."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from metaharness.loopback.server import LoopbackServer
from metaharness.protocol.scenario import parse_scenario
from oharness.model import ModelRequest, ProviderError, Stop, TextBlock, ToolCallBlock, ToolSpec, Usage
from oharness.providers import make_provider

SCENARIO = {"format": "metaharness.scenario/1", "turns": [
    {"text": "running it", "calls": [{"op": "shell", "input": {"command": "echo hi"}, "id": "c1"},
                                     {"op": "file.read", "input": {"path": "a.txt"}, "id": "c2"}]},
    {"text": "all done"},
]}
BASH = ToolSpec("bash", "run", {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})
READ = ToolSpec("read", "read", {"type": "object", "properties": {"filePath": {"type": "string"}}, "required": ["filePath"]})


@pytest.fixture
async def server(tmp_path, monkeypatch):
    srv = LoopbackServer(parse_scenario(json.dumps(SCENARIO)), workdir=str(tmp_path), stderr=None)
    url = await srv.start()
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
    yield srv
    await srv.stop()


async def collect(provider, request):
    return [event async for event in provider.stream(request)]


async def test_chat_streams_text_two_calls_and_usage(server, tmp_path):
    provider = make_provider("chat:fake-model")
    messages = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    events = await collect(provider, ModelRequest("sys", messages, [BASH, READ]))
    assert events[0] == TextBlock("running it")
    first, second = events[1], events[2]
    assert isinstance(first, ToolCallBlock) and (first.id, first.name, first.input) == ("c1", "bash", {"command": "echo hi"})
    assert (second.id, second.name, second.input) == ("c2", "read", {"filePath": str(tmp_path / "a.txt")})
    usage = next(e for e in events if isinstance(e, Usage))
    assert usage.counts["input_tokens"] == 10 and usage.counts["output_tokens"] == 5
    assert events[-1] == Stop("tool_use")
    body = server.main_requests()[0].body
    assert body["stream"] is True and body["messages"][0] == {"role": "system", "content": "sys"}
    assert [t["function"]["name"] for t in body["tools"]] == ["bash", "read"]
    messages += [
        {"role": "assistant", "content": [{"type": "text", "text": "running it"},
                                          {"type": "tool_call", "id": "c1", "name": "bash", "input": first.input},
                                          {"type": "tool_call", "id": "c2", "name": "read", "input": second.input}]},
        {"role": "user", "content": [{"type": "tool_result", "call_id": "c1", "content": "hi", "is_error": False},
                                     {"type": "tool_result", "call_id": "c2", "content": "nope", "is_error": True}]},
    ]
    events = await collect(provider, ModelRequest("sys", messages, [BASH, READ]))
    assert events[0] == TextBlock("all done") and events[-1] == Stop("end_turn")
    sent = server.main_requests()[1].body["messages"]
    assert sent[2]["role"] == "assistant" and [c["id"] for c in sent[2]["tool_calls"]] == ["c1", "c2"]
    assert sent[3:] == [{"role": "tool", "tool_call_id": "c1", "content": "hi"},
                        {"role": "tool", "tool_call_id": "c2", "content": "[error] nope"}]


async def test_chat_needs_a_key_and_reports_a_failed_request(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="needs OPENAI_API_KEY"):
        make_provider("chat:m")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    with pytest.raises(ProviderError, match="the openai request failed: connection refused"):
        await collect(make_provider("chat:m"), ModelRequest("s", [{"role": "user", "content": [{"type": "text", "text": "x"}]}], []))


async def test_stdio_child_text_turn_on_chat(tmp_path):
    srv = LoopbackServer(parse_scenario(json.dumps(
        {"format": "metaharness.scenario/1", "turns": [{"text": "hello over chat completions"}]})), stderr=None)
    url = await srv.start()
    try:
        env = {**os.environ, "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": url + "/v1", "HOME": str(tmp_path)}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "oharness", "--stdio", "--model", "chat:local-model", "--cwd", str(tmp_path),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
        process.stdin.write(b'{"type":"user","text":"go"}\n')
        process.stdin.close()
        out, err = await asyncio.wait_for(process.communicate(), 30)
    finally:
        await srv.stop()
    records = [json.loads(line) for line in out.decode().splitlines()]
    assert process.returncode == 0, err.decode()
    assert [r["type"] for r in records] == ["init", "turn_start", "text", "usage", "turn_end", "result"]
    assert records[2]["text"] == "hello over chat completions"
    assert srv.main_requests()[0].path == "/v1/chat/completions"
