"""The Gemini API side of the loopback: turn counting, rendering and the answer's bytes.

What belongs here: reading a `generateContent` / `streamGenerateContent` request body (how
many model answers its `contents` history holds, whether it declares functions), rendering a
scenario's neutral calls into Gemini CLI's declared tools (`run_shell_command`, `write_file`,
`replace`, `read_file`, `list_directory`, `grep_search`, `web_fetch`, `activate_skill`,
`invoke_agent`), and building the answer: one `GenerateContentResponse` object, sent whole for
`generateContent` and as SSE `data:` lines for `streamGenerateContent?alt=sse` (text first,
then the function calls, `finishReason` and `usageMetadata` on the last chunk).

Rules it keeps: a tool counts only when a `functionDeclarations` entry offers it by name; the
declared schema (`parametersJsonSchema`, else `parameters`) decides which optional keys go in;
paths are absolute. The model is the one named in the request path. Pure: no I/O.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from metaharness.protocol.scenario import ScenarioCall

from .render import Offer, RenderedCall, _absolute
from .wire_chat import render_by_table, runs_of

USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}


def model_responses_in_history(body: dict[str, Any]) -> int:
    return runs_of(body.get("contents"), "role", "model")


def gemini_offer(tools: Any) -> Offer:
    offered: dict[str, dict[str, Any]] = {}
    for tool in tools if isinstance(tools, list) else []:
        for declaration in (tool.get("functionDeclarations") or []) if isinstance(tool, dict) else []:
            if isinstance(declaration, dict) and isinstance(declaration.get("name"), str):
                schema = declaration.get("parametersJsonSchema") or declaration.get("parameters")
                offered[declaration["name"]] = {**declaration, "input_schema": schema}
    return Offer(offered)


def offers_tools(body: dict[str, Any]) -> bool:
    return bool(gemini_offer(body.get("tools")).tools)


def _args(op: str, args: dict[str, Any], workdir: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    if op == "shell":
        return "run_shell_command", {"command": args["command"]}, {"description": "scenario call"}
    if op == "file.read":
        return "read_file", {"file_path": _absolute(args["path"], workdir)}, {}
    if op == "file.write":
        return "write_file", {"file_path": _absolute(args["path"], workdir), "content": args["content"]}, {}
    if op == "file.edit":
        return "replace", {"file_path": _absolute(args["path"], workdir), "old_string": args["old"],
                           "new_string": args["new"]}, {"instruction": "scenario edit"}
    if op == "dir.list":
        return "list_directory", {"dir_path": _absolute(args["path"], workdir)}, {}
    if op == "search":
        return "grep_search", {"pattern": args["pattern"], "dir_path": _absolute(args["path"], workdir)}, {}
    if op == "web.read":
        return "web_fetch", {"prompt": f"Return the text of {args['url']}"}, {}
    if op == "skill.load":
        return "activate_skill", {"name": args["name"]}, {}
    if op == "subagent.spawn":
        return "invoke_agent", {"prompt": str(args["prompt"])}, {"agent_name": "codebase_investigator"}
    raise KeyError(op)


def render_gemini(call: ScenarioCall, tools: Any, *, workdir: str, turn_index: int, turn_id: str | None = None) -> RenderedCall:
    """One neutral call as a Gemini `functionCall` part, from the request's declared functions."""
    return render_by_table(call, gemini_offer(tools), _args, workdir=workdir, turn_index=turn_index, turn_id=turn_id,
                           id_prefix="fc_")


def side_text(body: dict[str, Any], default: str) -> str:
    """A side request that asks for JSON (`responseMimeType: application/json`, Gemini CLI's model
    router) is answered with the smallest object its `responseJsonSchema` accepts; any other
    side request with `default`."""
    config = body.get("generationConfig") if isinstance(body.get("generationConfig"), dict) else {}
    if config.get("responseMimeType") != "application/json":
        return default
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    return json.dumps(_instance(schema if isinstance(schema, dict) else {}))


SCALARS = {"string": "ok", "integer": 1, "number": 1, "boolean": True}


def _instance(schema: dict[str, Any]) -> Any:
    kind = str(schema.get("type") or "object").lower()
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if kind == "object":
        properties = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        return {key: _instance(value if isinstance(value, dict) else {}) for key, value in properties.items()}
    if kind == "array":
        return []
    return SCALARS.get(kind)


def _parts(text: str | None, calls: list[RenderedCall]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if text or not calls:
        parts.append({"text": text or ""})
    for call in calls:
        parts.append({"functionCall": {"id": call.call_id, "name": call.name, "args": call.arguments or {}}})
    return parts


def usage_of(counts: dict[str, int]) -> dict[str, Any]:
    """A scripted answer's neutral token counts as Gemini `usageMetadata` (prompt counts the cached part too)."""
    cached = counts.get("cache_read_input_tokens", 0)
    prompt = counts.get("input_tokens", 0) + cached + counts.get("cache_creation_input_tokens", 0)
    output = counts.get("output_tokens", 0)
    return {"promptTokenCount": prompt, "candidatesTokenCount": output, "totalTokenCount": prompt + output,
            "cachedContentTokenCount": cached}


def response_object(model: str, text: str | None, calls: list[RenderedCall],
                    usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": _parts(text, calls)}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": usage or dict(USAGE),
        "modelVersion": model,
        "responseId": uuid.uuid4().hex[:24],
    }


def sse_chunks(model: str, text: str | None, calls: list[RenderedCall],
               usage: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Text (if any) in a chunk of its own, then one chunk with the calls, finishReason and usage."""
    chunks: list[dict[str, Any]] = []
    response_id = uuid.uuid4().hex[:24]
    parts = _parts(text, calls)
    if calls and text:
        chunks.append({"candidates": [{"content": {"role": "model", "parts": parts[:1]}, "index": 0}],
                       "modelVersion": model, "responseId": response_id})
        parts = parts[1:]
    chunks.append({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                   "usageMetadata": usage or dict(USAGE), "modelVersion": model, "responseId": response_id})
    return chunks


def encode_chunk(chunk: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(chunk, ensure_ascii=False, separators=(',', ':'))}\r\n\r\n".encode()


def model_of(path: str, default: str = "gemini-loopback") -> str:
    """`/v1beta/models/<model>:<method>` → `<model>`."""
    tail = path.rsplit("/models/", 1)[-1]
    return tail.split(":", 1)[0] or default


def error_body(message: str, status: str = "INVALID_ARGUMENT", code: int = 400) -> bytes:
    return json.dumps({"error": {"code": code, "message": message, "status": status}}).encode()
