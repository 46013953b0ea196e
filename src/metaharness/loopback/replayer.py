"""`ReplayServer` — answers a harness from a cassette, offline, and says where it diverges.

What belongs here: a 127.0.0.1 listener that answers each request with a recorded response,
choosing it by route and conversation state, and reports a request the recording does not hold.

Rules it keeps: exchanges are served in recorded order within a route (method and path), and a
request takes the first unserved exchange of its route whose conversation state it repeats — so
identical requests (retries, side requests) are answered in turn and concurrent requests on
different routes cannot steal each other's answers; a request whose state matches none is a
divergence, reported once per request through `on_divergence(message)` naming the exchange it
should have been and the first differing part; strict, it is answered 409 and so is every
request after it (the host stops the run); lenient, it is answered with that exchange anyway. A
route with nothing left is a divergence too. Nothing here opens a network connection.
"""

from __future__ import annotations

import json
from typing import Callable
from urllib.parse import urlsplit

from . import cassette
from .http import Request, Responder
from .service import LocalService

DIVERGED_STATUS = 409


class ReplayServer(LocalService):
    def __init__(self, exchanges: list[cassette.Exchange], *, strict: bool = True, port: int = 0) -> None:
        super().__init__(port=port)
        self.exchanges = list(exchanges)
        self.strict = strict
        self._unserved = list(self.exchanges)
        self.on_divergence: Callable[[str], None] = lambda message: None
        self.divergences: list[str] = []
        self.requests = 0
        self.served: list[int] = []  # exchange numbers, in the order they were answered

    @property
    def stopped(self) -> bool:
        return self.strict and bool(self.divergences)

    def unserved(self) -> list[cassette.Exchange]:
        return list(self._unserved)

    def _diverged(self, message: str) -> None:
        self.divergences.append(message)
        self.on_divergence(message)

    def _choose(self, method: str, path: str, body: object) -> tuple[cassette.Exchange | None, str | None]:
        """(the exchange to answer with, the divergence message or None)."""
        route = (method, urlsplit(path).path)
        lane = [e for e in self._unserved if e.route == route]
        if not lane:
            return None, (f"the harness's request {self.requests} ({method} {route[1]}) has no recorded exchange "
                          f"left on that route; the cassette holds {len(self.exchanges)} exchanges")
        part, state = cassette.conversation_state(path, body)
        live = cassette.digest(state)
        for exchange in lane:
            if exchange.digest == live or cassette.first_difference(exchange.state, state, exchange.part) is None:
                return exchange, None
        expected = lane[0]
        where = cassette.first_difference(expected.state, state, expected.part) or part
        return expected, (f"exchange {expected.number} ({method} {route[1]}): the harness's conversation state "
                          f"differs from the recording; the first differing part is {where}")

    async def _handle(self, request: Request, responder: Responder) -> None:
        self.requests += 1
        if self.stopped:
            await self._refuse(responder, "the replay stopped at an earlier divergence")
            return
        body = cassette.decode_request_body(request.body)
        exchange, divergence = self._choose(request.method, request.target, body)
        if divergence is not None:
            self._diverged(divergence)
            if self.strict or exchange is None:
                await self._refuse(responder, divergence)
                return
        assert exchange is not None
        self._unserved.remove(exchange)
        self.served.append(exchange.number)
        headers = [(name, value) for name, value in exchange.response_headers.items()]
        await responder.send(exchange.status, headers, exchange.response_body)

    async def _refuse(self, responder: Responder, message: str) -> None:
        body = json.dumps({"type": "error", "error": {"type": "replay_diverged", "message": message}}).encode()
        await responder.send(DIVERGED_STATUS, [("content-type", "application/json")], body)
