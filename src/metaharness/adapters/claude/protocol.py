"""Claude Code's control rules over one session, sans-IO (docs/guides/claude-and-codex.md).

What belongs here: when the interrupt goes out, when the child's stdin may close, when another
turn is coming, what a turn's user line holds and what the end of the output writes — each read
off the translator's state (`translate.py`) and plain flags, with no I/O and no clock, so every
rule is a plain call in a test. The adapter (`adapter.py`) does what these answers say: it
writes to the control channel and the child.

Rules kept:
* the interrupt goes out before the abandonment denies of an interrupt, and of a stop while a
  turn runs: Claude Code that reads a deny first hands it to the model — one more model
  request — before it reads the interrupt (seen on a loaded machine). A halt waits for the
  reply of an interrupt that is out, or sends one while a turn runs (`INTERRUPT_WHEN`);
* the session never ends while a user line the adapter wrote is still unconsumed: stdin closes
  once finishing and no written line waits and no turn runs (`may_close`);
* the end of the output writes, once, what was held before an opening record that never came
  (its events and opaque lines only) and the last `result` as the session's end (`ended`).
"""

from __future__ import annotations

from typing import Callable

from .translate import Item, Translator

# The moment an interrupt may go out (the abandonment of an interrupt's or a stop's calls, a
# halt) → whether it goes out then: (the session, an interrupt is
# already out) → bool.
INTERRUPT_WHEN: dict[str, Callable[["Session", bool], bool]] = {
    "interrupt": lambda session, out: True,
    "stop": lambda session, out: session.translator.in_turn,
    "halt": lambda session, out: out or session.translator.in_turn,
}


def turn_blocks(text: str | list[str]) -> list[str]:
    """The text blocks of a turn's user line: the non-empty blocks, one space when there are none
    (Claude needs some text to start a turn)."""
    blocks = [text] if isinstance(text, str) else [b for b in text if b]
    return [" "] if not blocks or blocks == [""] else blocks


class Session:
    """The control state of one Claude session."""

    def __init__(self, translator: Translator) -> None:
        self.translator = translator
        self.closing = False  # no more turns: stdin closes once nothing written waits
        self.ended = False  # the session's end written (or a refused start, which writes none)

    def interrupts(self, moment: str, interrupt_out: bool) -> bool:
        """Whether the interrupt goes out (or is awaited) at `moment` (`INTERRUPT_WHEN`)."""
        return INTERRUPT_WHEN[moment](self, interrupt_out)

    def turn_coming(self) -> bool:
        """A user line written but not yet consumed starts a turn of its own."""
        return self.translator.unreplayed > 0 and not self.closing

    def may_close(self) -> bool:
        """stdin may close: finishing, no written user line waits and no turn runs."""
        return self.closing and not self.translator.unreplayed and not self.translator.in_turn

    def ended_items(self) -> list[Item]:
        """At the end of the output, once: the held events and opaque lines, then the last
        `result` as `("session_ended", SessionEnded, at)`. Nothing after the first call."""
        if self.ended:
            return []
        self.ended = True
        items = [item for item in self.translator.release_held() if item[0] in ("emit", "opaque")]
        last = self.translator.last_result
        return items + ([("session_ended", last, self.translator.last_result_at)] if last is not None else [])
