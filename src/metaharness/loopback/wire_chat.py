"""The OpenAI Chat Completions side of the loopback: turn counting, rendering and the answer's bytes.

What belongs here: reading a Chat Completions request body (how many model answers its
`messages` history holds, whether it offers tools), rendering a scenario's neutral calls
into the tools the request offers (opencode's `bash`/`write`/`edit`/`read`/`glob`/`grep`/
`webfetch`/`todowrite`/`skill`/`task`, and oharness's own names, which are the same words; or
Qwen Code's `run_shell_command`/`read_file`/`write_file`/`edit`/`glob`/`grep_search`/`skill`),
and building the answer — the SSE chunk sequence of `stream: true` (content delta, one
`tool_calls` delta per call with its arguments in pieces, `finish_reason`, a usage chunk,
`[DONE]`), or one `chat.completion` object.

Rules it keeps: a tool counts only when the request's `tools` array offers it as a
`function` by name; the offered schema decides which optional keys go in (`render._fill`);
paths are absolute (opencode resolves relative paths against its own cwd, and absolute paths
read the same on every harness). Pure: no I/O.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from metaharness.protocol.scenario import ScenarioCall

from .render import Offer, RenderedCall, RenderError, _absolute, _call_id, _Context, _fill, arguments_json

ARGUMENT_PIECE = 12
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def runs_of(items: Any, role_key: str, role: str) -> int:
    """Maximal runs of consecutive items whose `role_key` is `role` (one run per model answer)."""
    runs, previous = 0, False
    for item in items if isinstance(items, list) else []:
        current = isinstance(item, dict) and item.get(role_key) == role
        if current and not previous:
            runs += 1
        previous = current
    return runs


def model_responses_in_history(body: dict[str, Any]) -> int:
    return runs_of(body.get("messages"), "role", "assistant")


def offers_tools(body: dict[str, Any]) -> bool:
    tools = body.get("tools")
    return isinstance(tools, list) and len(tools) > 0


def chat_offer(tools: Any) -> Offer:
    offered: dict[str, dict[str, Any]] = {}
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, dict) and tool.get("type") == "function" else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            offered[function["name"]] = {**function, "input_schema": function.get("parameters")}
    return Offer(offered)


# neutral op → (tool name, essential keys from the neutral input, extras the schema may take)
def _args(op: str, args: dict[str, Any], workdir: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    if op == "shell":
        return "bash", {"command": args["command"]}, {"description": "scenario call"}
    if op == "file.read":
        return "read", {"filePath": _absolute(args["path"], workdir)}, {}
    if op == "file.write":
        return "write", {"filePath": _absolute(args["path"], workdir), "content": args["content"]}, {}
    if op == "file.edit":
        return "edit", {"filePath": _absolute(args["path"], workdir), "oldString": args["old"],
                        "newString": args["new"]}, {}
    if op == "dir.list":
        return "glob", {"pattern": "*", "path": _absolute(args["path"], workdir)}, {}
    if op == "search":
        return "grep", {"pattern": args["pattern"], "path": _absolute(args["path"], workdir)}, {}
    if op == "web.read":
        return "webfetch", {"url": args["url"]}, {"format": "text"}
    if op == "task.todo":
        items = args["items"] if isinstance(args["items"], list) else []
        todos = [{"content": str(item if isinstance(item, str) else item.get("content", "")), "status": "pending",
                  "priority": "medium", "id": str(number)} for number, item in enumerate(items, start=1)]
        return "todowrite", {"todos": todos}, {}
    if op == "skill.load":
        return "skill", {"name": args["name"]}, {}
    if op == "subagent.spawn":
        prompt = str(args["prompt"])
        return "task", {"description": " ".join(prompt.split()[:5])[:60] or "subagent", "prompt": prompt}, \
            {"subagent_type": "general"}
    if op == "mcp.call":
        if not isinstance(args["arguments"], dict):
            raise KeyError("arguments")
        return f"{args['server']}_{args['tool']}", dict(args["arguments"]), {}
    raise KeyError(op)


# Qwen Code's vocabulary (a Gemini CLI fork speaking Chat Completions): chosen when the request
# offers `run_shell_command`. Its `list_directory` is deferred (not offered), so a listing is a glob.
def _qwen_args(op: str, args: dict[str, Any], workdir: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    if op == "shell":
        return "run_shell_command", {"command": args["command"]}, {"description": "scenario call"}
    if op == "file.read":
        return "read_file", {"file_path": _absolute(args["path"], workdir)}, {}
    if op == "file.write":
        return "write_file", {"file_path": _absolute(args["path"], workdir), "content": args["content"]}, {}
    if op == "file.edit":
        return "edit", {"file_path": _absolute(args["path"], workdir), "old_string": args["old"],
                        "new_string": args["new"]}, {}
    if op == "dir.list":
        return "glob", {"pattern": "*", "path": _absolute(args["path"], workdir)}, {}
    if op == "search":
        return "grep_search", {"pattern": args["pattern"], "path": _absolute(args["path"], workdir)}, {}
    if op == "skill.load":
        return "skill", {"skill": args["name"]}, {}
    raise KeyError(op)


def render_by_table(call: ScenarioCall, offer: Offer, args: Any, *, workdir: str, turn_index: int,
                    turn_id: str | None, id_prefix: str) -> RenderedCall:
    """One neutral call through a table `args(op, input, workdir) → (tool, essential, extras)`;
    each offered tool holds its JSON schema under `input_schema`."""
    ctx = _Context(call, offer, turn_index, turn_id)
    try:
        name, essential, extra = args(call.op, call.input, workdir)
    except KeyError:
        raise ctx.no_tool() from None
    tool = offer.tools.get(name)
    if tool is None:
        raise ctx.no_tool()
    rendered = _fill(ctx, tool, "input_schema", essential, extra)
    return RenderedCall(kind="function_call", name=name, call_id=_call_id(call, id_prefix), arguments=rendered)


def render_chat(call: ScenarioCall, tools: Any, *, workdir: str, turn_index: int, turn_id: str | None = None) -> RenderedCall:
    """One neutral call as a Chat Completions `tool_calls` entry, from the request's `tools`."""
    offer = chat_offer(tools)
    table = _qwen_args if "run_shell_command" in offer.tools else _args
    return render_by_table(call, offer, table, workdir=workdir, turn_index=turn_index, turn_id=turn_id,
                           id_prefix="call_")


