"""`LoopbackServer` — the local fake model server of `metaharness loopback` (see docs/scenarios.md).

What belongs here: routing (Messages, Responses, the side endpoints), stateless turn
selection, rendering each turn's calls into the requesting client's tools, `delay_ms`, the
`--expect-key` check, and the request log (in memory, and as JSON lines when asked).

Rules it keeps: a request's turn comes only from its own history, so retries and side
requests never advance the scenario; a request offering no tools is a side request answered
`ok`; past the last turn the answer is `(scenario complete)`; anything the client cannot be
shown is a 400 in the client's own error format naming the turn, the operation and the
offered tools, also written to stderr, and that turn stays refused for that client (Claude
Code retries a 400 with a wider tool offer, which must not rescue the call); every request is logged, answered or not, before any
delay starts (so a test can see a request in flight).
"""

from __future__ import annotations

import asyncio
import gzip
import hmac
import json
import os
import sys
import threading
import zlib
from datetime import datetime, timezone
from typing import IO, Any, Callable, Literal

import msgspec

from metaharness.protocol.failures import ModelFailure, kind_of_status
from metaharness.protocol.scenario import DEFAULT_USAGE, Scenario, ScenarioFailure

from . import failures, wire_anthropic, wire_chat, wire_gemini, wire_responses
from .http import Request, Responder
from .pricing import Meter
from .render import RenderError, RenderedCall, render_anthropic, render_responses
from .service import LocalService

ClientKind = Literal["anthropic", "openai", "chat", "gemini", "other"]
SIDE_TEXT = "ok"


class LoggedRequest(msgspec.Struct, kw_only=True):
    """One request as the loopback saw and answered it (one JSON line of the log)."""

    time: str
    method: str
    path: str  # path and query, as sent
    headers: dict[str, str]  # lower-cased names; a value equal to --expect-key is logged as "<expected key>"
    body: Any  # decoded JSON, or None
    client: ClientKind
    main: bool  # a main model request (consumes a turn); False for side requests and other paths
    turn: int | None  # the scenario turn that answered (len(turns) or more: the final text)
    turn_id: str | None
    status: int
    answer: dict[str, Any] | None  # {"text": …, "calls": [{kind, name, call_id, input}]}
    error: str | None
    delay_ms: int = 0
    usage: dict[str, int] | None = None  # the neutral token counts the answer reported


class _Injected(Exception):
    """The scenario's turn fails this request (its `fail`), raised before any answer is sent."""

    def __init__(self, failure: ScenarioFailure, model: str) -> None:
        super().__init__(failure.kind)
        self.failure, self.model = failure, model


