"""Neutral conversation values shared by the loop, the providers and the tools.

What belongs here: the shape of a conversation (messages of content blocks), the
request the loop hands a provider, the events a provider yields back, and the
provider interface itself. No I/O, no SDK imports.

Rules it keeps: messages are plain dicts in one neutral form (providers translate to
their wire); a provider yields whole blocks (text, thinking, tool call) as each one
completes, then at most one `Usage` and exactly one `Stop`.

Neutral content blocks:
    {"type": "text", "text": str}
    {"type": "tool_call", "id": str, "name": str, "input": dict}      (assistant)
    {"type": "tool_result", "call_id": str, "content": str, "is_error": bool}  (user)
"""

from __future__ import annotations

from msgspec import Struct, field
from typing import Any, AsyncIterator, Protocol, Union

Message = dict[str, Any]  # {"role": "user"|"assistant", "content": [block, ...]}

USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


class ToolSpec(Struct, frozen=True):
    """A tool as offered to the model."""

    name: str
    description: str
    input_schema: dict[str, Any]


class ModelRequest(Struct):
    system: str
    messages: list[Message]
    tools: list[ToolSpec]
    main: bool = True  # a main request counts as a scenario turn; a side request does not


class TextBlock(Struct, frozen=True):
    text: str


class ThinkingBlock(Struct, frozen=True):
    text: str


class ToolCallBlock(Struct, frozen=True):
    id: str
    name: str
    input: dict[str, Any]


class Usage(Struct, frozen=True):
    """Token counts exactly as the provider reported them; a missing count is None."""

    counts: dict[str, int | None]
    cost_usd: float | None = None


class Stop(Struct, frozen=True):
    reason: str  # "end_turn" | "tool_use" | "max_tokens"


ModelEvent = Union[TextBlock, ThinkingBlock, ToolCallBlock, Usage, Stop]


class Provider(Protocol):
    """A model. `name` is the spelling `PROVIDER:MODEL` the run was started with."""

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...


class ProviderError(Exception):
    """A model request failed; the message is one sentence for a human and the model log.

    `failure` is the failure as a value (kind, HTTP status, the provider's own message, retries),
    set when a model request was made and failed; None for a refusal before any request."""

    failure: Any = None


class ToolCall(Struct):
    """One call the model made, as the loop presents it to the gate and the tools."""

    id: str
    name: str
    input: Any
    cwd: str = ""
    agent: str | None = None  # the subagent that made the call, when not the main loop


def empty_usage() -> dict[str, int | None]:
    return {key: None for key in USAGE_KEYS}


def add_usage(total: dict[str, int | None], more: dict[str, int | None]) -> None:
    """Sum reported counts; a count nobody reported stays None."""
    for key in USAGE_KEYS:
        value = more.get(key)
        if value is not None:
            total[key] = (total.get(key) or 0) + value


class Conversation(Struct):
    messages: list[Message] = field(default_factory=list)
