"""The loopback's Chat Completions and Gemini wires: rendering a scenario's neutral calls into
opencode's and Gemini CLI's declared tools, turn counting, and the answer's bytes."""

from __future__ import annotations

import json

import pytest

from metaharness.loopback import wire_chat, wire_gemini
from metaharness.loopback.render import RenderError
from metaharness.protocol.scenario import ScenarioCall


def chat_tool(name: str, required: list[str], optional: list[str] = ()) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "required": required, "properties": {k: {} for k in [*required, *optional]}}}}


def gemini_tools(*declarations: tuple[str, list[str], list[str]]) -> list[dict]:
    return [{"functionDeclarations": [
        {"name": name, "parametersJsonSchema": {"type": "object", "required": req,
                                                "properties": {k: {} for k in [*req, *opt]}}}
        for name, req, opt in declarations]}]


def test_chat_renders_opencode_tools_with_absolute_paths_and_schema_extras():
    tools = [chat_tool("bash", ["command", "description"]), chat_tool("read", ["filePath"]),
             chat_tool("grep", ["pattern"], ["path", "include"]), chat_tool("edit", ["filePath", "oldString", "newString"])]
    shell = wire_chat.render_chat(ScenarioCall(op="shell", input={"command": "ls"}), tools, workdir="/w", turn_index=0)
    assert (shell.name, shell.arguments) == ("bash", {"command": "ls", "description": "scenario call"})
    read = wire_chat.render_chat(ScenarioCall(op="file.read", input={"path": "a.txt"}), tools, workdir="/w", turn_index=0)
    assert read.arguments == {"filePath": "/w/a.txt"}
    grep = wire_chat.render_chat(ScenarioCall(op="search", input={"pattern": "x", "path": "src"}), tools,
                                 workdir="/w", turn_index=0)
    assert grep.arguments == {"pattern": "x", "path": "/w/src"}
    edit = wire_chat.render_chat(ScenarioCall(op="file.edit", input={"path": "/a", "old": "o", "new": "n"}), tools,
                                 workdir="/w", turn_index=0)
    assert edit.arguments == {"filePath": "/a", "oldString": "o", "newString": "n"}
    with pytest.raises(RenderError, match='operation "web.read" has no tool .*offered: bash, read, grep, edit'):
        wire_chat.render_chat(ScenarioCall(op="web.read", input={"url": "u"}), tools, workdir="/w", turn_index=2)


def test_chat_stream_carries_text_then_each_call_in_pieces_then_usage_and_done():
    call = wire_chat.render_chat(ScenarioCall(op="shell", input={"command": "echo a long command here"}, id="c9"),
                                 [chat_tool("bash", ["command"])], workdir="/w", turn_index=0)
    chunks = wire_chat.sse_chunks("m", "hi", [call])
    assert chunks[1]["choices"][0]["delta"] == {"content": "hi"}
    start = chunks[2]["choices"][0]["delta"]["tool_calls"][0]
    assert (start["id"], start["function"]["name"], start["index"]) == ("c9", "bash", 0)
    pieces = "".join(c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                     for c in chunks[3:-2])
    assert json.loads(pieces) == {"command": "echo a long command here"}
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 15
    assert wire_chat.encode_chunk(chunks[0]).startswith(b"data: {") and wire_chat.DONE == b"data: [DONE]\n\n"


def test_chat_and_gemini_count_model_answers_by_runs():
    assert wire_chat.model_responses_in_history({"messages": [
        {"role": "system"}, {"role": "user"}, {"role": "assistant"}, {"role": "tool"}, {"role": "assistant"}]}) == 2
    assert wire_gemini.model_responses_in_history({"contents": [
        {"role": "user"}, {"role": "model"}, {"role": "model"}, {"role": "user"}, {"role": "model"}]}) == 2


def test_gemini_renders_its_tools_and_refuses_what_it_does_not_declare():
    tools = gemini_tools(("run_shell_command", ["command"], ["description", "dir_path"]),
                         ("write_file", ["file_path", "content"], []), ("grep_search", ["pattern"], ["dir_path"]))
    shell = wire_gemini.render_gemini(ScenarioCall(op="shell", input={"command": "ls"}), tools, workdir="/w", turn_index=0)
    assert (shell.name, shell.arguments) == ("run_shell_command", {"command": "ls", "description": "scenario call"})
    write = wire_gemini.render_gemini(ScenarioCall(op="file.write", input={"path": "o.txt", "content": "c"}), tools,
                                      workdir="/w", turn_index=0)
    assert write.arguments == {"file_path": "/w/o.txt", "content": "c"}
    with pytest.raises(RenderError, match="task.todo"):
        wire_gemini.render_gemini(ScenarioCall(op="task.todo", input={"items": []}), tools, workdir="/w", turn_index=0)
    assert wire_gemini.offers_tools({"tools": tools}) and not wire_gemini.offers_tools({"tools": []})


def test_gemini_response_and_stream_shapes():
    call = wire_gemini.render_gemini(ScenarioCall(op="shell", input={"command": "ls"}, id="fc1"),
                                     gemini_tools(("run_shell_command", ["command"], [])), workdir="/w", turn_index=0)
    whole = wire_gemini.response_object("gemini-x", "hi", [call])
    assert whole["candidates"][0]["content"]["parts"] == [
        {"text": "hi"}, {"functionCall": {"id": "fc1", "name": "run_shell_command", "args": {"command": "ls"}}}]
    chunks = wire_gemini.sse_chunks("gemini-x", "hi", [call])
    assert [c["candidates"][0]["content"]["parts"] for c in chunks] == [
        [{"text": "hi"}], [{"functionCall": {"id": "fc1", "name": "run_shell_command", "args": {"command": "ls"}}}]]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP" and "usageMetadata" in chunks[-1]
    assert wire_gemini.encode_chunk(chunks[0]).endswith(b"\r\n\r\n")
    assert wire_gemini.model_of("/v1beta/models/gemini-3.8-flash:streamGenerateContent") == "gemini-3.8-flash"


def test_gemini_json_side_request_is_answered_from_its_schema():
    router = {"generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {
        "type": "OBJECT", "properties": {"complexity_reasoning": {"type": "STRING"},
                                         "complexity_score": {"type": "INTEGER"}}}}}
    assert json.loads(wire_gemini.side_text(router, "ok")) == {"complexity_reasoning": "ok", "complexity_score": 1}
    assert wire_gemini.side_text({"generationConfig": {}}, "ok") == "ok"