class _Refusal(Exception):
    def __init__(self, status: int, message: str, error_type: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.error_type = status, message, error_type


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _client_of(path: str) -> ClientKind:
    if path.startswith("/v1/messages"):
        return "anthropic"
    if path.startswith("/v1/responses"):
        return "openai"
    if path.startswith("/v1/chat/completions"):
        return "chat"
    if path.startswith("/v1beta/models/"):
        return "gemini"
    return "other"


def _error_bytes(client: ClientKind, message: str, error_type: str) -> bytes:
    if client in ("openai", "chat"):
        return wire_responses.error_body(message, error_type)
    if client == "gemini":
        return wire_gemini.error_body(message)
    return wire_anthropic.error_body(message, error_type)


def _decode_body(request: Request) -> Any:
    raw = request.body
    encoding = (request.header("content-encoding") or "identity").lower().strip()
    try:
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding == "deflate":
            raw = zlib.decompress(raw)
        elif encoding not in ("identity", ""):
            raise _Refusal(400, f"the request body is compressed with {encoding!r}, which the loopback cannot decode")
    except (OSError, zlib.error, EOFError):
        raise _Refusal(400, f"the request body is not valid {encoding}") from None
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise _Refusal(400, "the request body is not JSON") from None


def presented_key(request: Request) -> str | None:
    """The credential a client sent: `x-api-key`, else the `Authorization: Bearer` value."""
    key = request.header("x-api-key")
    if key is not None:
        return key
    authorization = request.header("authorization")
    if authorization is not None and authorization[:7].lower() == "bearer ":
        return authorization[7:].strip()
    return None


class LoopbackServer(LocalService):
    """A fake model on 127.0.0.1 answering Claude Code and Codex from one scenario."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        port: int = 0,
        log_path: str | None = None,
        workdir: str | None = None,
        expect_key: str | None = None,
        minimal: bool = False,
        stderr: IO[str] | None = sys.stderr,
        on_failure: Callable[[ModelFailure], None] | None = None,
        meter: Meter | None = None,
    ) -> None:
        super().__init__(port=port)
        self.meter = meter  # prices every answer; once it refuses, no request is answered
        # Told of every failed model request this loopback serves (injected or refused), so the run
        # can write it as a MODEL_REQUEST_FAILED warning; called on the loopback's event loop.
        self.on_failure = on_failure
        self._served_failures: dict[tuple[str, int], int] = {}  # (client, turn) → fail served
        self._failed_attempts: dict[tuple[str, int | None], tuple[int, int | None]] = {}  # → (count, last status)
        self.scenario = scenario
        self.workdir = os.path.abspath(workdir or os.getcwd())
        self.expect_key = expect_key
        self.minimal = minimal
        self.requests: list[LoggedRequest] = []
        self._log_path = log_path
        self._log_file: IO[bytes] | None = None
        self._log_lock = threading.Lock()
        self._stderr = stderr
        # (client, turn) → the 400 text. Claude Code answers a 400 by retrying with fewer betas and
        # then with its full, undeferred tool list; a turn refused once stays refused for that client,
        # so a call that has no tool in the real offer never slips through on a fallback offer.
        self._unrenderable: dict[tuple[str, int], str] = {}

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> str:
        if self._log_path is not None and self._log_file is None:
            self._log_file = open(self._log_path, "ab")
        return await super().start()

    async def stop(self) -> None:
        await super().stop()
        with self._log_lock:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None

    def main_requests(self) -> list[LoggedRequest]:
        return [entry for entry in list(self.requests) if entry.main]

    # -- one request ---------------------------------------------------------------------

    def _record(self, entry: LoggedRequest) -> None:
        self.requests.append(entry)
        with self._log_lock:
            if self._log_file is not None:
                self._log_file.write(msgspec.json.encode(entry) + b"\n")
                self._log_file.flush()

    def _logged_headers(self, request: Request) -> dict[str, str]:
        headers = request.header_dict()
        if self.expect_key:
            for name in ("x-api-key", "authorization"):
                value = headers.get(name)
                if value is not None and self.expect_key in value:
                    headers[name] = value.replace(self.expect_key, "<expected key>")
        return headers

    async def _handle(self, request: Request, responder: Responder) -> None:
        client = _client_of(request.path)
        entry = LoggedRequest(
            time=_now(), method=request.method, path=request.target, headers=self._logged_headers(request),
            body=None, client=client, main=False, turn=None, turn_id=None, status=0, answer=None, error=None,
        )
        try:
            entry.body = _decode_body(request)
            await self._route(request, responder, entry)
        except _Injected as injected:
            entry.status, entry.error = injected.failure.status if injected.failure.kind == "status" else 200, \
                f"scripted failure: {injected.failure.kind}"
            entry.usage = None  # a failed answer reports no usage (and is never priced: `_charge` is not reached)
            self._record(entry)
            observed = await failures.serve(injected.failure, client, injected.model, responder)
            self._observed(client, entry, observed)
            if injected.failure.kind in failures.HELD:
                await failures.hold_forever()
        except _Refusal as refusal:
            entry.status, entry.error = refusal.status, refusal.message
            if refusal.status == 400 and self._stderr is not None:
                print(f"metaharness loopback: {refusal.message}", file=self._stderr, flush=True)
            self._record(entry)  # every refusal is raised before the entry was recorded
            await responder.send(refusal.status, [("content-type", "application/json")],
                                 _error_bytes(client, refusal.message, refusal.error_type))
            if client != "other":
                self._observed(client, entry, ModelFailure(
                    provider=failures.PROVIDER_OF_CLIENT.get(client), kind=kind_of_status(refusal.status, refusal.error_type),
                    http_status=refusal.status, provider_message=failures.bounded(refusal.message)))

    def _observed(self, client: str, entry: LoggedRequest, failure: ModelFailure) -> None:
        """Count this failed request against its turn (earlier ones are the client's retries), report it."""
        key = (client, entry.turn)
        count, last = self._failed_attempts.get(key, (0, None))
        self._failed_attempts[key] = (count + 1, failure.http_status)
        if count:
            failure.retries, failure.last_status = count, last
        if self.on_failure is not None:
            self.on_failure(failure)

    def _injected(self, client: str, entry: LoggedRequest) -> ScenarioFailure | None:
        """The turn's `fail`, while it still applies to this client's requests of that turn."""
        if not entry.main or entry.turn is None or entry.turn >= len(self.scenario.turns):
            return None
        failure = self.scenario.turns[entry.turn].fail
        if failure is None:
            return None
        key = (client, entry.turn)
        served = self._served_failures.get(key, 0)
        if failure.times is not None and served >= failure.times:
            return None
        self._served_failures[key] = served + 1
        return failure

    def _check_key(self, request: Request) -> None:
        if self.expect_key is None:
            return
        key = presented_key(request)
        if key is None or not hmac.compare_digest(key.encode(), self.expect_key.encode()):
            raise _Refusal(401, "invalid x-api-key" if request.header("x-api-key") is not None
                           else "the credential does not match the one this loopback expects", "authentication_error")

    async def _route(self, request: Request, responder: Responder, entry: LoggedRequest) -> None:
        method, path = request.method, request.path
        if path == "/api/hello" and method in ("HEAD", "GET"):
            entry.status = 200
            self._record(entry)
            await responder.send(200, [])
            return
        if path == "/v1/messages" and method == "POST":
            self._check_key(request)
            await self._answer_messages(request, responder, entry)
            return
        if path == "/v1/messages/count_tokens" and method == "POST":
            self._check_key(request)
            body = entry.body if isinstance(entry.body, dict) else {}
            await self._send_json(responder, entry, 200, {"input_tokens": wire_anthropic.count_tokens(body)})
            return
        if path == "/v1/models" and method == "GET":
            self._check_key(request)
            await self._send_json(responder, entry, 200, {"object": "list", "data": []})
            return
        if path == "/v1/responses" and method == "POST":
            self._check_key(request)
            await self._answer_responses(request, responder, entry)
            return
        if await self._route_more(request, responder, entry):
            return
        entry.status = 404
        entry.error = f"no route for {method} {path}"
        self._record(entry)
        await responder.send(404, [("content-type", "application/json")], json.dumps(
            {"type": "error", "error": {"type": "not_found_error", "message": entry.error}}).encode())

    async def _send_json(self, responder: Responder, entry: LoggedRequest, status: int, payload: Any) -> None:
        entry.status = status
        entry.answer = payload if isinstance(payload, dict) else None
        self._record(entry)
        await responder.send(status, [("content-type", "application/json")], json.dumps(payload).encode())

    def _select(self, body: dict[str, Any], count: int, offers: bool, entry: LoggedRequest) -> tuple[str | None, list[Any], int]:
        """(text, neutral calls, delay_ms) for this request; fills the log entry's turn fields."""
        if not offers:
            entry.usage = DEFAULT_USAGE.counts()
            return SIDE_TEXT, [], 0
        entry.main, entry.turn = True, count
        turn = self.scenario.answer(count)
        entry.turn_id, entry.usage = turn.id, turn.usage_counts()
        return turn.text, list(turn.calls), int(turn.delay_ms or 0)

    def _check_budget(self) -> None:
        refusal = self.meter.refusal() if self.meter is not None else None
        if refusal is not None:
            raise _Refusal(403, refusal, "permission_error")

    def _charge(self, entry: LoggedRequest, model: str) -> None:
        """The answer was sent: the meter prices it (the run may stop here)."""
        if self.meter is not None and entry.usage is not None:
            self.meter.charge(model, entry.usage)

    def _render(self, render: Any, client: str, body: dict[str, Any], neutral: list[Any], entry: LoggedRequest) -> list[RenderedCall]:
        if not entry.main or entry.turn is None:
            return []
        key = (client, entry.turn)
        if key in self._unrenderable:
            raise _Refusal(400, self._unrenderable[key])
        try:
            return [render(call, body.get("tools"), workdir=self.workdir, turn_index=entry.turn, turn_id=entry.turn_id)
                    for call in neutral]
        except RenderError as exc:
            self._unrenderable[key] = str(exc)
            raise _Refusal(400, str(exc)) from None

    async def _prepare(self, entry: LoggedRequest, api: str, wire: Any, render: Any, client: str,
                       default_model: str) -> tuple[dict, str | None, list[RenderedCall], str]:
        """What both APIs do before answering: pick the turn, render its calls into the client's
        tools, log the answer, honour the turn's delay."""
        body = entry.body
        if not isinstance(body, dict):
            raise _Refusal(400, f"the {api} request body is not a JSON object")
        self._check_budget()
        text, neutral, delay = self._select(body, wire.model_responses_in_history(body), wire.offers_tools(body), entry)
        injected = self._injected(client, entry)
        if injected is not None:
            await _sleep_ms(delay)
            raise _Injected(injected, str(body.get("model") or default_model))
        calls = self._render(render, client, body, neutral, entry)
        entry.status, entry.delay_ms, entry.answer = 200, delay, _answer_summary(text, calls)
        self._record(entry)
        await _sleep_ms(delay)
        return body, text, calls, str(body.get("model") or default_model)

    async def _answer_messages(self, request: Request, responder: Responder, entry: LoggedRequest) -> None:
        body, text, calls, model = await self._prepare(entry, "Messages", wire_anthropic, render_anthropic,
                                                       "anthropic", "claude-loopback")
        request_id = f"req_{os.urandom(12).hex()}"
        usage = wire_anthropic.usage_of(entry.usage or {})
        if body.get("stream") is not True:
            await responder.send(200, [("content-type", "application/json"), ("request-id", request_id)],
                                 json.dumps(wire_anthropic.message_object(model, text, calls, usage)).encode())
        else:
            await responder.start_stream(200, [("content-type", "text/event-stream"), ("cache-control", "no-cache"),
                                               ("request-id", request_id)])
            for name, data in wire_anthropic.sse_events(model, text, calls, usage):
                await responder.write(wire_anthropic.encode_event(name, data))
            await responder.end()
        self._charge(entry, model)

    async def _answer_responses(self, request: Request, responder: Responder, entry: LoggedRequest) -> None:
        body, text, calls, model = await self._prepare(entry, "Responses", wire_responses, render_responses,
                                                       "openai", "gpt-loopback")
        events = wire_responses.sse_events(model, text, calls, minimal=self.minimal,
                                           usage=wire_responses.usage_of(entry.usage or {}))
        if body.get("stream") is not True:
            await responder.send(200, [("content-type", "application/json")], json.dumps(events[-1]["response"]).encode())
        else:
            await responder.start_stream(200, [("content-type", "text/event-stream"), ("cache-control", "no-cache"),
                                               ("x-request-id", f"req_{os.urandom(12).hex()}")])
            for event in events:
                await responder.write(wire_responses.encode_event(event))
            await responder.end()
        self._charge(entry, model)

    # -- Chat Completions (opencode, oharness's chat provider) and Gemini (Gemini CLI) ----

    async def _route_more(self, request: Request, responder: Responder, entry: LoggedRequest) -> bool:
        method, path = request.method, request.path
        if path == "/v1/chat/completions" and method == "POST":
            self._check_key(request)
            await self._answer_chat(request, responder, entry)
            return True
        if path.startswith("/v1beta/models/") and method == "POST" and (
                path.endswith(":streamGenerateContent") or path.endswith(":generateContent")):
            if self.expect_key is not None and request.header("x-goog-api-key") is not None:
                if not hmac.compare_digest(request.header("x-goog-api-key").encode(), self.expect_key.encode()):
                    raise _Refusal(401, "the credential does not match the one this loopback expects")
            else:
                self._check_key(request)
            await self._answer_gemini(request, responder, entry, stream=path.endswith(":streamGenerateContent"))
            return True
        return False

    async def _answer_chat(self, request: Request, responder: Responder, entry: LoggedRequest) -> None:
        body, text, calls, model = await self._prepare(entry, "Chat Completions", wire_chat, wire_chat.render_chat,
                                                       "chat", "chat-loopback")
        usage = wire_chat.usage_of(entry.usage or {})
        if body.get("stream") is not True:
            await responder.send(200, [("content-type", "application/json")],
                                 json.dumps(wire_chat.completion_object(model, text, calls, usage)).encode())
        else:
            await responder.start_stream(200, [("content-type", "text/event-stream"), ("cache-control", "no-cache")])
            for chunk in wire_chat.sse_chunks(model, text, calls, usage):
                await responder.write(wire_chat.encode_chunk(chunk))
            await responder.write(wire_chat.DONE)
            await responder.end()
        self._charge(entry, model)

    async def _answer_gemini(self, request: Request, responder: Responder, entry: LoggedRequest, *, stream: bool) -> None:
        body, text, calls, _ = await self._prepare(entry, "Gemini", wire_gemini, wire_gemini.render_gemini,
                                                   "gemini", "gemini-loopback")
        model = wire_gemini.model_of(request.path)
        if not entry.main:
            text = wire_gemini.side_text(body, SIDE_TEXT)
        usage = wire_gemini.usage_of(entry.usage or {})
        if not stream:
            await responder.send(200, [("content-type", "application/json")],
                                 json.dumps(wire_gemini.response_object(model, text, calls, usage)).encode())
        else:
            await responder.start_stream(200, [("content-type", "text/event-stream")])
            for chunk in wire_gemini.sse_chunks(model, text, calls, usage):
                await responder.write(wire_gemini.encode_chunk(chunk))
            await responder.end()
        self._charge(entry, model)


def _answer_summary(text: str | None, calls: list[RenderedCall]) -> dict[str, Any]:
    return {"text": text, "calls": [call.summary() for call in calls]}


async def _sleep_ms(delay_ms: int) -> None:
    if delay_ms > 0:
        await asyncio.sleep(delay_ms / 1000)

