"""The `openai` provider: the official openai SDK, Responses API, streaming.

Rules it keeps: the SDK reads OPENAI_API_KEY and OPENAI_BASE_URL itself; a missing key
is refused before the run starts. Requests are stateless (`store: false`, the whole
conversation as `input` items). Items are yielded as each `response.output_item.done`
arrives; usage is the final response's, as reported; no cost is computed.
"""

from __future__ import annotations

import json
import os
from typing import Any, AsyncIterator

from .failure import AttemptLog, provider_error, request_timeout
from ..model import (
    Message, ModelEvent, ModelRequest, ProviderError, Stop, TextBlock, ThinkingBlock, ToolCallBlock, Usage,
)

MAX_OUTPUT_TOKENS = int(os.environ.get("OHARNESS_MAX_TOKENS", "8192"))


def to_response_input(messages: list[Message]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        for block in message["content"]:
            kind = block["type"]
            if kind == "text":
                part = "output_text" if role == "assistant" else "input_text"
                items.append({"type": "message", "role": role, "content": [{"type": part, "text": block["text"]}]})
            elif kind == "tool_call":
                items.append({
                    "type": "function_call", "call_id": block["id"], "name": block["name"],
                    "arguments": json.dumps(block["input"]),
                })
            elif kind == "tool_result":
                output = block["content"] if not block["is_error"] else f"[error] {block['content']}"
                items.append({"type": "function_call_output", "call_id": block["call_id"], "output": output})
    return items


class OpenAIProvider:
    def __init__(self, name: str, model: str) -> None:
        if not os.environ.get("OPENAI_API_KEY"):
            raise ProviderError("the openai provider needs OPENAI_API_KEY in the environment")
        import openai

        self.name = name
        self.model = model
        self._openai = openai
        self.log = AttemptLog()
        self.client = openai.AsyncOpenAI(
            max_retries=1, timeout=request_timeout(), http_client=openai.DefaultAsyncHttpxClient(event_hooks=self.log.hooks()))

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        tools = [
            {"type": "function", "name": t.name, "description": t.description, "parameters": t.input_schema,
             "strict": False}
            for t in request.tools
        ]
        kwargs: dict[str, Any] = {
            "model": self.model, "instructions": request.system, "input": to_response_input(request.messages),
            "store": False, "stream": True, "max_output_tokens": MAX_OUTPUT_TOKENS,
        }
        if tools:
            kwargs["tools"] = tools
        final: Any = None
        stop = "end_turn"
        called = False
        attempts = self.log.reset()
        try:
            stream = await self.client.responses.create(**kwargs)
            async for event in stream:
                kind = getattr(event, "type", "")
                if kind == "response.output_item.done":
                    item = event.item
                    if item.type == "message":
                        text = "".join(getattr(part, "text", "") or "" for part in item.content or [])
                        if text:
                            yield TextBlock(text)
                    elif item.type == "reasoning":
                        text = "\n".join(getattr(s, "text", "") for s in (getattr(item, "summary", None) or []))
                        if text:
                            yield ThinkingBlock(text)
                    elif item.type == "function_call":
                        called = True
                        yield ToolCallBlock(item.call_id, item.name, _arguments(item.arguments))
                elif kind in ("response.completed", "response.incomplete"):
                    final = event.response
                    details = getattr(final, "incomplete_details", None)
                    if kind == "response.incomplete" and getattr(details, "reason", None) == "max_output_tokens":
                        stop = "max_tokens"
                elif kind == "response.failed":
                    error = getattr(event.response, "error", None)
                    raise ProviderError(f"the openai response failed: {getattr(error, 'message', None) or 'no reason given'}")
                elif kind == "error":
                    raise ProviderError(f"the openai stream reported an error: {getattr(event, 'message', '') or 'no message'}")
        except ProviderError:
            raise
        except Exception as exc:  # the SDK's errors, and a stream cut or malformed mid-way
            raise provider_error(exc, "openai", attempts) from None
        usage = getattr(final, "usage", None)
        if usage is not None:
            details = getattr(usage, "input_tokens_details", None)
            yield Usage({
                "input_tokens": getattr(usage, "input_tokens", None),
                "output_tokens": getattr(usage, "output_tokens", None),
                "cache_read_input_tokens": getattr(details, "cached_tokens", None),
                "cache_creation_input_tokens": getattr(details, "cache_write_tokens", None),
            })
        yield Stop("tool_use" if called and stop != "max_tokens" else stop)


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {"_unparsed_arguments": raw}
    return value if isinstance(value, dict) else {"_arguments": value}
