"""A failed model request, as one value: what the `MODEL_REQUEST_FAILED` warning carries.

What belongs here: the kinds of failure (one list), the classification of an HTTP status and a
provider's error type into a kind, and the bounding and masking of the provider's own message.
Pure: oharness's providers (in-process) and the loopback (which serves or forwards the vendors'
requests) build the same value with the same rules.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from msgspec import Struct

from .refusals import WarningCode
from .values import U32

MESSAGE_LIMIT = 500

FailureKind = Literal[
    "connection_refused", "dns", "timeout", "http_error", "auth", "rate_limited", "overloaded",
    "stream_cut", "malformed_stream", "stream_error", "connection",
]


class ModelFailure(Struct, kw_only=True):
    provider: str | None = None
    kind: FailureKind
    http_status: U32 | None = None
    provider_message: str | None = None
    retries: U32 | None = None
    last_status: U32 | None = None
    retry_after: str | None = None


# Credential shapes masked in a provider's message before it reaches a stream or a terminal.
_SECRETS = re.compile(
    r"(sk-[A-Za-z0-9_\-]{6,}|sk_[A-Za-z0-9_\-]{6,}|AIza[0-9A-Za-z_\-]{10,}|(?i:bearer)\s+[A-Za-z0-9._\-]{8,}"
    r"|(?i:api[_-]?key)[\"'=: ]+[A-Za-z0-9._\-]{8,})"
)


def bounded(message: str | None, limit: int = MESSAGE_LIMIT) -> str | None:
    """The provider's message with credentials masked, cut to `limit` characters."""
    if message is None:
        return None
    masked = _SECRETS.sub("<masked>", message.strip())
    return masked if len(masked) <= limit else masked[: limit - 1] + "…"


def kind_of_status(status: int, error_type: str | None = None) -> FailureKind:
    if status == 529 or error_type in ("overloaded_error", "overloaded"):
        return "overloaded"
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limited"
    return "http_error"


_DNS_WORDS = ("name or service not known", "nodename nor servname", "temporary failure in name resolution",
              "no address associated", "name resolution")


def exception_chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return seen


def kind_of_exception(exc: BaseException) -> FailureKind:
    """A request that got no status: what its exception chain says (by type, never by import, so
    it reads httpx's, the SDKs' and the standard library's alike)."""
    chain = exception_chain(exc)
    names = {type(e).__name__ for e in chain}
    text = " ".join(str(e) for e in chain).lower()
    if "APITimeoutError" in names or any(n.endswith("Timeout") or n == "TimeoutError" for n in names):
        return "timeout"
    if "gaierror" in names or any(w in text for w in _DNS_WORDS):
        return "dns"
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "connection refused" in text \
            or "connect call failed" in text:
        return "connection_refused"
    if names & {"RemoteProtocolError", "ReadError", "IncompleteRead"} or "incomplete" in text or "peer closed" in text:
        return "stream_cut"
    if any(isinstance(e, ValueError) for e in chain) and "APIConnectionError" not in names:
        return "malformed_stream"  # json.JSONDecodeError and the SDKs' own decoding errors
    return "connection"


def exception_text(exc: BaseException) -> str:
    return "; ".join(dict.fromkeys(str(e) for e in exception_chain(exc) if str(e))) or type(exc).__name__


def message_of_body(body: Any) -> tuple[str | None, str | None]:
    """(message, error type) of a provider's error body: Anthropic's, OpenAI's and Gemini's shapes."""
    if isinstance(body, (bytes, str)):
        import json  # imported here: only a failed request's body needs it, not `import metaharness.protocol`

        try:
            body = json.loads(body)
        except ValueError:
            text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
            return (text or None), None
    error = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None, None
    message = error.get("message")
    kind = error.get("type") or error.get("status")
    return (message if isinstance(message, str) else None), (kind if isinstance(kind, str) else None)


_KIND_WORDS: dict[str, str] = {
    "connection_refused": "connection refused", "dns": "host name not resolved", "timeout": "timed out",
    "http_error": "HTTP error", "auth": "not authorised", "rate_limited": "rate limited",
    "overloaded": "overloaded", "stream_cut": "stream cut mid-way", "malformed_stream": "malformed stream",
    "stream_error": "the provider reported an error in its stream", "connection": "connection failed",
}


def describe(failure: ModelFailure) -> str:
    """One sentence naming the failure: the warning's message and the CLI's stderr line."""
    parts = [f"the {failure.provider or 'model'} request failed: {_KIND_WORDS.get(failure.kind, failure.kind)}"]
    if failure.http_status is not None:
        parts.append(f"HTTP {failure.http_status}")
    if failure.retry_after is not None:
        parts.append(f"retry-after {failure.retry_after}")
    if failure.retries:
        parts.append(f"after {failure.retries} retr{'y' if failure.retries == 1 else 'ies'}"
                     + (f" (last HTTP {failure.last_status})" if failure.last_status is not None else ""))
    text = ", ".join(parts)
    if failure.provider_message:
        text += f": {failure.provider_message}"
    return text


def model_failure_warning(failure: ModelFailure):
    """The `warning` event every harness writes for a failed model request."""
    from .events import WarningEvent  # events imports this module for the field's type

    return WarningEvent(code=WarningCode.MODEL_REQUEST_FAILED, message=describe(failure), model_failure=failure)
