"""The `anthropic` provider: the official anthropic SDK, Messages API, streaming.

Rules it keeps: the SDK reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL itself; a
missing key is refused before the run starts. Blocks are yielded as each one stops;
usage is the final message's, as reported (missing counts stay null); no cost is
computed (the API reports none).
"""

from __future__ import annotations

import os
from typing import Any, AsyncIterator

from .failure import AttemptLog, provider_error, request_timeout
from ..model import (
    Message, ModelEvent, ModelRequest, ProviderError, Stop, TextBlock, ThinkingBlock, ToolCallBlock, Usage,
)

MAX_TOKENS = int(os.environ.get("OHARNESS_MAX_TOKENS", "8192"))


def to_anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        blocks = []
        for block in message["content"]:
            kind = block["type"]
            if kind == "text":
                blocks.append({"type": "text", "text": block["text"]})
            elif kind == "tool_call":
                blocks.append({"type": "tool_use", "id": block["id"], "name": block["name"], "input": block["input"]})
            elif kind == "tool_result":
                blocks.append({
                    "type": "tool_result", "tool_use_id": block["call_id"],
                    "content": block["content"] or "(empty)", "is_error": block["is_error"],
                })
        if not blocks:
            continue
        if out and out[-1]["role"] == message["role"]:
            out[-1]["content"].extend(blocks)  # the API wants roles to alternate
        else:
            out.append({"role": message["role"], "content": blocks})
    return out


class AnthropicProvider:
    def __init__(self, name: str, model: str) -> None:
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise ProviderError("the anthropic provider needs ANTHROPIC_API_KEY in the environment")
        import anthropic

        self.name = name
        self.model = model
        self._anthropic = anthropic
        self.log = AttemptLog()
        self.client = anthropic.AsyncAnthropic(
            max_retries=1, timeout=request_timeout(), http_client=anthropic.DefaultAsyncHttpxClient(event_hooks=self.log.hooks()))

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        tools = [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in request.tools]
        kwargs: dict[str, Any] = {
            "model": self.model, "max_tokens": MAX_TOKENS, "system": request.system,
            "messages": to_anthropic_messages(request.messages),
        }
        if tools:
            kwargs["tools"] = tools
        attempts = self.log.reset()
        try:
            async with self.client.messages.stream(**kwargs) as stream:
                async for event in stream:
                    if event.type != "content_block_stop":
                        continue
                    block = event.content_block
                    if block.type == "text":
                        yield TextBlock(block.text)
                    elif block.type == "thinking":
                        yield ThinkingBlock(block.thinking)
                    elif block.type == "tool_use":
                        yield ToolCallBlock(block.id, block.name, block.input if isinstance(block.input, dict) else {})
                final = await stream.get_final_message()
        except Exception as exc:  # the SDK's errors, and a stream cut or malformed mid-way
            raise provider_error(exc, "anthropic", attempts) from None
        usage = final.usage
        if usage is not None:
            yield Usage({
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_read_input_tokens": getattr(usage, "cache_read_input_tokens", None),
                "cache_creation_input_tokens": getattr(usage, "cache_creation_input_tokens", None),
            })
        reason = final.stop_reason
        yield Stop("max_tokens" if reason == "max_tokens" else "tool_use" if reason == "tool_use" else "end_turn")

