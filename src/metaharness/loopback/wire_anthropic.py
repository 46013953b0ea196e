"""The Anthropic Messages side of the loopback: turn counting and the answer's bytes (docs/scenarios.md).

What belongs here: reading a Messages request body (how many model responses its history
holds, whether it offers tools) and building the answer — the full SSE sequence Claude Code
accepts, or one JSON `message` for `"stream": false`, or an error body.

Rules it keeps: the SSE sequence is always the full one (message_start, ping, each
block's start/deltas/stop, message_delta, message_stop); tool input JSON is streamed in
12-character pieces; the model name is echoed from the request. Pure: no I/O.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from .render import RenderedCall, arguments_json

INPUT_PIECE = 12
USAGE = {"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def usage_of(counts: dict[str, int]) -> dict[str, Any]:
    """A scripted answer's neutral token counts as Messages `usage`."""
    return {key: counts.get(key, 0) for key in USAGE}


def model_responses_in_history(body: dict[str, Any]) -> int:
    """Maximal runs of consecutive `role:"assistant"` messages (one per model response).

    Claude Code sends one assistant message per response; counting runs gives the same
    number and stays right if a client splits a response's blocks over several messages.
    """
    runs, previous_was_assistant = 0, False
    for message in body.get("messages") or []:
        is_assistant = isinstance(message, dict) and message.get("role") == "assistant"
        if is_assistant and not previous_was_assistant:
            runs += 1
        previous_was_assistant = is_assistant
    return runs


def offers_tools(body: dict[str, Any]) -> bool:
    tools = body.get("tools")
    return isinstance(tools, list) and len(tools) > 0


def _blocks(text: str | None, calls: list[RenderedCall]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if text or not calls:
        blocks.append({"type": "text", "text": text or ""})
    for call in calls:
        blocks.append({"type": "tool_use", "id": call.call_id, "name": call.name, "input": call.arguments or {}})
    return blocks


def message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


def message_object(model: str, text: str | None, calls: list[RenderedCall],
                   usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": message_id(), "type": "message", "role": "assistant", "model": model,
        "content": _blocks(text, calls),
        "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None,
        "usage": usage or {**USAGE, "output_tokens": 5},
    }


def sse_events(model: str, text: str | None, calls: list[RenderedCall],
               usage: dict[str, Any] | None = None) -> list[tuple[str, dict[str, Any]]]:
    usage = usage or {**USAGE, "output_tokens": 5}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": {
            "id": message_id(), "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}}),
        ("ping", {"type": "ping"}),
    ]
    blocks = _blocks(text, calls)
    first_call = len(blocks) - len(calls)
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "text", "text": ""}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                   "delta": {"type": "text_delta", "text": block["text"]}}))
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            encoded = arguments_json(calls[index - first_call])
            for start in range(0, len(encoded), INPUT_PIECE):
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                    "type": "input_json_delta", "partial_json": encoded[start : start + INPUT_PIECE]}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None},
                                     "usage": {"output_tokens": usage["output_tokens"]}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def encode_event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


def error_body(message: str, error_type: str = "invalid_request_error") -> bytes:
    return json.dumps({"type": "error", "error": {"type": error_type, "message": message}}).encode()


def count_tokens(body: dict[str, Any]) -> int:
    """A plausible count (about four characters a token); no client relies on its value."""
    return max(1, len(json.dumps(body.get("messages") or [])) // 4)
