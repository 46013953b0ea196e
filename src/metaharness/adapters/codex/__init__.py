"""The Codex adapter (docs/guides/claude-and-codex.md): launch (the throwaway CODEX_HOME and the
app-server's argv), rpc (JSON-RPC over the child's channel), translate (notifications → events),
seam (approval requests → presented calls → answers), tools (the tool table), steers (where each
steer is until Codex shows it), relay (the replace relay's hook and
socket), protocol (the session's opening, sans-IO), adapter (the lifecycle and the controls), doctor (the free checks)."""

from .adapter import CodexAdapter
from .launch import CodexOptions
from .tools import apply_patch_resolution

__all__ = ["CodexAdapter", "CodexOptions", "apply_patch_resolution"]
