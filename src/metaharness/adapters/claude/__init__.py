"""The Claude Code adapter (docs/guides/claude-and-codex.md): launch (hermetic spawn), translate
(stream-json records → events), seam (the stdio PreToolUse hook_callback and the
controls), tools (the tool table), adapter (the lifecycle), doctor (the free checks)."""

from .adapter import ClaudeAdapter

__all__ = ["ClaudeAdapter"]
