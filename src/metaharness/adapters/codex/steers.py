"""Where each steer of a Codex turn is, until Codex shows it delivered — and which of them open
the next turn. Sans-IO: the adapter writes `turn/steer` and reports what came back.

Rules kept (docs/guides/claude-and-codex.md):
* a steer is never dropped silently: one still in flight at `turn/completed`, one Codex refused
  with "no active turn" while its `turn/completed` was on the way, and one it accepted but never
  showed as a `userMessage` all become the next turn's input;
* a steer that is carried into the next turn is never also refused: its `turn/steer` failing
  afterwards is not the caller's failure.
"""

from __future__ import annotations

from typing import Container


class SteerLedger:
    def __init__(self) -> None:
        self.count = 0
        self._in_flight: dict[str, str] = {}  # client id → text: `turn/steer` sent, not answered
        self._accepted: dict[str, str] = {}  # answered ok, not yet shown by Codex
        self._held: dict[str, str] = {}  # refused "no active turn" as the turn was ending
        self.carried: set[str] = set()  # client ids that open (or opened) a turn of their own

    def sent(self, text: str) -> str:
        """A new steer's client id, in flight until `answered` or `failed`."""
        self.count += 1
        client_id = f"mh-steer-{self.count}"
        self._in_flight[client_id] = text
        return client_id

    def answered(self, client_id: str) -> None:
        text = self._in_flight.pop(client_id, None)
        if text is not None and client_id not in self.carried:
            self._accepted[client_id] = text

    def failed(self, client_id: str, *, turn_ending: bool) -> bool:
        """Its `turn/steer` failed; True when the text reaches Codex all the same (carried into the
        next turn already, or held for it because the turn was ending), False: refuse the steer."""
        text = self._in_flight.pop(client_id, None)
        if client_id in self.carried:
            return True
        if turn_ending and text is not None:
            self._held[client_id] = text
            return True
        return False

    def undelivered(self, not_shown: Container[str]) -> dict[str, str]:
        """At `turn/completed`: the steers the turn did not take up (`not_shown`: the client ids
        Codex has not shown as a `userMessage`), in the order they were sent; marked carried."""
        steers = {**self._in_flight, **self._held,
                  **{cid: text for cid, text in self._accepted.items() if cid in not_shown}}
        self._accepted.clear()
        self._held.clear()
        return steers
