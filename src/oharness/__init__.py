"""oharness — the project's own agent harness.

Package layout: `loop` (the agent loop), `model` (neutral messages and model events),
`providers/` (scripted, anthropic, openai; each imported only when used), `tools/`
(the tools offered to the model), `gate` (the per-call permission seam), `stdio` (the
child side of docs/internals/oharness-stdio.md), `cli` (the `oharness` command).

Rule kept everywhere: importing this package does no work, so `oharness --stdio` reaches
its `init` line fast; SDKs (anthropic, openai, mcp, httpx) load only when used.
"""

__version__ = "0.1.0"
