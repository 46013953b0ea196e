"""JSON-RPC 2.0 over a child's control channel, one JSON object per line.

What belongs here: the framing, request-id bookkeeping, pending futures, exactly-once answers and
the raw capture shared by every JSON-RPC harness (Codex's app-server, the ACP agents) — nothing
about permissions, sessions or events. Each protocol subclasses `RpcChannel` and states how it
differs in a few class attributes (its `Dialect`), nothing more.

Incoming lines are told apart as answers to our requests (resolve a future), requests of the
peer (`method` and `id`; `on_request`), notifications (`method` only; `on_notification`) and
anything else (`on_unreadable`: not JSON, not an object, or — where the dialect says so — an
answer to nothing we asked).

Rules kept:
* every line we write goes through one writer, compact JSON, and is observed (`on_wire`);
* request ids of the peer are echoed exactly as received (ids are type-exact);
* every line read is captured verbatim into the transcript before it is dispatched, and the
  handlers get its raw bytes and 1-based line number;
* each peer request is answered at most once (`answer` refuses a second answer);
* when the peer's output ends every request of ours still waiting fails with `RpcClosed`.

Why our own layer and not a protocol SDK: an SDK's connection owns the stream, parses each line
into typed models and drops what it cannot read. The seam needs the opposite — the verbatim line
(for the transcript, `opaque` and its line number), a garbage line seen as garbage, and full
control over when and whether a request is answered (metaharness's own deadline).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable

from metaharness.adapters.process.channel import read_lines


class RpcError(Exception):
    """The peer answered our request with an error (`data` its error object's `data`, if any)."""

    def __init__(self, code: int | None, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class RpcClosed(Exception):
    """The peer's output ended (or its input is closed) before the answer came."""


Handler = Callable[[dict, bytes, int], None]


@dataclass(frozen=True)
class Dialect:
    """How one protocol's JSON-RPC differs on the line."""

    peer: str  # how messages name the other side ("the agent", "the app-server")
    first_id: int  # our first request id
    answer_header: bool  # our answers carry "jsonrpc": "2.0"
    strict_method: bool  # a `method` that is not a string makes the line unreadable
    stray_answer_unreadable: bool  # an answer to nothing we asked is unreadable (else dropped)


class RpcChannel:
    DIALECT = Dialect(peer="the peer", first_id=1, answer_header=True, strict_method=True,
                      stray_answer_unreadable=True)

    def __init__(self, reader: asyncio.StreamReader, writer: Any, transcript: BinaryIO | None, *,
                 on_request: Handler, on_notification: Handler, on_unreadable: Callable[[bytes, int], None],
                 on_wire: Callable[[dict], None] | None = None) -> None:
        self._reader = reader
        self._writer = writer
        self._transcript = transcript
        self._on_request = on_request
        self._on_notification = on_notification
        self._on_unreadable = on_unreadable
        self._on_wire = on_wire
        self._next_id = self.DIALECT.first_id
        self._pending: dict[int, asyncio.Future] = {}
        self._answered: set[str] = set()
        self.line_count = 0
        self.closed = False
        self.stdin_closed = False

    # --- writing ----------------------------------------------------------------------
    def _write(self, message: dict) -> None:
        if self.stdin_closed:
            raise RpcClosed(f"{self.DIALECT.peer}'s stdin is closed")
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            self._writer.write(line.encode("utf-8"))
        except (ConnectionError, RuntimeError) as exc:
            raise RpcClosed(f"{self.DIALECT.peer}'s stdin is closed: {exc}") from None
        if self._on_wire is not None:
            self._on_wire(message)

    def send_request(self, method: str, params: Any) -> asyncio.Future:
        """Write a request now; the returned future resolves with its result."""
        request_id = self._next_id
        self._next_id += 1
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        if self.closed:
            future.set_exception(RpcClosed(f"{method}: {self.DIALECT.peer} has exited"))
            return future
        self._pending[request_id] = future
        self._write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return future

    async def request(self, method: str, params: Any, timeout: float | None = None) -> Any:
        future = self.send_request(method, params)
        await self.drain()
        return await (future if timeout is None else asyncio.wait_for(future, timeout))

    def notify(self, method: str, params: Any = None) -> None:
        message: dict = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._write(message)

    def answer(self, request_id: Any, result: Any = None, error: dict | None = None) -> bool:
        """Answer a peer request once; False (nothing written) on a second answer or a closed stdin."""
        key = json.dumps(request_id)
        if key in self._answered or self.stdin_closed:
            return False
        self._answered.add(key)
        message: dict = {"jsonrpc": "2.0", "id": request_id} if self.DIALECT.answer_header else {"id": request_id}
        if error is not None:
            message["error"] = error
        else:
            message["result"] = result
        try:
            self._write(message)
        except RpcClosed:
            return False
        return True

    def was_answered(self, request_id: Any) -> bool:
        return json.dumps(request_id) in self._answered

    async def drain(self) -> None:
        try:
            await self._writer.drain()
        except (ConnectionError, RuntimeError):
            pass

    def reaches_the_peer(self) -> bool:
        """False once the peer's stdout ended or our writing half is closed or lost (a write to
        a dead peer is not an error at `write`: the transport closes under it)."""
        return not (self.closed or self.stdin_closed or self._writer.is_closing())

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
            async for number, raw in read_lines(self._reader, self._transcript, flush=True):
                self.line_count = number
                self._dispatch(raw.rstrip(b"\r\n"), number)
        finally:
            self.closed = True
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(RpcClosed(f"{self.DIALECT.peer}'s stdout ended"))
            self._pending.clear()

    def _dispatch(self, body: bytes, number: int) -> None:
        if not body.strip():
            return
        try:
            message = json.loads(body)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            self._on_unreadable(body, number)
            return
        has_method = isinstance(message.get("method"), str) if self.DIALECT.strict_method else "method" in message
        if has_method and "id" in message:
            self._on_request(message, body, number)
        elif has_method:
            self._on_notification(message, body, number)
        elif "id" in message and isinstance(message["id"], int) and message["id"] in self._pending:
            self._settle(self._pending.pop(message["id"]), message)
        elif "id" in message and not self.DIALECT.stray_answer_unreadable:
            return
        else:
            self._on_unreadable(body, number)

    @staticmethod
    def _settle(future: asyncio.Future, message: dict) -> None:
        if future.done():
            return
        if message.get("error") is not None:
            error = message["error"] if isinstance(message["error"], dict) else {}
            future.set_exception(RpcError(error.get("code"), str(error.get("message", message["error"])),
                                          error.get("data")))
        else:
            future.set_result(message.get("result"))
