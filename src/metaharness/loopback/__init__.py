"""`metaharness loopback` — a local fake model server, and the credential proxy (docs/guides/claude-and-codex.md).

Public API: `LoopbackServer` (answers Claude Code's Anthropic Messages requests and Codex's
OpenAI Responses requests from a `metaharness.scenario/1`), `LoggedRequest` (one entry of its
request log), `CredentialProxy` (holds a real key, accepts only a per-run placeholder), and
`RenderError`. Both servers bind 127.0.0.1 only, start/stop on the caller's event loop, or run
on a thread (`run_in_thread()` → (url, stop), or `with server:`).
"""

from .proxy import CredentialProxy, new_placeholder
from .render import RenderError
from .server import LoggedRequest, LoopbackServer

__all__ = ["CredentialProxy", "LoggedRequest", "LoopbackServer", "RenderError", "new_placeholder"]
