"""Failure injection: a scenario turn's `fail` served on the requesting client's own wire.

What belongs here: the provider-shaped error body of each wire for a status (Anthropic's
`{"type":"error","error":{type,message}}` with `overloaded_error` on 529, OpenAI's
`{"error":{message,type,code}}` for Responses and Chat Completions, Gemini's
`{"error":{code,message,status}}`), `retry-after`, a request held until the client gives up (before any
byte, `hold`, or after the stream's headers and first event, `stall`), a stream cut after its first
event, and a malformed stream; and the `ModelFailure` value the
loopback reports for every failed model request it serves (`on_failure`).

Rules it keeps: a turn's failure is served for the first `times` requests of that turn by that
client (every one when unset), so a client's retries meet it again; the count of earlier failed
requests of the same turn is the harness's retries as the loopback saw them.
"""

from __future__ import annotations

import asyncio
import json
from metaharness.protocol.failures import ModelFailure, bounded, kind_of_status
from metaharness.protocol.scenario import ScenarioFailure

from . import wire_anthropic, wire_chat, wire_gemini, wire_responses
from .http import Responder

PROVIDER_OF_CLIENT = {"anthropic": "anthropic", "openai": "openai", "chat": "openai", "gemini": "gemini",
                      "other": None}

_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                    500: "api_error", 529: "overloaded_error"}
_OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "invalid_request_error",
                 404: "invalid_request_error", 429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}
_GEMINI_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                  429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
_DEFAULT_MESSAGE = {401: "invalid x-api-key", 403: "this key may not use this model", 429: "rate limit reached",
                    529: "Overloaded"}


def error_type(client: str, status: int, given: str | None) -> str:
    if given is not None:
        return given
    if client == "gemini":
        return _GEMINI_STATUS.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
    if client in ("openai", "chat"):
        return _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_body(client: str, status: int, message: str, kind: str) -> bytes:
    if client == "gemini":
        return wire_gemini.error_body(message, kind, status)
    if client in ("openai", "chat"):
        return json.dumps({"error": {"message": message, "type": kind, "param": None,
                                     "code": kind if status == 429 else None}}).encode()
    return wire_anthropic.error_body(message, kind)


def _first_event(client: str, model: str, stream_text: str) -> bytes:
    """The first event of an answer on the client's wire: what a stream cut mid-way has sent."""
    if client == "anthropic":
        name, data = wire_anthropic.sse_events(model, stream_text, [])[0]
        return wire_anthropic.encode_event(name, data)
    if client == "openai":
        return wire_responses.encode_event(wire_responses.sse_events(model, stream_text, [])[0])
    if client == "chat":
        return wire_chat.encode_chunk(wire_chat.sse_chunks(model, stream_text, [])[0])
    return wire_gemini.encode_chunk(wire_gemini.sse_chunks(model, stream_text, [])[0])


_MALFORMED = {
    "anthropic": b"event: message_start\ndata: {\"type\": \"message_start\", \"message\": {\n\n",
    "openai": b"event: response.created\ndata: {not json at all\n\n",
    "chat": b"data: {\"id\": \"chatcmpl-x\", \"choices\": [{\n\ndata: [DONE]\n\n",
    "gemini": b"data: {\"candidates\": [{\"content\": \n\n",
}


async def serve(failure: ScenarioFailure, client: str, model: str, responder: Responder) -> ModelFailure:
    """Serve `failure`; returns what the loopback observed (retries are filled by the caller)."""
    provider = PROVIDER_OF_CLIENT.get(client)
    if failure.kind == "status":
        status = failure.status
        kind = error_type(client, status, failure.error_type)
        message = failure.message or _DEFAULT_MESSAGE.get(status) or f"scripted failure (HTTP {status})"
        headers = [("content-type", "application/json")]
        if failure.retry_after is not None:
            headers.append(("retry-after", failure.retry_after))
        await responder.send(status, headers, error_body(client, status, message, kind))
        return ModelFailure(provider=provider, kind=kind_of_status(status, kind), http_status=status,
                            provider_message=bounded(message), retry_after=failure.retry_after)
    if failure.kind == "hold":
        # Held until the client gives up (its own timeout) or the loopback stops.
        observed = ModelFailure(provider=provider, kind="timeout", provider_message="the loopback held the request")
        return observed
    sse = [("content-type", "text/event-stream"), ("cache-control", "no-cache")]
    await responder.start_stream(200, sse)
    if failure.kind == "stall":
        # The answer has begun, then goes quiet until the client gives up (its stream idle timeout).
        await responder.write(_first_event(client, model, failure.message or "partial"))
        return ModelFailure(provider=provider, kind="timeout", http_status=200,
                            provider_message="the loopback stalled the stream after its first event")
    if failure.kind == "cut":
        await responder.write(_first_event(client, model, failure.message or "partial"))
        await asyncio.sleep(0.05)  # let the first event reach the client before the cut
        await responder.abort()
        return ModelFailure(provider=provider, kind="stream_cut", http_status=200,
                            provider_message="the connection closed after the first event")
    await responder.write(_MALFORMED.get(client, _MALFORMED["anthropic"]))
    await responder.end()
    return ModelFailure(provider=provider, kind="malformed_stream", http_status=200,
                        provider_message="the stream's events are not valid JSON")


HELD = ("hold", "stall")  # the kinds served by keeping the request open until the client gives up


async def hold_forever() -> None:
    await asyncio.Event().wait()
