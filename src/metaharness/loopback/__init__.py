"""`metaharness loopback` — a local fake model server, and the credential proxy (docs/guides/claude-and-codex.md).

Public API: `LoopbackServer` (answers Claude Code's Anthropic Messages requests and Codex's
OpenAI Responses requests from a `metaharness.scenario/1`), `LoggedRequest` (one entry of its
request log), `CredentialProxy` (holds a real key, accepts only a per-run placeholder), and
`RenderError`. Both servers bind 127.0.0.1 only, start/stop on the caller's event loop, or run
on a thread (`run_in_thread()` → (url, stop), or `with server:`).

The names are imported lazily (module `__getattr__`): every run imports
`metaharness.loopback.pricing`, which runs this file first, and the servers pull in httpx
and aiohttp — tens of milliseconds of start-up a run that serves no model does not need.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOME = {"CredentialProxy": ".proxy", "new_placeholder": ".proxy", "RenderError": ".render",
         "LoggedRequest": ".server", "LoopbackServer": ".server"}

__all__ = ["CredentialProxy", "LoggedRequest", "LoopbackServer", "RenderError", "new_placeholder"]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value
