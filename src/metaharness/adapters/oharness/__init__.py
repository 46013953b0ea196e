"""The oharness adapter: our own harness as a child process. launch (the argv and the child's
environment), translate (records → events), seam (a `tool_call` → a presented call, a decision →
a `decision` line), adapter (the lifecycle and the controls)."""

from .adapter import OHarnessAdapter

__all__ = ["OHarnessAdapter"]
