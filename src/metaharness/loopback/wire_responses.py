"""The OpenAI Responses side of the loopback: turn counting and the answer's bytes (docs/scenarios.md).

What belongs here: reading a Responses request body (how many model responses its `input`
history holds, whether it offers tools) and building the answer — the full SSE sequence
(what Codex and the official SDK's stream helper accept), the minimal one for conformance
tests, one JSON response for `"stream": false`, or an error body.

Rules it keeps: every event carries `sequence_number` from 0; items are complete in
`response.output_item.done` and `response.completed`; a message item comes before the calls;
never a `local_shell_call` item (Codex silently ignores it). Pure: no I/O.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from .render import RenderedCall, arguments_json

MODEL_OUTPUT_ITEMS = frozenset({"function_call", "custom_tool_call", "reasoning"})
ARGUMENT_PIECE = 12


def _is_model_output(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        return item.get("role") == "assistant"
    return kind in MODEL_OUTPUT_ITEMS


def model_responses_in_history(body: dict[str, Any]) -> int:
    """Maximal runs of consecutive model-output items in `input` (one run per model response)."""
    items = body.get("input")
    if not isinstance(items, list):
        return 0
    runs, previous = 0, False
    for item in items:
        current = _is_model_output(item)
        if current and not previous:
            runs += 1
        previous = current
    return runs


def offers_tools(body: dict[str, Any]) -> bool:
    tools = body.get("tools")
    return isinstance(tools, list) and len(tools) > 0


def _new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def output_items(text: str | None, calls: list[RenderedCall]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if text or not calls:
        items.append({"type": "message", "id": _new_id("msg_"), "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": text or "", "annotations": []}]})
    for call in calls:
        if call.kind == "custom_tool_call":
            items.append({"type": "custom_tool_call", "id": _new_id("ctc_"), "call_id": call.call_id,
                          "name": call.name, "input": call.text_input or "", "status": "completed"})
        else:
            items.append({"type": "function_call", "id": _new_id("fc_"), "call_id": call.call_id,
                          "name": call.name, "arguments": arguments_json(call), "status": "completed"})
    return items


USAGE = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}


def usage_of(counts: dict[str, int]) -> dict[str, Any]:
    """A scripted answer's neutral token counts as Responses `usage` (input counts the cached part too)."""
    cached = counts.get("cache_read_input_tokens", 0)
    prompt = counts.get("input_tokens", 0) + cached + counts.get("cache_creation_input_tokens", 0)
    output = counts.get("output_tokens", 0)
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": prompt + output}


def response_object(response_id: str, model: str, status: str, output: list[dict[str, Any]], *, usage: bool,
                    counts: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": response_id, "object": "response", "created_at": int(time.time()), "model": model,
        "status": status, "output": output, "error": None, "incomplete_details": None,
        "instructions": None, "metadata": {}, "parallel_tool_calls": True, "tool_choice": "auto",
        "tools": [], "usage": (counts or dict(USAGE)) if usage else None,
    }


def _in_progress(item: dict[str, Any]) -> dict[str, Any]:
    started = dict(item, status="in_progress")
    if item["type"] == "function_call":
        started["arguments"] = ""
    elif item["type"] == "custom_tool_call":
        started["input"] = ""
    else:
        started["content"] = []
    return started


def sse_events(model: str, text: str | None, calls: list[RenderedCall], *, minimal: bool = False,
               usage: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The stream's events in order, each with its `type`; `sequence_number` added here."""
    response_id = _new_id("resp_")
    items = output_items(text, calls)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response_object(response_id, model, "in_progress", [], usage=False)}]
    if not minimal:
        events.append({"type": "response.in_progress",
                       "response": response_object(response_id, model, "in_progress", [], usage=False)})
    for index, item in enumerate(items):
        if not minimal:
            events.append({"type": "response.output_item.added", "output_index": index, "item": _in_progress(item)})
            events.extend(_item_deltas(index, item))
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed",
                   "response": response_object(response_id, model, "completed", items, usage=True, counts=usage)})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


def _item_deltas(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    where = {"item_id": item["id"], "output_index": index}
    if item["type"] == "function_call":
        arguments = item["arguments"]
        deltas = [{"type": "response.function_call_arguments.delta", **where, "delta": arguments[i : i + ARGUMENT_PIECE]}
                  for i in range(0, len(arguments), ARGUMENT_PIECE)]
        return [*deltas, {"type": "response.function_call_arguments.done", **where, "name": item["name"], "arguments": arguments}]
    if item["type"] == "custom_tool_call":
        return []  # the input arrives whole in output_item.done, the form verified with Codex
    part = item["content"][0]
    at = {**where, "content_index": 0}
    return [
        {"type": "response.content_part.added", **at, "part": {"type": "output_text", "text": "", "annotations": []}},
        {"type": "response.output_text.delta", **at, "delta": part["text"], "logprobs": []},
        {"type": "response.output_text.done", **at, "text": part["text"], "logprobs": []},
        {"type": "response.content_part.done", **at, "part": part},
    ]


def encode_event(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


def error_body(message: str, error_type: str = "invalid_request_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": error_type, "param": None, "code": None}}).encode()
