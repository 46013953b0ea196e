"""ACP harnesses: agent CLIs spoken to over the Agent Client Protocol on stdio.

The package has the shape of every adapter package, shared by its vendors: `adapter`
(`AcpAdapter`, the lifecycle: launch, `initialize`, `session/new`, one `session/prompt` per
turn, controls), `launch` (the scratch home and the child's environment), `translate` (the
`session/update` → event mapping), `seam` (the permission requests: every tool call asked,
answered allow-once or reject-once, our own ceiling), `rpc` (the JSON-RPC line channel) and
`contract` (what a vendor module supplies). Each vendor is one module holding its tool table and
vendor facts, a subclass of `AcpAdapter`, named with its pin by its entry in the registry of
kinds (protocol/harnesses.py).
"""

from .adapter import AcpAdapter
from .gemini import GeminiAdapter
from .opencode import OpencodeAdapter

__all__ = ["AcpAdapter", "GeminiAdapter", "OpencodeAdapter"]
