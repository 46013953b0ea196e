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


def _anthropic_stream(model: str, text, calls) -> list[bytes]:
    return [wire_anthropic.encode_event(name, data) for name, data in wire_anthropic.sse_events(model, text, calls)]


def _responses_stream(model: str, text, calls) -> list[bytes]:
    return [wire_responses.encode_event(event) for event in wire_responses.sse_events(model, text, calls)]


# wire → (its module, the kind of a rendered call, the id prefix, the stream's bytes)
WIRES = {
    "anthropic": (wire_anthropic, "tool_use", "toolu_", _anthropic_stream),
    "responses": (wire_responses, "function_call", "call_", _responses_stream),
}


class StandIn(LocalService):
    def __init__(self, turns: list[dict], *, key: str, wire: str) -> None:
        super().__init__()
        self.turns = turns  # each {"text": …, "calls": [(tool, input), …]}
        self.key = key
        self.wire = WIRES[wire]
        self.seen_keys: list[str | None] = []
        self.requests: list[dict] = []
        self._lock = threading.Lock()

    async def _handle(self, request: Request, responder: Responder) -> None:
        module, call_kind, prefix, stream = self.wire
        presented = presented_key(request)
        with self._lock:
            self.seen_keys.append(presented)
        if presented is None or not hmac.compare_digest(presented.encode(), self.key.encode()):
            await responder.send(401, [("content-type", "application/json")],
                                 module.error_body("invalid api key", "authentication_error"))
            return
        body = json.loads(request.body)
        self.requests.append(body)
        index = module.model_responses_in_history(body)
        turn = self.turns[index] if index < len(self.turns) else {"text": "(scenario complete)"}
        calls = [RenderedCall(call_kind, tool, f"{prefix}{uuid.uuid4().hex[:20]}", arguments)
                 for tool, arguments in turn.get("calls", [])]
        await responder.start_stream(200, [("content-type", "text/event-stream")])
        for chunk in stream(str(body.get("model")), turn.get("text"), calls):
            await responder.write(chunk)
        await responder.end()


def AnthropicStandIn(turns: list[dict], *, key: str) -> StandIn:
    return StandIn(turns, key=key, wire="anthropic")


def ResponsesStandIn(turns: list[dict], *, key: str) -> StandIn:
    return StandIn(turns, key=key, wire="responses")
