"""The opening of a Codex app-server session, sans-IO (docs/guides/claude-and-codex.md).

What belongs here: the messages of the handshake and the checks of their answers, as plain
values — `initialize`'s parameters, and what a `thread/start` answer must hold for the per-call
seam to work (`opened`). The adapter (`adapter.py`) sends and awaits them; the turns' requests are
`turns.py`'s, the approvals `seam.py`'s.

Rules kept:
* metaharness asks for no experimental API and no request attestation;
* the thread's approval policy is `untrusted` for the whole run: an answer that does not echo it
  refuses the start by name (`VendorCapability`), before any user line is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metaharness.adapters.base import StartRefusal, own_version
from metaharness.protocol.refusals import RefusalName


def initialize_params() -> dict:
    """`initialize`'s parameters: who we are, and no optional capability."""
    return {"clientInfo": {"name": "metaharness", "title": None, "version": own_version()},
            "capabilities": {"experimentalApi": False, "requestAttestation": False}}


@dataclass(frozen=True)
class Thread:
    """The thread a `thread/start` answer opened."""

    id: str | None
    path: str | None  # its rollout file
    version: str | None  # the `cliVersion` it reports


def opened(result: Any) -> Thread:
    """The thread of a `thread/start` answer; StartRefusal unless its approval policy is `untrusted`."""
    if not isinstance(result, dict) or result.get("approvalPolicy") != "untrusted":
        got = result.get("approvalPolicy") if isinstance(result, dict) else None
        raise StartRefusal(
            RefusalName.VendorCapability,
            f"codex app-server answered thread/start with approval policy {got!r}, not \"untrusted\"; "
            "the per-call seam depends on it",
        )
    thread = result.get("thread") or {}
    return Thread(thread.get("id"), thread.get("path"), thread.get("cliVersion"))
