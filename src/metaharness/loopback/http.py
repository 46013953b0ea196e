"""A small HTTP/1.1 server on asyncio streams, for the loopback and the credential proxy.

What belongs here: reading requests off a socket (request line, headers, a body sent with
Content-Length or chunked), writing fixed or chunked-streamed responses, keep-alive, and
a listener bound to 127.0.0.1 only. Nothing here knows about models or scenarios.

Rules it keeps: never binds anything but 127.0.0.1; never compresses a response; a request
it cannot parse gets a 400 and the connection is closed; a client that goes away mid-answer
ends that connection quietly (never a traceback); `stop()` closes every open connection so
nothing outlives the server.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Awaitable, Callable
from urllib.parse import urlsplit

HOST = "127.0.0.1"
MAX_HEADER_LINE = 65536
MAX_HEADERS = 200
MAX_BODY = 64 * 1024 * 1024

REASONS = {
    100: "Continue", 200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
    405: "Method Not Allowed", 409: "Conflict", 413: "Payload Too Large", 500: "Internal Server Error",
    502: "Bad Gateway",
}


class BadRequest(Exception):
    """The bytes on the socket are not an HTTP/1.1 request we accept."""


class ClientGone(Exception):
    """The client closed the connection while we were answering."""


@dataclass
class Request:
    method: str
    target: str  # path and query, as sent
    version: str
    headers: list[tuple[str, str]]  # names lower-cased, in arrival order
    body: bytes = b""

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> str:
        return urlsplit(self.target).query

    def header(self, name: str, default: str | None = None) -> str | None:
        name = name.lower()
        for key, value in self.headers:
            if key == name:
                return value
        return default

    def header_dict(self) -> dict[str, str]:
        """Headers as a dict (repeated names joined with ", ", as HTTP allows)."""
        merged: dict[str, str] = {}
        for key, value in self.headers:
            merged[key] = f"{merged[key]}, {value}" if key in merged else value
        return merged

    @property
    def keep_alive(self) -> bool:
        connection = (self.header("connection") or "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in connection
        return "close" not in connection


@dataclass
class Responder:
    """Writes one response to one request; either `send` once or `start_stream` + `write` + `end`."""

    writer: asyncio.StreamWriter
    head_only: bool
    started: bool = False
    finished: bool = False
    status: int | None = None
    _chunked: bool = field(default=False, repr=False)

    def _head(self, status: int, headers: list[tuple[str, str]]) -> bytes:
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
        lines += [f"{name}: {value}" for name, value in headers]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _write(self, data: bytes) -> None:
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise ClientGone() from exc

    async def send(self, status: int, headers: list[tuple[str, str]], body: bytes = b"") -> None:
        assert not self.started, "response already started"
        self.started, self.finished, self.status = True, True, status
        head = self._head(status, [*headers, ("content-length", str(len(body)))])
        await self._write(head if self.head_only else head + body)

    async def start_stream(self, status: int, headers: list[tuple[str, str]]) -> None:
        assert not self.started, "response already started"
        self.started, self.status, self._chunked = True, status, not self.head_only
        extra = [("transfer-encoding", "chunked")] if self._chunked else [("content-length", "0")]
        await self._write(self._head(status, [*headers, *extra]))

    async def write(self, data: bytes) -> None:
        if self._chunked and data:
            await self._write(b"%x\r\n%s\r\n" % (len(data), data))

    async def abort(self) -> None:
        """Drop the connection where it stands: a response cut mid-way (scenario `fail.kind: cut`)."""
        self.finished = True
        transport = self.writer.transport
        if transport is not None:
            transport.abort()

    async def end(self) -> None:
        if self._chunked and not self.finished:
            await self._write(b"0\r\n\r\n")
        self.finished = True


Handler = Callable[[Request, Responder], Awaitable[None]]


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise BadRequest("a header line is too long") from None
    if len(line) > MAX_HEADER_LINE:
        raise BadRequest("a header line is too long")
    return line.rstrip(b"\r\n")


async def read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Request | None:
    """One request off the stream; None when the client closed between requests."""
    try:
        line = await _read_line(reader)
        while line == b"":  # tolerate stray CRLF between keep-alive requests (RFC 9112 § 2.2)
            line = await _read_line(reader)
    except asyncio.IncompleteReadError:
        return None
    parts = line.decode("latin-1").split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest("the request line is not `METHOD TARGET HTTP/1.x`")
    method, target, version = parts
    headers: list[tuple[str, str]] = []
    while True:
        try:
            raw = await _read_line(reader)
        except asyncio.IncompleteReadError:
            raise BadRequest("the connection closed inside the headers") from None
        if raw == b"":
            break
        name, sep, value = raw.decode("latin-1").partition(":")
        if not sep or not name or name != name.strip():
            raise BadRequest("a header line has no name")
        headers.append((name.lower(), value.strip()))
        if len(headers) > MAX_HEADERS:
            raise BadRequest("too many headers")
    request = Request(method=method.upper(), target=target, version=version, headers=headers)
    if (request.header("expect") or "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
    request.body = await _read_body(reader, request)
    return request


async def _read_body(reader: asyncio.StreamReader, request: Request) -> bytes:
    try:
        if "chunked" in (request.header("transfer-encoding") or "").lower():
            chunks: list[bytes] = []
            total = 0
            while True:
                size_line = (await _read_line(reader)).split(b";")[0].strip()
                try:
                    size = int(size_line, 16)
                except ValueError:
                    raise BadRequest("a chunk size is not hexadecimal") from None
                if size == 0:
                    while await _read_line(reader) != b"":  # trailers, ignored
                        pass
                    return b"".join(chunks)
                total += size
                if total > MAX_BODY:
                    raise BadRequest("the request body is too large")
                chunks.append(await reader.readexactly(size))
                await reader.readexactly(2)
        length_text = request.header("content-length")
        if length_text is None:
            return b""
        try:
            length = int(length_text)
        except ValueError:
            raise BadRequest("Content-Length is not a number") from None
        if length < 0 or length > MAX_BODY:
            raise BadRequest("the request body is too large")
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise BadRequest("the connection closed inside the body") from None


class HttpServer:
    """Listens on 127.0.0.1:`port` and hands each request to `handler`."""

    def __init__(self, handler: Handler, *, port: int = 0) -> None:
        self._handler = handler
        self._port = port
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port: int | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve_connection, HOST, self._port)
        self.port = self._server.sockets[0].getsockname()[1]
        return f"http://{HOST}:{self.port}"

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._connections):
            writer.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2)
        self._server = None

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._connections.add(writer)
        try:
            while True:
                try:
                    request = await read_request(reader, writer)
                except BadRequest as exc:
                    responder = Responder(writer, head_only=False)
                    body = f'{{"error":{{"type":"invalid_request_error","message":"bad HTTP request: {exc}"}}}}'
                    with contextlib.suppress(ClientGone):
                        await responder.send(400, [("content-type", "application/json"), ("connection", "close")], body.encode())
                    return
                if request is None:
                    return
                responder = Responder(writer, head_only=request.method == "HEAD")
                try:
                    await self._handler(request, responder)
                except (ClientGone, ConnectionError, asyncio.CancelledError):
                    raise
                except Exception as exc:  # a bug in a handler: answer 500 rather than hang the client
                    if not responder.started:
                        body = f'{{"error":{{"type":"api_error","message":"internal error: {type(exc).__name__}"}}}}'
                        await responder.send(500, [("content-type", "application/json"), ("connection", "close")], body.encode())
                    return
                if not responder.finished:
                    await responder.end()
                if not request.keep_alive:
                    return
        except (ClientGone, ConnectionError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:
            return
        finally:
            self._connections.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()
            if task is not None:
                self._tasks.discard(task)
