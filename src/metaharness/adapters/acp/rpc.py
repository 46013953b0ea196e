"""JSON-RPC 2.0 over an ACP agent's control channel: the shared framing (adapters/process/jsonrpc.py)
in ACP's dialect.

What belongs here: only how ACP's JSON-RPC differs — our request ids start at 0, our answers carry
the `jsonrpc` header, a `method` that is not a string and an answer to nothing we asked are
unreadable lines (`on_unreadable`: opaque, and refused where they ask something). Nothing about
permissions, sessions or events.
"""

from __future__ import annotations

from metaharness.adapters.process.jsonrpc import Dialect, Handler, RpcChannel as _RpcChannel, RpcClosed, RpcError

__all__ = ["Handler", "RpcChannel", "RpcClosed", "RpcError"]


class RpcChannel(_RpcChannel):
    DIALECT = Dialect(peer="the agent", first_id=0, answer_header=True, strict_method=True,
                      stray_answer_unreadable=True)
