"""JSON-RPC 2.0 over the app-server's stdio, one JSON object per line (docs/guides/claude-and-codex.md).

What belongs here: framing, id bookkeeping and the raw capture — nothing about
approvals or events. Three kinds of incoming line are told apart: responses to our
requests (resolve a future), server requests (carry `method` and `id`; handed to
`on_request`), notifications (`method` without `id`; handed to `on_notification`).

Rules kept:
* every line goes through one writer, JSON only, compact;
* server request ids are echoed exactly as received (ids are type-exact);
* every stdout line is captured verbatim into the transcript before it is dispatched,
  and the handlers get its 1-based line number and raw bytes;
* each server request is answered at most once (`answer` refuses a second answer).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable, BinaryIO


class RpcError(Exception):
    def __init__(self, code: int | None, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class RpcClosed(Exception):
    """The server's stdout ended before the answer came."""


Handler = Callable[[dict, bytes, int], None]


class RpcChannel:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        transcript: BinaryIO,
        on_request: Handler,
        on_notification: Handler,
        on_wire: Callable[[str, dict], None] | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._transcript = transcript
        self._on_request = on_request
        self._on_notification = on_notification
        self._on_wire = on_wire  # observes every line we write (tests, bench)
        self._next_id = 1
        self._pending: dict[int, asyncio.Future] = {}
        self._answered: set[str] = set()
        self.line_count = 0
        self.closed = False
        self.stdin_closed = False

    # --- writing ----------------------------------------------------------------------
    def _write(self, message: dict) -> None:
        if self.stdin_closed:
            raise RpcClosed("the app-server's stdin is closed")
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
        self._writer.write(line.encode("utf-8"))
        if self._on_wire is not None:
            self._on_wire("out", message)

    def send_request(self, method: str, params: Any) -> asyncio.Future:
        """Write a request now; the returned future resolves with its result."""
        request_id = self._next_id
        self._next_id += 1
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        if self.closed:
            future.set_exception(RpcClosed(f"{method}: the app-server has exited"))
            return future
        self._write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return future

    async def request(self, method: str, params: Any, timeout: float | None = None) -> Any:
        future = self.send_request(method, params)
        await self.drain()
        if timeout is None:
            return await future
        return await asyncio.wait_for(future, timeout)

    def notify(self, method: str, params: Any = None) -> None:
        message: dict = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._write(message)

    def answer(self, request_id: Any, result: Any = None, error: dict | None = None) -> bool:
        """Answer a server request once; False (and nothing written) on a second answer."""
        key = json.dumps(request_id)
        if key in self._answered or self.stdin_closed:
            return False
        self._answered.add(key)
        message: dict = {"id": request_id}
        if error is not None:
            message["error"] = error
        else:
            message["result"] = result
        self._write(message)
        return True

    def was_answered(self, request_id: Any) -> bool:
        return json.dumps(request_id) in self._answered

    async def drain(self) -> None:
        try:
            await self._writer.drain()
        except (ConnectionError, RuntimeError):
            pass

    def close_stdin(self) -> None:
        if self.stdin_closed:
            return
        self.stdin_closed = True
        try:
            self._writer.close()
        except (ConnectionError, RuntimeError):
            pass

    # --- reading ----------------------------------------------------------------------
    async def read_forever(self) -> None:
        try:
            while True:
                try:
                    raw = await self._reader.readline()
                except OSError:  # the channel was reset: the app-server's output has ended
                    break
                if not raw:
                    break
                self._transcript.write(raw)
                self._transcript.flush()
                self.line_count += 1
                self._dispatch(raw, self.line_count)
        finally:
            self.closed = True
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(RpcClosed("the app-server's stdout ended"))

    def _dispatch(self, raw: bytes, number: int) -> None:
        body = raw.rstrip(b"\r\n")
        if not body.strip():
            return
        try:
            message = json.loads(body)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            self._on_notification({"method": None, "_unreadable": True}, body, number)
            return
        if "method" in message and "id" in message:
            self._on_request(message, body, number)
        elif "method" in message:
            self._on_notification(message, body, number)
        elif "id" in message:
            future = self._pending.pop(message["id"], None) if isinstance(message["id"], int) else None
            if future is not None and not future.done():
                if "error" in message and message["error"] is not None:
                    error = message["error"] if isinstance(message["error"], dict) else {}
                    future.set_exception(RpcError(error.get("code"), str(error.get("message", message["error"]))))
                else:
                    future.set_result(message.get("result"))
        else:
            self._on_notification({"method": None, "_unreadable": True}, body, number)
