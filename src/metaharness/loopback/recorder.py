"""`RecordingProxy` — forwards a harness's model traffic to its upstream and writes each exchange
to a cassette.

What belongs here: a 127.0.0.1 listener that forwards every request (any wire, any path) to the
upstream base URL, streams the answer back as it arrives, and — once the answer is complete —
appends the exchange to the cassette through `cassette.exchange_line`; a `Recording` given to it
(what a replay needs of the run) is the cassette's first line.

Rules it keeps: headers pass to the upstream unchanged (a credential proxy in front of it has
already put the real key in) but reach the cassette only through its allowlist and masks; the
upstream is asked for an uncompressed answer (`accept-encoding: identity`) so the cassette holds
text that can be masked and replayed; an exchange is numbered when its request arrives and
written whole, under a lock, when its answer ends; an upstream that cannot be reached is a 502
and is recorded like any other answer; proxies from the environment are ignored; the cassette is
written as `FILE.partial` and takes FILE's place when the proxy stops, only if an exchange was
recorded.

Priced, when the run gives it its meter (`meter`: nothing closer to the harness prices the traffic,
so the recorder does): every whole 200 answer is charged as the credential proxy charges it, and
once the budget is spent a request is answered 403 with the meter's sentence, not forwarded (the
refusal is recorded, as the harness saw it).
"""

from __future__ import annotations

import os
import threading
from typing import IO

import httpx

from . import cassette
from .http import ClientGone, Request, Responder
from .pricing import Meter
from .proxy import HOP_BY_HOP, budget_refusal, charge_answer
from .service import LocalService


class RecordingProxy(LocalService):
    def __init__(self, upstream: str, cassette_path: str, *, redact: list[str] | None = None, port: int = 0,
                 timeout: float = 600.0, recording: cassette.Recording | None = None) -> None:
        super().__init__(port=port)
        self.upstream = upstream.rstrip("/")
        self.cassette_path = cassette_path
        self.redactor = cassette.Redactor.of(redact or [])
        self._timeout = timeout
        self._client: httpx.AsyncClient | None = None
        self._file: IO[bytes] | None = None
        self._lock = threading.Lock()
        self.exchanges = 0
        self.recording = recording
        self._partial = cassette_path + ".partial"
        self.meter: Meter | None = None  # set by the host when the recorder is the one that prices the run

    def __repr__(self) -> str:
        return f"RecordingProxy(upstream={self.upstream!r}, url={self.url!r}, cassette={self.cassette_path!r})"

    async def start(self) -> str:
        # Written beside the cassette and put in its place when the proxy stops, so a run that
        # never reached its model (refused, stopped at once) leaves an earlier cassette as it was.
        self._file = open(self._partial, "wb")
        if self.recording is not None:
            self._write(self.recording.line())
        self._client = httpx.AsyncClient(trust_env=False, follow_redirects=False,
                                         timeout=httpx.Timeout(self._timeout, connect=10.0))
        return await super().start()

    async def stop(self) -> None:
        await super().stop()
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
                if self.exchanges:
                    os.replace(self._partial, self.cassette_path)
                else:
                    os.unlink(self._partial)

    def _write(self, line: bytes) -> None:
        with self._lock:
            if self._file is not None:
                self._file.write(line)
                self._file.flush()

    async def _handle(self, request: Request, responder: Responder) -> None:
        self.exchanges += 1
        number = self.exchanges
        headers = [(n, v) for n, v in request.headers if n not in HOP_BY_HOP and n != "accept-encoding"]
        headers.append(("accept-encoding", "identity"))
        if (budget := budget_refusal(self.meter, request.path)) is not None:
            status, message = budget
            reply = [("content-type", "application/json")]
            self._record(number, request, status, reply, message)
            await responder.send(status, reply, message)
            return
        assert self._client is not None
        outgoing = self._client.build_request(request.method, self.upstream + request.target, headers=headers,
                                              content=request.body)
        body = bytearray()
        try:
            upstream = await self._client.send(outgoing, stream=True)
        except httpx.HTTPError as exc:
            message = (f'{{"error":{{"type":"api_error","message":"the upstream model endpoint {self.upstream} '
                       f'could not be reached ({type(exc).__name__})"}}}}').encode()
            reply = [("content-type", "application/json")]
            self._record(number, request, 502, reply, message)
            await responder.send(502, reply, message)
            return
        try:
            reply = [(n, v) for n, v in upstream.headers.multi_items() if n.lower() not in HOP_BY_HOP]
            await responder.start_stream(upstream.status_code, reply)
            async for chunk in upstream.aiter_raw():
                body += chunk
                await responder.write(chunk)
            await responder.end()
        except httpx.HTTPError:
            raise ClientGone() from None  # upstream broke mid-answer: nothing whole to record
        finally:
            await upstream.aclose()
        self._record(number, request, upstream.status_code, reply, bytes(body))
        if self.meter is not None and upstream.status_code == 200:
            charge_answer(self.meter, request.path, upstream.headers.get("content-encoding"), bytes(body))

    def _record(self, number: int, request: Request, status: int, reply: list[tuple[str, str]], body: bytes) -> None:
        self._write(cassette.exchange_line(number, request.method, request.target, request.headers, request.body,
                                           status, reply, body, self.redactor))
