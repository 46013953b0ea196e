"""One ACP session's rules, sans-IO: the handshake's messages, the cancel, the stop-reason rules.

What belongs here: what the client sends to open a session and what the answer must hold
(`initialize_params`, `opened`), when a turn's call is settled, what a stop or a mode change
says about the session's end (`Session`) — as plain values and plain state, with no I/O and no
clock, so every rule is a plain call in a test. The ACP core (`adapter.py`) sends what these
say and awaits the answers; a vendor's own facts are `contract.py`'s.

Rules kept:
* no client capability is advertised (no `fs`, no `terminal`): the agent does its own I/O, and
  each such I/O is a tool call it must ask about;
* a `session/new` answer without a session id refuses the start by name (`VendorCapability`);
* a call is settled once the agent reported it completed or failed, or once no turn runs;
* a stop (halt, SIGTERM/SIGINT) while a turn runs, or before any turn ran, is no clean end of the
  session: the `session.ended` assembled when the agent exits says so (`stopped`), or the stream
  would close `completed` for a run a signal cut short — the agent answers the cancel with
  stopReason `cancelled`, which alone reads as a clean end. A stop at a boundary after a turn
  stays a clean end; an error already named (a mode change) stands;
* the session's end is written once, and never for a refused start or an agent that died
  (its output ended while its stdin was still open).
"""

from __future__ import annotations

from typing import Any

from metaharness.adapters.base import StartRefusal, own_version
from metaharness.protocol.refusals import RefusalName

PROTOCOL_VERSION = 1
SETTLED_STATUSES = ("completed", "failed")


def initialize_params() -> dict:
    """`initialize`'s parameters: the protocol version, who we are, and no client capability."""
    return {"protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
            "clientInfo": {"name": "metaharness", "version": own_version()}}


def opened(result: Any, binary_name: str) -> str:
    """The session id of a `session/new` answer; StartRefusal when it names none."""
    if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
        raise StartRefusal(RefusalName.VendorCapability, f"{binary_name} answered session/new without a session id")
    return result["sessionId"]


def settled(turn_running: bool, status: str | None) -> bool:
    """Nothing of the call can still run: no turn runs, or the agent reported it done."""
    return not turn_running or status in SETTLED_STATUSES


class Session:
    """The state of one ACP session that decides its end."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.end_error: str | None = None  # why the session ended in error, when it did
        self.cancel_sent = False  # the turn's cancel went out ahead of its abandonment denies
        self.ended = False  # no session.ended to write (written, or a refused start)
        self.died = False  # the output ended while the agent's stdin was still open

    def cancel(self) -> dict | None:
        """`session/cancel`'s parameters (None before the session opened)."""
        return {"sessionId": self.id} if self.id is not None else None

    def mode_changed(self, binary_name: str, mode: str, pinned: str | None) -> str:
        """The session ends in error: the agent left its pinned mode. The sentence."""
        self.end_error = f"{binary_name} switched to mode {mode!r}; the pinned mode is {pinned!r}"
        return self.end_error

    def stopped(self, turn_running: bool, turns_completed: int) -> None:
        """A stop: no clean end while a turn runs or before any turn ran (an error named first stands)."""
        if self.end_error is None and (turn_running or turns_completed == 0):
            self.end_error = ("the run was stopped before its turn ended" if turn_running
                              else "the run was stopped before its first turn")

    def ending(self) -> bool:
        """The session's end is to be written now: once, never after a refused start or a death."""
        if self.ended or self.died:
            return False
        self.ended = True
        return True
