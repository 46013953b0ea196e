"""Stand-in upstreams playing the Anthropic Messages and OpenAI Responses APIs for oharness's tools.

The loopback renders a scenario into Claude Code's and Codex's tool names; oharness offers its
own (`bash`, `read`, …), so these play the API's part for it with the loopback's own wire code:
the turn is the number of model responses in the request's history, the answer the full SSE
sequence, and a request without the expected key (`x-api-key` or a bearer token) is refused 401
as the real API would.
"""

from __future__ import annotations

import hmac
import json
import threading
import uuid

from metaharness.loopback import wire_anthropic, wire_responses
from metaharness.loopback.http import Request, Responder
from metaharness.loopback.render import RenderedCall
from metaharness.loopback.server import presented_key
from metaharness.loopback.service import LocalService


class AnthropicStandIn(LocalService):
    def __init__(self, turns: list[dict], *, key: str) -> None:
        super().__init__()
        self.turns = turns  # each {"text": …, "calls": [(tool, input), …]}
        self.key = key
        self.seen_keys: list[str | None] = []
        self.requests: list[dict] = []
        self._lock = threading.Lock()

    async def _handle(self, request: Request, responder: Responder) -> None:
        presented = presented_key(request)
        with self._lock:
            self.seen_keys.append(presented)
        if presented is None or not hmac.compare_digest(presented.encode(), self.key.encode()):
            await responder.send(401, [("content-type", "application/json")],
                                 wire_anthropic.error_body("invalid x-api-key", "authentication_error"))
            return
        body = json.loads(request.body)
        self.requests.append(body)
        index = wire_anthropic.model_responses_in_history(body)
        turn = self.turns[index] if index < len(self.turns) else {"text": "(scenario complete)"}
        calls = [RenderedCall("tool_use", tool, f"toolu_{uuid.uuid4().hex[:20]}", arguments)
                 for tool, arguments in turn.get("calls", [])]
        await responder.start_stream(200, [("content-type", "text/event-stream")])
        for name, data in wire_anthropic.sse_events(str(body.get("model")), turn.get("text"), calls):
            await responder.write(wire_anthropic.encode_event(name, data))
        await responder.end()


class ResponsesStandIn(AnthropicStandIn):
    async def _handle(self, request: Request, responder: Responder) -> None:
        presented = presented_key(request)
        with self._lock:
            self.seen_keys.append(presented)
        if presented is None or not hmac.compare_digest(presented.encode(), self.key.encode()):
            await responder.send(401, [("content-type", "application/json")],
                                 wire_responses.error_body("invalid api key", "invalid_request_error"))
            return
        body = json.loads(request.body)
        self.requests.append(body)
        index = wire_responses.model_responses_in_history(body)
        turn = self.turns[index] if index < len(self.turns) else {"text": "(scenario complete)"}
        calls = [RenderedCall("function_call", tool, f"call_{uuid.uuid4().hex[:20]}", arguments)
                 for tool, arguments in turn.get("calls", [])]
        await responder.start_stream(200, [("content-type", "text/event-stream")])
        for event in wire_responses.sse_events(str(body.get("model")), turn.get("text"), calls):
            await responder.write(wire_responses.encode_event(event))
        await responder.end()