def _chunk(completion_id: str, model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def usage_of(counts: dict[str, int]) -> dict[str, Any]:
    """A scripted answer's neutral token counts as Chat Completions `usage` (prompt counts the cached part too)."""
    cached = counts.get("cache_read_input_tokens", 0)
    prompt = counts.get("input_tokens", 0) + cached + counts.get("cache_creation_input_tokens", 0)
    output = counts.get("output_tokens", 0)
    return {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output,
            "prompt_tokens_details": {"cached_tokens": cached}}


def sse_chunks(model: str, text: str | None, calls: list[RenderedCall],
               usage: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The stream's chunks in order (without the closing `[DONE]`)."""
    completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    chunks = [_chunk(completion_id, model, {"role": "assistant", "content": ""})]
    if text or not calls:
        chunks.append(_chunk(completion_id, model, {"content": text or ""}))
    for index, call in enumerate(calls):
        encoded = arguments_json(call)
        chunks.append(_chunk(completion_id, model, {"tool_calls": [{
            "index": index, "id": call.call_id, "type": "function",
            "function": {"name": call.name, "arguments": ""}}]}))
        for start in range(0, len(encoded), ARGUMENT_PIECE):
            chunks.append(_chunk(completion_id, model, {"tool_calls": [{
                "index": index, "function": {"arguments": encoded[start:start + ARGUMENT_PIECE]}}]}))
    chunks.append(_chunk(completion_id, model, {}, "tool_calls" if calls else "stop"))
    chunks.append({"id": completion_id, "object": "chat.completion.chunk", "created": int(time.time()),
                   "model": model, "choices": [], "usage": usage or dict(USAGE)})
    return chunks


def completion_object(model: str, text: str | None, calls: list[RenderedCall],
                      usage: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text if (text or not calls) else None}
    if calls:
        message["tool_calls"] = [{"id": call.call_id, "type": "function",
                                  "function": {"name": call.name, "arguments": arguments_json(call)}} for call in calls]
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": message,
                                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": usage or dict(USAGE)}


def encode_chunk(chunk: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(chunk, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


DONE = b"data: [DONE]\n\n"


def error_body(message: str, error_type: str = "invalid_request_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": error_type, "param": None, "code": None}}).encode()


__all__ = ["RenderError", "render_chat", "sse_chunks", "completion_object", "encode_chunk", "DONE",
           "model_responses_in_history", "offers_tools", "error_body"]
