"""What a model answer reports it used, read from the bytes a proxy passed on (docs/guides/spend.md).

What belongs here: `answer_usage(path, body)` → (model, neutral token counts) for a Messages,
Responses, Chat Completions or Gemini `generateContent` answer, streamed (server-sent events) or
whole (JSON), the wire known by how the path ends; None for any other path or an answer that
reports no usage. Neutral counts are the wire `Usage` keys, Anthropic's sense: `input_tokens`
excludes the cached part (OpenAI's and Gemini's prompt counts include it, so it is split), and
Gemini's thinking tokens are billed as output.

Rules it keeps: pure; a line that is not JSON is skipped, never guessed at; the last usage a
stream reports wins per key (Messages sends input in `message_start`, output in `message_delta`).
"""

from __future__ import annotations

import json
from typing import Any, Callable
from urllib.parse import urlsplit


def _documents(body: bytes) -> list[dict[str, Any]]:
    text = body.decode("utf-8", "replace")
    candidates = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")] or [text]
    found = []
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def _messages(documents: list[dict[str, Any]]) -> tuple[str | None, dict[str, int]] | None:
    model, counts = None, {}
    for doc in documents:
        message = doc.get("message") if isinstance(doc.get("message"), dict) else doc
        model = message.get("model") or model
        for usage in (message.get("usage"), doc.get("usage")):
            if isinstance(usage, dict):
                counts.update({k: v for k, v in usage.items() if isinstance(v, int) and k.endswith("tokens")})
    return (model, counts) if counts else None


def _openai_counts(usage: dict[str, Any], prompt: str, completion: str) -> dict[str, int]:
    """OpenAI's two wires count cached input inside the prompt tokens (`…_details.cached_tokens`):
    split it out, as the price table prices it apart."""
    cached = (usage.get(f"{prompt}_details") or {}).get("cached_tokens") or 0
    return {"input_tokens": max(0, (usage.get(prompt) or 0) - cached),
            "output_tokens": usage.get(completion) or 0, "cache_read_input_tokens": cached}


def _responses(documents: list[dict[str, Any]]) -> tuple[str | None, dict[str, int]] | None:
    for doc in reversed(documents):
        response = doc.get("response") if isinstance(doc.get("response"), dict) else doc
        usage = response.get("usage")
        if isinstance(usage, dict):
            return response.get("model"), _openai_counts(usage, "input_tokens", "output_tokens")
    return None


def _chat(documents: list[dict[str, Any]]) -> tuple[str | None, dict[str, int]] | None:
    for doc in reversed(documents):
        usage = doc.get("usage")
        if isinstance(usage, dict):
            return doc.get("model"), _openai_counts(usage, "prompt_tokens", "completion_tokens")
    return None


def _gemini(documents: list[dict[str, Any]]) -> tuple[str | None, dict[str, int]] | None:
    for doc in reversed(documents):
        usage = doc.get("usageMetadata")
        if isinstance(usage, dict):
            cached = usage.get("cachedContentTokenCount") or 0
            output = (usage.get("candidatesTokenCount") or 0) + (usage.get("thoughtsTokenCount") or 0)
            return doc.get("modelVersion"), {"input_tokens": max(0, (usage.get("promptTokenCount") or 0) - cached),
                                             "output_tokens": output, "cache_read_input_tokens": cached}
    return None


# How a model endpoint's path ends → the reader of its answers.
READERS: dict[str, Callable[[list[dict[str, Any]]], tuple[str | None, dict[str, int]] | None]] = {
    "/messages": _messages, "/responses": _responses, "/chat/completions": _chat,
    ":generateContent": _gemini, ":streamGenerateContent": _gemini,
}


def answer_usage(path: str, body: bytes) -> tuple[str | None, dict[str, int]] | None:
    route = urlsplit(path).path.rstrip("/")
    reader = next((r for suffix, r in READERS.items() if route.endswith(suffix)), None)
    if reader is None:
        return None
    found = reader(_documents(body))
    if found is not None and found[0] is None and "/models/" in route:  # Gemini names the model in the path
        found = (route.rsplit("/models/", 1)[1].split(":", 1)[0], found[1])
    return found
