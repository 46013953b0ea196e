"""JSON-RPC 2.0 over `codex app-server`'s control channel: the shared framing
(adapters/process/jsonrpc.py) in the app-server's dialect (docs/guides/claude-and-codex.md).

What belongs here: only how the app-server's JSON-RPC differs — our request ids start at 1, our
answers carry no `jsonrpc` header, any line with a `method` is a request or a notification, an
answer to nothing we asked is dropped, and an unreadable line reaches the notification handler
marked `_unreadable` (the translator makes it opaque). Nothing about approvals or events.
"""

from __future__ import annotations

from typing import Any, BinaryIO, Callable

from metaharness.adapters.process.jsonrpc import Dialect, Handler, RpcChannel as _RpcChannel, RpcClosed, RpcError

__all__ = ["Handler", "RpcChannel", "RpcClosed", "RpcError"]


class RpcChannel(_RpcChannel):
    DIALECT = Dialect(peer="the app-server", first_id=1, answer_header=False, strict_method=False,
                      stray_answer_unreadable=False)

    def __init__(self, reader: Any, writer: Any, transcript: BinaryIO, on_request: Handler,
                 on_notification: Handler, on_wire: Callable[[dict], None] | None = None) -> None:
        super().__init__(
            reader, writer, transcript, on_request=on_request, on_notification=on_notification,
            on_unreadable=lambda body, number: on_notification({"method": None, "_unreadable": True}, body, number),
            on_wire=on_wire,
        )
