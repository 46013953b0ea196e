"""One run: its rules (`core`, `commands`, `calls`, `start`), the asyncio driver around
them (`loop.Run`), its options (`spec.RunSpec`) and its hosting (`host`); shared by every
adapter, which the run reaches through `harness` only.

This module stays light: `metaharness run` installs the early signal handlers below
before it imports anything else, so a SIGINT/SIGTERM that comes while the process is
still starting is noted (and ends the run with `stream.closed` once the loop runs)
instead of killing it with nothing written.
"""

from __future__ import annotations

import signal

EARLY_SIGNALS: list[int] = []


def _note_early_signal(signum: int, _frame) -> None:
    EARLY_SIGNALS.append(signum)


def install_early_signal_handlers() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, _note_early_signal)
        except (ValueError, OSError):  # not the main thread
            pass
