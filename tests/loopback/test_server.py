"""LoopbackServer driven by the official anthropic and openai SDKs (the vendor rule “metaharness loopback — the local fake model server”, checklist L01/L02)."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import time

import httpx
import pytest

from metaharness.loopback import LoggedRequest, LoopbackServer
from metaharness.protocol.scenario import FINAL_TEXT

from loopback_support import CLAUDE_TOOLS, CODEX_TOOLS, scenario, sdks

USER = [{"role": "user", "content": "do the task"}]


def _anthropic(url: str, key: str = "placeholder"):
    anthropic, _ = sdks()
    return anthropic.AsyncAnthropic(base_url=url, api_key=key, max_retries=0)


def _openai(url: str, key: str = "placeholder"):
    _, openai = sdks()
    return openai.AsyncOpenAI(base_url=url + "/v1", api_key=key, max_retries=0)


async def _claude_turn(url: str, messages: list, tools=CLAUDE_TOOLS, **kw):
    async with _anthropic(url, **kw).messages.stream(model="claude-opus-5-5", max_tokens=1000, messages=messages,
                                                     tools=tools) as stream:
        return await stream.get_final_message()


async def _codex_turn(url: str, input_items, tools=CODEX_TOOLS, **kw):
    async with _openai(url, **kw).responses.stream(model="gpt-5.5", input=input_items, tools=tools) as stream:
        return await stream.get_final_response()


async def test_anthropic_sdk_reassembles_text_and_tool_use(tmp_path):
    server = LoopbackServer(scenario(
        {"text": "I will write.", "calls": [{"op": "shell", "input": {"command": "echo hi > out.txt"}, "id": "toolu_fixed1"},
                                           {"op": "file.write", "input": {"path": "w.txt", "content": "a\nb\n"}}]},
        {"text": "done"}), workdir=str(tmp_path), stderr=None)
    async with server:
        message = await _claude_turn(server.url, USER)
        assert message.stop_reason == "tool_use"
        assert [block.type for block in message.content] == ["text", "tool_use", "tool_use"]
        assert message.content[0].text == "I will write."
        bash, write = message.content[1], message.content[2]
        assert (bash.id, bash.name, bash.input) == ("toolu_fixed1", "Bash", {"command": "echo hi > out.txt", "description": "scenario call"})
        assert write.name == "Write" and write.input == {"file_path": str(tmp_path / "w.txt"), "content": "a\nb\n"}
        assert write.id.startswith("toolu_")
        # The follow-up carries the assistant response and tool results: turn 1 answers.
        history = [*USER, {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in message.content]},
                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": bash.id, "content": "ok"},
                                                {"type": "tool_result", "tool_use_id": write.id, "content": "ok"}]}]
        second = await _claude_turn(server.url, history)
        assert second.stop_reason == "end_turn" and second.content[0].text == "done"
        third = await _claude_turn(server.url, [*history, {"role": "assistant", "content": "done"},
                                                {"role": "user", "content": "more"}])
        assert third.content[0].text == FINAL_TEXT and third.stop_reason == "end_turn"
    assert [(entry.turn, entry.main, entry.status) for entry in server.requests] == [(0, True, 200), (1, True, 200), (2, True, 200)]


async def test_anthropic_side_endpoints_and_system_role_message(tmp_path):
    server = LoopbackServer(scenario({"text": "hello"}), workdir=str(tmp_path), stderr=None)
    async with server:
        client = _anthropic(server.url)
        counted = await client.messages.count_tokens(model="m", messages=USER)
        assert counted.input_tokens > 0
        async with httpx.AsyncClient() as http:
            hello = await http.head(server.url + "/api/hello")
            assert hello.status_code == 200 and hello.content == b""
            models = await http.get(server.url + "/v1/models")
            assert models.json() == {"object": "list", "data": []}
            missing = await http.get(server.url + "/nowhere")
            assert missing.status_code == 404 and "no route" in missing.json()["error"]["message"]
        # Claude Code puts a role:"system" message after the first user message; it must be accepted.
        raw = await httpx.AsyncClient().post(server.url + "/v1/messages?beta=true", json={
            "model": "m", "max_tokens": 10, "stream": False, "tools": CLAUDE_TOOLS,
            "messages": [*USER, {"role": "system", "content": "environment"}]})
        assert raw.status_code == 200
        assert raw.json()["content"] == [{"type": "text", "text": "hello"}]
    assert [entry.path for entry in server.requests] == [
        "/v1/messages/count_tokens", "/api/hello", "/v1/models", "/nowhere", "/v1/messages?beta=true"]
    assert [entry.main for entry in server.requests] == [False, False, False, False, True]


async def test_openai_sdk_streams_function_and_custom_tool_calls(tmp_path):
    server = LoopbackServer(scenario(
        {"text": "on it", "calls": [{"op": "shell", "input": {"command": "echo hi > out.txt"}, "id": "call_fixed"},
                                   {"op": "file.write", "input": {"path": "w.txt", "content": "hi\nthere"}}]},
        {"text": "done"}), workdir=str(tmp_path), stderr=None)
    async with server:
        response = await _codex_turn(server.url, "hi")
        kinds = [item.type for item in response.output]
        assert kinds == ["message", "function_call", "custom_tool_call"]
        assert response.output[0].content[0].text == "on it"
        call = response.output[1]
        assert (call.name, call.call_id, json.loads(call.arguments)) == ("exec_command", "call_fixed", {"cmd": "echo hi > out.txt"})
        patch = response.output[2]
        assert patch.name == "apply_patch"
        assert patch.input == "*** Begin Patch\n*** Add File: w.txt\n+hi\n+there\n*** End Patch\n"
        assert response.usage is not None and response.usage.total_tokens == 15
        history = [{"role": "user", "content": "hi"},
                   *[item.model_dump(exclude_none=True) for item in response.output],
                   {"type": "function_call_output", "call_id": "call_fixed", "output": "ok"},
                   {"type": "custom_tool_call_output", "call_id": patch.call_id, "output": "ok"}]
        second = await _codex_turn(server.url, history)
        assert second.output_text == "done"
    assert [entry.turn for entry in server.requests] == [0, 1]
    assert server.requests[0].client == "openai"


async def test_openai_sse_sequence_numbers_and_minimal_mode(tmp_path):
    for minimal, expected in ((False, None), (True, ["response.created", "response.output_item.done",
                                                     "response.output_item.done", "response.completed"])):
        server = LoopbackServer(scenario({"text": "t", "calls": [{"op": "shell", "input": {"command": "ls"}}]}),
                                workdir=str(tmp_path), minimal=minimal, stderr=None)
        async with server:
            async with httpx.AsyncClient() as http:
                reply = await http.post(server.url + "/v1/responses",
                                        json={"model": "gpt-5.5", "stream": True, "input": "hi", "tools": CODEX_TOOLS})
        events = [json.loads(line[6:]) for line in reply.text.splitlines() if line.startswith("data: ")]
        assert [event["sequence_number"] for event in events] == list(range(len(events)))
        types = [event["type"] for event in events]
        if expected is not None:
            assert types == expected
        else:
            assert types[:2] == ["response.created", "response.in_progress"]
            assert "response.function_call_arguments.done" in types and "response.output_text.delta" in types
        assert events[-1]["response"]["output"][1]["arguments"] == '{"cmd":"ls"}'


async def test_side_requests_and_retries_never_advance_the_scenario(tmp_path):
    server = LoopbackServer(scenario({"text": "first"}, {"text": "second"}), workdir=str(tmp_path), stderr=None)
    async with server:
        side = await _claude_turn(server.url, USER, tools=[])
        assert side.content[0].text == "ok"
        codex_side = await _codex_turn(server.url, "title this", tools=[])
        assert codex_side.output_text == "ok"
        for _ in range(2):  # a retry of the same request gets the same turn
            assert (await _claude_turn(server.url, USER)).content[0].text == "first"
            assert (await _codex_turn(server.url, "hi")).output_text == "first"
    assert [(entry.main, entry.turn) for entry in server.requests] == [
        (False, None), (False, None), (True, 0), (True, 0), (True, 0), (True, 0)]


async def test_responses_turn_counts_runs_of_model_items(tmp_path):
    server = LoopbackServer(scenario({"text": "t0"}, {"text": "t1"}, {"text": "t2"}), workdir=str(tmp_path), stderr=None)
    history = [
        {"type": "message", "role": "developer", "content": "sys"},
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]},
        {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "p"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "ok"},
    ]
    async with server:
        async with httpx.AsyncClient() as http:
            reply = await http.post(server.url + "/v1/responses",
                                    json={"model": "gpt-5.5", "stream": False, "input": history, "tools": CODEX_TOOLS})
    assert reply.json()["output"][0]["content"][0]["text"] == "t2"
    assert server.requests[0].turn == 2


async def test_call_without_an_offered_tool_fails_clearly(tmp_path):
    anthropic, openai = sdks()
    stderr = io.StringIO()
    server = LoopbackServer(scenario(
        {"id": "look", "calls": [{"op": "search", "input": {"pattern": "x", "path": "."}}]}),
        workdir=str(tmp_path), stderr=stderr)
    async with server:
        with pytest.raises(anthropic.BadRequestError) as claude_error:
            await _claude_turn(server.url, USER)
        with pytest.raises(openai.BadRequestError) as codex_error:
            await _codex_turn(server.url, "hi")
    expected = ("scenario turn 0 ('look'): operation \"search\" has no tool in this client's offer "
                "(offered: Agent, Bash, Edit, Read, Skill, ToolSearch, Write)")
    assert claude_error.value.status_code == 400
    assert claude_error.value.body["error"] == {"type": "invalid_request_error", "message": expected}
    codex_body = codex_error.value.body
    assert codex_body["message"].startswith("scenario turn 0 ('look'): operation \"search\" has no tool")
    assert "offered: exec_command, write_stdin, apply_patch, view_image, web_search" in codex_body["message"]
    assert codex_body["type"] == "invalid_request_error"
    assert expected in stderr.getvalue()
    assert [(entry.status, entry.main, entry.turn) for entry in server.requests] == [(400, True, 0), (400, True, 0)]
    assert server.requests[0].error == expected


async def test_a_refused_turn_stays_refused_when_the_client_retries_with_a_wider_offer(tmp_path):
    anthropic, openai = sdks()
    # Claude Code 2.1.328 answers a 400 by retrying, finally with its full undeferred tool list
    # (WebFetch included); the call must still fail.
    server = LoopbackServer(scenario({"calls": [{"op": "web.read", "input": {"url": "http://x.invalid/"}}]}),
                            workdir=str(tmp_path), stderr=None)
    wider = [tool for tool in CLAUDE_TOOLS if tool["name"] != "WebFetch"] + [
        {"name": "WebFetch", "input_schema": {"type": "object", "properties": {"url": {}, "prompt": {}}}}]
    async with server:
        for tools in (CLAUDE_TOOLS, wider):
            with pytest.raises(anthropic.BadRequestError, match='"web.read" has no tool'):
                await _claude_turn(server.url, USER, tools=tools)
        # Another client kind is judged on its own offer.
        with pytest.raises(openai.BadRequestError, match='"web.read" has no tool'):
            await _codex_turn(server.url, "hi")
    assert [entry.status for entry in server.requests] == [400, 400, 400]


async def test_deferred_tool_does_not_count_and_unfillable_required_key_fails(tmp_path):
    anthropic, openai = sdks()
    server = LoopbackServer(scenario(
        {"calls": [{"op": "web.read", "input": {"url": "http://example.invalid/"}}]},
    ), workdir=str(tmp_path), stderr=None)
    async with server:
        with pytest.raises(anthropic.BadRequestError, match='"web.read" has no tool'):
            await _claude_turn(server.url, USER)  # WebFetch is offered only with defer_loading:true
        strict_bash = [{"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {}, "cwd": {}},
                                                         "required": ["command", "cwd"]}}]
    server = LoopbackServer(scenario({"calls": [{"op": "shell", "input": {"command": "ls"}}]}), workdir=str(tmp_path),
                            stderr=None)
    async with server:
        with pytest.raises(anthropic.BadRequestError, match="requires key\\(s\\) cwd the scenario cannot fill"):
            await _claude_turn(server.url, USER, tools=strict_bash)


async def test_delay_ms_delays_the_answer_and_the_request_is_logged_while_in_flight(tmp_path):
    server = LoopbackServer(scenario({"text": "slow", "delay_ms": 600}), workdir=str(tmp_path), stderr=None)
    async with server:
        started = time.monotonic()
        pending = asyncio.ensure_future(_claude_turn(server.url, USER))
        while not server.requests:
            await asyncio.sleep(0.01)
        assert not pending.done()
        assert server.requests[0].delay_ms == 600 and server.requests[0].turn == 0
        message = await pending
        assert message.content[0].text == "slow"
        assert time.monotonic() - started >= 0.6


async def test_request_log_file_and_expect_key(tmp_path):
    anthropic, openai = sdks()
    log = tmp_path / "log.jsonl"
    server = LoopbackServer(scenario({"text": "hi"}), workdir=str(tmp_path), log_path=str(log),
                            expect_key="sk-expected", stderr=None)
    async with server:
        with pytest.raises(anthropic.AuthenticationError):
            await _claude_turn(server.url, USER, key="sk-wrong")
        with pytest.raises(openai.AuthenticationError):
            await _codex_turn(server.url, "hi", key="sk-wrong")
        await _claude_turn(server.url, USER, key="sk-expected")
        await _codex_turn(server.url, "hi", key="sk-expected")
        async with httpx.AsyncClient() as http:  # Claude Code's own header: x-api-key
            raw = {"model": "m", "max_tokens": 5, "messages": USER, "tools": CLAUDE_TOOLS}
            wrong = await http.post(server.url + "/v1/messages", json=raw, headers={"x-api-key": "sk-wrong"})
            right = await http.post(server.url + "/v1/messages", json=raw, headers={"x-api-key": "sk-expected"})
    assert wrong.status_code == 401 and wrong.json()["error"]["type"] == "authentication_error"
    assert right.status_code == 200
    lines = [LoggedRequest(**json.loads(line)) for line in log.read_text().splitlines()]
    assert [entry.status for entry in lines] == [401, 401, 200, 200, 401, 200]
    assert lines == server.requests
    # The anthropic SDK sends its key as a Bearer token; the openai SDK too; Claude Code as x-api-key.
    assert lines[2].headers["authorization"] == "Bearer <expected key>"
    assert lines[3].headers["authorization"] == "Bearer <expected key>"
    assert lines[4].headers["x-api-key"] == "sk-wrong"
    assert lines[5].headers["x-api-key"] == "<expected key>"
    assert lines[2].client == "anthropic" and lines[3].client == "openai"
    assert lines[2].body["messages"] == USER and lines[2].body["stream"] is True
    assert lines[2].answer == {"text": "hi", "calls": []}
    assert lines[0].error is not None and lines[0].turn is None
    assert "sk-expected" not in log.read_text()


async def test_compressed_bodies(tmp_path):
    server = LoopbackServer(scenario({"text": "hi"}), workdir=str(tmp_path), stderr=None)
    body = json.dumps({"model": "m", "max_tokens": 5, "messages": USER, "tools": CLAUDE_TOOLS}).encode()
    async with server:
        async with httpx.AsyncClient() as http:
            ok = await http.post(server.url + "/v1/messages", content=gzip.compress(body),
                                 headers={"content-encoding": "gzip", "content-type": "application/json"})
            refused = await http.post(server.url + "/v1/messages", content=b"\x28\xb5\x2f\xfd",
                                      headers={"content-encoding": "zstd", "content-type": "application/json"})
    assert ok.status_code == 200 and ok.json()["content"][0]["text"] == "hi"
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == "the request body is compressed with 'zstd', which the loopback cannot decode"


def test_run_in_thread_and_context_manager(tmp_path):
    anthropic, openai = sdks()
    server = LoopbackServer(scenario({"text": "threaded"}), workdir=str(tmp_path), stderr=None)
    url, stop = server.run_in_thread()
    try:
        reply = httpx.post(url + "/v1/messages", json={"model": "m", "max_tokens": 5, "messages": USER, "tools": CLAUDE_TOOLS})
        assert reply.json()["content"][0]["text"] == "threaded"
    finally:
        stop()
    with pytest.raises(httpx.ConnectError):
        httpx.post(url + "/v1/messages", json={})
    with LoopbackServer(scenario({"text": "again"}), workdir=str(tmp_path), stderr=None) as again:
        assert again.url.startswith("http://127.0.0.1:")
        client = anthropic.Anthropic(base_url=again.url, api_key="k", max_retries=0)
        with client.messages.stream(model="m", max_tokens=5, messages=USER, tools=CLAUDE_TOOLS) as stream:
            assert stream.get_final_message().content[0].text == "again"


async def test_keep_alive_connection_is_reused(tmp_path):
    server = LoopbackServer(scenario({"text": "a"}), workdir=str(tmp_path), stderr=None)
    async with server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        body = json.dumps({"model": "m", "max_tokens": 5, "messages": USER, "tools": CLAUDE_TOOLS, "stream": True}).encode()
        for _ in range(2):
            writer.write(b"POST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            assert b"transfer-encoding: chunked" in head.lower() and b"text/event-stream" in head
            assert b"request-id: req_" in head
            data = b""
            while not data.endswith(b"0\r\n\r\n"):
                data += await reader.read(65536)
            assert b"event: message_stop" in data
        writer.close()
    assert len(server.requests) == 2
