"""`CredentialProxy` — the authenticating reverse proxy of the `loopback` credential mode (docs/guides/claude-and-codex.md).

What belongs here: a 127.0.0.1 listener that accepts only requests carrying this run's
placeholder key, and forwards them to the upstream base URL with the real key put in the
same header the client used (`x-api-key`, or `Authorization: Bearer`), streaming the answer
back unchanged.

Rules it keeps: the real key lives only in this object's memory and in the upstream request
— never in a log, an error message, a response, `repr`, or anything the child can read; a
request with any other key, or none, is refused 401 in the client's error format and never
forwarded; proxies from the environment are ignored (`trust_env=False`); bodies and answers
pass through byte for byte (compressed answers stay compressed).

Only the model endpoints the vendor calls are forwarded (`FORWARDED`, per wire): the
placeholder sits in the child's environment, where the agent's shell can read it, so a
placeholder-keyed request to anything else (files, batches, organisation endpoints) is
refused 403, never forwarded, and reported through `on_refused` (the adapter writes a
`warning` naming it).

Every model answer it passes on is priced (`usage.answer_usage`, then the run's `Meter`); once the
meter says the budget is spent, a request is answered 403 with the meter's sentence, not forwarded.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Callable

import httpx

from metaharness.protocol.failures import (
    ModelFailure, bounded, exception_text, kind_of_exception, kind_of_status, message_of_body,
)

from . import wire_anthropic, wire_responses
from .pricing import Meter
from .usage import answer_usage
from .http import ClientGone, Request, Responder
from .service import LocalService

HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length",
})


# The method and path of every model endpoint each wire's vendor calls; nothing else is forwarded.
FORWARDED: dict[str, frozenset[tuple[str, str]]] = {
    "anthropic": frozenset({("POST", "/v1/messages"), ("POST", "/v1/messages/count_tokens"), ("GET", "/v1/models")}),
    "responses": frozenset({("POST", "/v1/responses"), ("GET", "/v1/models")}),
}
FORWARDED["any"] = FORWARDED["anthropic"] | FORWARDED["responses"]  # a proxy not bound to one vendor


def forwarded(wire: str, method: str, path: str) -> bool:
    """Is `method path` a model endpoint of `wire`? Exact match: no prefix, no normalising."""
    return (method, path) in FORWARDED[wire]


def refused_message(method: str, target: str) -> str:
    """The `warning` an adapter writes for a request the proxy refused (code PROXY_REFUSED)."""
    return f"the credential proxy refused {method} {target}: not a model endpoint, so it was not forwarded with the real key"


def new_placeholder() -> str:
    return f"mh-placeholder-{secrets.token_hex(16)}"


def charge_answer(meter: Meter, path: str, encoding: str | None, body: bytes) -> None:
    """Price one whole model answer (as sent, `encoding` its content-encoding) on `meter`; an
    answer whose usage cannot be read is not charged."""
    if encoding and encoding.lower() in ("gzip", "deflate"):
        import zlib

        try:
            body = zlib.decompress(body, 47 if encoding.lower() == "gzip" else 15)
        except zlib.error:
            return
    if (found := answer_usage(path, body)) is not None:
        meter.charge(*found)


def budget_refusal(meter: Meter | None, path: str) -> tuple[int, bytes] | None:
    """The 403 answer (status, body in the client's error format) to a request made once the run's
    budget is spent, or None while it may be forwarded."""
    if meter is None or (sentence := meter.refusal()) is None:
        return None
    return _error(path, 403, sentence, "permission_error")


def _error(path: str, status: int, message: str, error_type: str) -> tuple[int, bytes]:
    body = (wire_responses.error_body(message, error_type) if "/responses" in path
            else wire_anthropic.error_body(message, error_type))
    return status, body


class CredentialProxy(LocalService):
    """Forwards placeholder-keyed requests to `upstream` with the real key substituted."""

    def __init__(self, upstream: str, real_key: str, *, placeholder: str | None = None, port: int = 0,
                 timeout: float = 600.0, wire: str = "any",
                 on_refused: Callable[[str, str], None] | None = None,
                 on_failure: Callable[[ModelFailure], None] | None = None,
                 meter: Meter | None = None) -> None:
        self.meter = meter
        if not real_key:
            raise ValueError("the credential proxy needs a non-empty real key")
        if wire not in FORWARDED:
            raise ValueError(f"unknown wire {wire!r}; expected one of {', '.join(FORWARDED)}")
        self.wire = wire
        self._on_refused = on_refused  # (method, target) of a placeholder-keyed request not forwarded
        # Told of every forwarded model request that failed: unreachable upstream, an error status,
        # an answer cut mid-way (a MODEL_REQUEST_FAILED warning in the run).
        self._on_failure = on_failure
        super().__init__(port=port)
        self.upstream = upstream.rstrip("/")
        self.placeholder = placeholder or new_placeholder()
        if hmac.compare_digest(self.placeholder.encode(), real_key.encode()):
            raise ValueError("the placeholder must differ from the real key")
        self.__real_key = real_key
        self._timeout = timeout
        self._client: httpx.AsyncClient | None = None
        self.forwarded = 0
        self.refused = 0

    def __repr__(self) -> str:
        return f"CredentialProxy(upstream={self.upstream!r}, url={self.url!r}, placeholder={self.placeholder!r})"

    async def start(self) -> str:
        self._client = httpx.AsyncClient(trust_env=False, follow_redirects=False,
                                         timeout=httpx.Timeout(self._timeout, connect=10.0))
        return await super().start()

    async def stop(self) -> None:
        await super().stop()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _provider(self) -> str | None:
        return {"anthropic": "anthropic", "responses": "openai"}.get(self.wire)

    def _failed(self, failure: ModelFailure) -> None:
        if self._on_failure is not None:
            self._on_failure(failure)

    async def _refuse_endpoint(self, request: Request, responder: Responder) -> None:
        self.refused += 1
        if self._on_refused is not None:
            self._on_refused(request.method, request.target)
        status, body = _error(request.path, 403, f"this proxy forwards only the model endpoints; "
                                                 f"{request.method} {request.path} is not one", "permission_error")
        await responder.send(status, [("content-type", "application/json")], body)

    def _substituted_headers(self, request: Request) -> list[tuple[str, str]] | None:
        """The headers to forward, or None when the request does not carry exactly our placeholder."""
        placeholder = self.placeholder.encode()
        seen = False
        headers: list[tuple[str, str]] = []
        for name, value in request.headers:
            if name in HOP_BY_HOP:
                continue
            if name == "x-api-key":
                if not hmac.compare_digest(value.strip().encode(), placeholder):
                    return None
                seen, value = True, self.__real_key
            elif name == "authorization":
                scheme, _, token = value.partition(" ")
                if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), placeholder):
                    return None
                seen, value = True, f"Bearer {self.__real_key}"
            headers.append((name, value))
        return headers if seen else None

    async def _handle(self, request: Request, responder: Responder) -> None:
        headers = self._substituted_headers(request)
        if headers is None:
            self.refused += 1
            status, body = _error(request.path, 401, "this proxy accepts only the run's placeholder key",
                                  "authentication_error")
            await responder.send(status, [("content-type", "application/json")], body)
            return
        if not forwarded(self.wire, request.method, request.path):
            await self._refuse_endpoint(request, responder)
            return
        if (budget := budget_refusal(self.meter, request.path)) is not None:
            self.refused += 1
            status, body = budget
            await responder.send(status, [("content-type", "application/json")], body)
            return
        assert self._client is not None
        upstream_request = self._client.build_request(request.method, self.upstream + request.target,
                                                      headers=headers, content=request.body)
        try:
            upstream = await self._client.send(upstream_request, stream=True)
        except httpx.HTTPError as exc:
            self._failed(ModelFailure(provider=self._provider(), kind=kind_of_exception(exc),
                                      provider_message=bounded(exception_text(exc))))
            status, body = _error(request.path, 502,
                                  f"the upstream model endpoint {self.upstream} could not be reached ({type(exc).__name__})",
                                  "api_error")
            await responder.send(status, [("content-type", "application/json")], body)
            return
        self.forwarded += 1
        seen = bytearray() if self.meter is not None and upstream.status_code == 200 else None
        try:
            reply_headers = [(name, value) for name, value in upstream.headers.multi_items()
                             if name.lower() not in HOP_BY_HOP]
            if upstream.status_code >= 400:  # an error body is small: read it to name the failure
                body = await upstream.aread()
                message, error_type = message_of_body(body)
                self._failed(ModelFailure(
                    provider=self._provider(), kind=kind_of_status(upstream.status_code, error_type),
                    http_status=upstream.status_code, provider_message=bounded(message),
                    retry_after=upstream.headers.get("retry-after")))
                reply_headers = [(n, v) for n, v in reply_headers if n.lower() not in ("content-length", "content-encoding")]
                await responder.send(upstream.status_code, reply_headers, body)
                return
            await responder.start_stream(upstream.status_code, reply_headers)
            async for chunk in upstream.aiter_raw():
                if seen is not None:
                    seen += chunk
                await responder.write(chunk)
            await responder.end()
        except httpx.HTTPError as exc:
            self._failed(ModelFailure(provider=self._provider(), kind="stream_cut", http_status=upstream.status_code,
                                      provider_message=bounded(exception_text(exc))))
            raise ClientGone() from None  # upstream broke mid-answer: end this connection, no partial "success"
        finally:
            await upstream.aclose()
        self._charge(request.path, upstream.headers.get("content-encoding"), seen)

    def _charge(self, path: str, encoding: str | None, seen: bytearray | None) -> None:
        if seen is not None and self.meter is not None:
            charge_answer(self.meter, path, encoding, bytes(seen))
