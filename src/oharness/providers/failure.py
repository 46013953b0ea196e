"""A provider SDK's exception → `ProviderError` carrying the failure as a value (`ModelFailure`).

Rules it keeps: the kinds and the message bounding are metaharness's (protocol/failures.py), so a
failed request reads the same on oharness as on a vendor behind the loopback; the SDKs retry once
(`max_retries=1`) and count what they did, read back from the request log of this call.
"""

from __future__ import annotations

from metaharness.protocol.failures import (
    ModelFailure, bounded, describe, exception_text, kind_of_exception, kind_of_status, message_of_body,
)

from ..model import ProviderError


def failure_of(exc: BaseException, provider: str, attempts: list[int | None]) -> ModelFailure:
    """Classify `exc`; `attempts` holds the status of every request this call sent (None: none)."""
    retries = max(0, len(attempts) - 1) or None
    last = attempts[-2] if retries else None
    common = dict(provider=provider, retries=retries, last_status=last)
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        message, error_type = message_of_body(getattr(exc, "body", None))
        response = getattr(exc, "response", None)
        retry_after = response.headers.get("retry-after") if response is not None else None
        return ModelFailure(kind=kind_of_status(status, error_type), http_status=status,
                            provider_message=bounded(message or getattr(exc, "message", None) or str(exc)),
                            retry_after=retry_after, **common)
    return ModelFailure(kind=kind_of_exception(exc), provider_message=bounded(exception_text(exc)), **common)


def provider_error(exc: BaseException, provider: str, attempts: list[int | None]) -> ProviderError:
    failure = failure_of(exc, provider, attempts)
    error = ProviderError(describe(failure))
    error.failure = failure
    return error


def request_timeout() -> float:
    """Seconds a model request may take (`OHARNESS_REQUEST_TIMEOUT`, default the SDKs' 600)."""
    import os

    try:
        return max(0.1, float(os.environ.get("OHARNESS_REQUEST_TIMEOUT", "600")))
    except ValueError:
        return 600.0


class AttemptLog:
    """The requests one model call sent, and each one's status (None while it has none): the SDK's
    retries as they happened, kept through httpx's event hooks."""

    def __init__(self) -> None:
        self.attempts: list[int | None] = []

    def hooks(self) -> dict:
        async def on_request(request) -> None:
            self.attempts.append(None)

        async def on_response(response) -> None:
            if self.attempts:
                self.attempts[-1] = response.status_code

        return {"request": [on_request], "response": [on_response]}

    def reset(self) -> list[int | None]:
        self.attempts = []
        return self.attempts
