"""Why a direct model endpoint could not be reached: metaharness's own look at it.

What belongs here: `probe`, which resolves the endpoint's host and opens one TCP connection to
it, and names what stopped it as a failure kind (`dns`, `connection_refused`, `timeout`,
`connection`), or None when the endpoint answers. An ACP agent pointed at `--model-endpoint`
talks to it itself, and its own sentence for an unreachable endpoint does not say which
(opencode: "Cannot connect to API", Gemini CLI: "fetch failed sending request"); the adapter
looks after the agent failed a prompt, so the `MODEL_REQUEST_FAILED` warning can say.
"""

from __future__ import annotations

import asyncio
import socket
from urllib.parse import urlsplit

PROBE_TIMEOUT_S = 5.0
_DEFAULT_PORT = {"http": 80, "https": 443}


async def probe(endpoint: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """The failure kind that keeps `endpoint` from being reached, or None when it accepts a connection."""
    parts = urlsplit(endpoint)
    try:
        host, port = parts.hostname, parts.port or _DEFAULT_PORT.get(parts.scheme, 80)
    except ValueError:
        return "connection"
    if not host:
        return "connection"
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except socket.gaierror:
        return "dns"
    except ConnectionRefusedError:
        return "connection_refused"
    except (asyncio.TimeoutError, TimeoutError):
        return "timeout"
    except OSError:
        return "connection"
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return None
