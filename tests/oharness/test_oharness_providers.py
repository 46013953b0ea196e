"""The anthropic and openai providers through their official SDKs, against the local
fake model server (`metaharness.loopback.LoopbackServer`) on 127.0.0.1 — never the internet."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from metaharness.protocol.scenario import parse_scenario
from oharness.model import ModelRequest, ProviderError, Stop, TextBlock, ToolCallBlock, ToolSpec, Usage

loopback = pytest.importorskip("metaharness.loopback.server")

SCENARIO = {"format": "metaharness.scenario/1", "turns": [
    {"text": "running it", "calls": [{"op": "shell", "input": {"command": "echo hi"}, "id": "c1"}]},
    {"text": "all done"},
]}
SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}


@pytest.fixture
async def server(tmp_path):
    srv = loopback.LoopbackServer(parse_scenario(json.dumps(SCENARIO)), workdir=str(tmp_path), stderr=None)
    url = await srv.start()
    yield srv, url
    await srv.stop()


async def collect(provider, request):
    return [event async for event in provider.stream(request)]


async def test_anthropic_streams_text_calls_and_usage(server, monkeypatch):
    srv, url = server
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    from oharness.providers.anthropic_provider import AnthropicProvider

    provider = AnthropicProvider("anthropic:claude-test", "claude-test")
    tools = [ToolSpec("Bash", "run", SCHEMA)]
    messages = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    events = await collect(provider, ModelRequest("sys", messages, tools))
    assert events[0] == TextBlock("running it")
    call = events[1]
    assert isinstance(call, ToolCallBlock) and call.id == "c1" and call.name == "Bash"
    assert call.input["command"] == "echo hi"
    usage = [e for e in events if isinstance(e, Usage)][0]
    assert usage.counts["output_tokens"] is not None and set(usage.counts) == {
        "input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"}
    assert events[-1] == Stop("tool_use")
    body = srv.main_requests()[0].body
    assert body["system"] == "sys" and body["stream"] is True and body["tools"][0]["name"] == "Bash"
    # the second request carries the assistant's call and the result, so the scenario moves on
    messages += [
        {"role": "assistant", "content": [{"type": "text", "text": "running it"},
                                          {"type": "tool_call", "id": "c1", "name": "Bash", "input": call.input}]},
        {"role": "user", "content": [{"type": "tool_result", "call_id": "c1", "content": "hi", "is_error": False}]},
    ]
    events = await collect(provider, ModelRequest("sys", messages, tools))
    assert events[0] == TextBlock("all done") and events[-1] == Stop("end_turn")
    sent = srv.main_requests()[1].body["messages"]
    assert sent[2]["content"][0] == {"type": "tool_result", "tool_use_id": "c1", "content": "hi", "is_error": False}


async def test_openai_responses_streams_text_calls_and_usage(server, monkeypatch):
    srv, url = server
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
    from oharness.providers.openai_provider import OpenAIProvider

    provider = OpenAIProvider("openai:gpt-5", "gpt-5")
    tools = [ToolSpec("exec_command", "run", {"type": "object", "properties": {"cmd": {"type": "string"}},
                                                "required": ["cmd"]})]
    messages = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
    events = await collect(provider, ModelRequest("sys", messages, tools))
    assert events[0] == TextBlock("running it")
    call = events[1]
    assert isinstance(call, ToolCallBlock) and call.name == "exec_command" and call.input == {"cmd": "echo hi"}
    assert any(isinstance(e, Usage) for e in events)
    assert events[-1] == Stop("tool_use")
    body = srv.main_requests()[0].body
    assert body["instructions"] == "sys" and body["store"] is False and body["tools"][0]["name"] == "exec_command"
    messages += [
        {"role": "assistant", "content": [{"type": "text", "text": "running it"},
                                          {"type": "tool_call", "id": call.id, "name": call.name, "input": call.input}]},
        {"role": "user", "content": [{"type": "tool_result", "call_id": call.id, "content": "hi", "is_error": False}]},
    ]
    events = await collect(provider, ModelRequest("sys", messages, tools))
    assert events[0] == TextBlock("all done") and events[-1] == Stop("end_turn")
    items = srv.main_requests()[1].body["input"]
    assert {"type": "function_call_output", "call_id": call.id, "output": "hi"} in items


async def test_provider_errors_are_one_sentence(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    from oharness.providers.anthropic_provider import AnthropicProvider

    provider = AnthropicProvider("anthropic:m", "m")
    with pytest.raises(ProviderError, match="the anthropic request failed"):
        await collect(provider, ModelRequest("s", [{"role": "user", "content": [{"type": "text", "text": "x"}]}], []))


async def test_stdio_child_on_the_anthropic_provider_reports_usage(server, tmp_path):
    """The whole child over a real SDK: text, usage record, summed usage in `result`."""
    srv, url = server
    env = {**os.environ, "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": url, "HOME": str(tmp_path)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "oharness", "--stdio", "--model", "anthropic:claude-test", "--cwd", str(tmp_path),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )
    # The loopback renders oharness's own `bash` for turn 0's call, so the child runs it: text,
    # usage per model response, the call and its result, and the usage summed in `result`.
    # (The provider's error path, end to end, is tests/run/test_model_failures.py.)
    process.stdin.write(b'{"type":"user","text":"go"}\n')
    process.stdin.close()
    out, err = await asyncio.wait_for(process.communicate(), 30)
    records = [json.loads(line) for line in out.decode().splitlines()]
    assert process.returncode == 0, err.decode()
    kinds = [r["type"] for r in records]
    assert kinds == ["init", "turn_start", "text", "usage", "tool_call", "tool_result", "text", "usage",
                     "turn_end", "result"]
    usages = [r for r in records if r["type"] == "usage"]
    result = records[-1]
    assert not result["is_error"] and result["subtype"] == "success"
    assert result["usage"]["input_tokens"] == sum(u["usage"]["input_tokens"] for u in usages) > 0
    assert result["usage"]["output_tokens"] == sum(u["usage"]["output_tokens"] for u in usages) > 0


async def test_stdio_child_text_turn_on_openai(tmp_path):
    srv = loopback.LoopbackServer(parse_scenario(json.dumps(
        {"format": "metaharness.scenario/1", "turns": [{"text": "hello from the fake model"}]})), stderr=None)
    url = await srv.start()
    try:
        env = {**os.environ, "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": url + "/v1", "HOME": str(tmp_path)}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "oharness", "--stdio", "--model", "openai:gpt-5", "--cwd", str(tmp_path),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
        )
        process.stdin.write(b'{"type":"frame","text":"Frame f00d."}\n{"type":"user","text":"go"}\n')
        process.stdin.close()
        out, err = await asyncio.wait_for(process.communicate(), 30)
    finally:
        await srv.stop()
    records = [json.loads(line) for line in out.decode().splitlines()]
    assert process.returncode == 0, err.decode()
    assert [r["type"] for r in records] == ["init", "turn_start", "text", "usage", "turn_end", "result"]
    assert records[2]["text"] == "hello from the fake model"
    assert records[3]["model"] == "openai:gpt-5" and records[3]["usage"]["output_tokens"] is not None
    assert records[5]["usage"]["output_tokens"] == records[3]["usage"]["output_tokens"]
    assert records[5]["total_cost_usd"] is None
    assert srv.main_requests()[0].body["instructions"].endswith("Frame f00d.")
