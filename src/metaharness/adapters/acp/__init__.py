"""ACP harnesses: agent CLIs spoken to over the Agent Client Protocol on stdio.

`core.AcpAdapter` is the shared lifecycle (launch, `initialize`, `session/new`, one
`session/prompt` per turn, controls), `rpc` the JSON-RPC line channel, `seam` the
permission requests (every tool call asked, answered allow-once or reject-once, our own
ceiling), `translate` the `session/update` → event mapping. Each vendor is one module:
`opencode` (opencode 1.18.33, `opencode acp`) and `gemini` (Gemini CLI 0.61.0, `gemini --acp`).
"""
