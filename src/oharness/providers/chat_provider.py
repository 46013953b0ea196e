"""The `chat` provider: any OpenAI-compatible server over Chat Completions, streaming, through
the official openai SDK.

Rules it keeps: the SDK reads OPENAI_API_KEY and OPENAI_BASE_URL itself (a local server that
checks no key still needs some value); a missing key is refused before the run starts. Requests
are stateless (the whole conversation as `messages`). Text is yielded whole when the stream
ends, then each tool call with its arguments assembled from the `tool_calls` deltas (by
`index`); usage is the server's `stream_options.include_usage` chunk, as reported.
"""

from __future__ import annotations

import json
import os
from typing import Any, AsyncIterator

from .failure import AttemptLog, provider_error, request_timeout
from ..model import Message, ModelEvent, ModelRequest, ProviderError, Stop, TextBlock, ToolCallBlock, Usage

MAX_OUTPUT_TOKENS = int(os.environ.get("OHARNESS_MAX_TOKENS", "8192"))
STOPS = {"tool_calls": "tool_use", "length": "max_tokens", "stop": "end_turn"}


def to_chat_messages(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        texts = [b["text"] for b in message["content"] if b["type"] == "text"]
        calls = [b for b in message["content"] if b["type"] == "tool_call"]
        results = [b for b in message["content"] if b["type"] == "tool_result"]
        for result in results:  # tool results answer the previous assistant message, before any text
            content = result["content"] if not result["is_error"] else f"[error] {result['content']}"
            out.append({"role": "tool", "tool_call_id": result["call_id"], "content": content})
        if message["role"] == "assistant" and (texts or calls):
            entry: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
            if calls:
                entry["tool_calls"] = [{"id": c["id"], "type": "function",
                                        "function": {"name": c["name"], "arguments": json.dumps(c["input"])}}
                                       for c in calls]
            out.append(entry)
        elif texts:
            out.append({"role": message["role"], "content": "".join(texts)})
    return out


class ChatProvider:
    def __init__(self, name: str, model: str) -> None:
        if not os.environ.get("OPENAI_API_KEY"):
            raise ProviderError("the chat provider needs OPENAI_API_KEY in the environment "
                                "(and OPENAI_BASE_URL for a server other than OpenAI's)")
        import openai

        self.name = name
        self.model = model
        self._openai = openai
        self.log = AttemptLog()
        self.client = openai.AsyncOpenAI(
            max_retries=1, timeout=request_timeout(), http_client=openai.DefaultAsyncHttpxClient(event_hooks=self.log.hooks()))

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        kwargs: dict[str, Any] = {
            "model": self.model, "messages": to_chat_messages(request.system, request.messages), "stream": True,
            "stream_options": {"include_usage": True}, "max_tokens": MAX_OUTPUT_TOKENS,
        }
        if request.tools:
            kwargs["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.input_schema}} for t in request.tools]
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish: str | None = None
        usage: Any = None
        attempts = self.log.reset()
        try:
            stream = await self.client.chat.completions.create(**kwargs)
            async for chunk in stream:
                if getattr(chunk, "usage", None) is not None:
                    usage = chunk.usage
                for choice in chunk.choices or []:
                    delta = choice.delta
                    if delta is not None and delta.content:
                        text.append(delta.content)
                    for piece in (delta.tool_calls or []) if delta is not None else []:
                        call = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                        call["id"] = piece.id or call["id"]
                        if piece.function is not None:
                            call["name"] = piece.function.name or call["name"]
                            call["arguments"] += piece.function.arguments or ""
                    finish = choice.finish_reason or finish
        except ProviderError:
            raise
        except Exception as exc:  # the SDK's errors, and a stream cut or malformed mid-way
            raise provider_error(exc, "openai", attempts) from None
        if text:
            yield TextBlock("".join(text))
        for index in sorted(calls):
            call = calls[index]
            yield ToolCallBlock(call["id"], call["name"], _arguments(call["arguments"]))
        if usage is not None:
            details = getattr(usage, "prompt_tokens_details", None)
            yield Usage({
                "input_tokens": getattr(usage, "prompt_tokens", None),
                "output_tokens": getattr(usage, "completion_tokens", None),
                "cache_read_input_tokens": getattr(details, "cached_tokens", None),
                "cache_creation_input_tokens": None,
            })
        yield Stop("tool_use" if calls else STOPS.get(finish or "stop", "end_turn"))


def _arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {"_unparsed_arguments": raw}
    return value if isinstance(value, dict) else {"_arguments": value}
