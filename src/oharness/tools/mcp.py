"""MCP tools: stdio servers declared under `mcpServers` in the settings, one tool per
server tool, named `mcp__<server>__<tool>` (official `mcp` SDK client).

Rules it keeps: the SDK loads only when a server is declared; each server's client
lives in one task of its own for the whole session (its context is entered and left in
that task, as anyio requires), and calls reach it through a queue; a server that fails
to start is reported with status `failed` and offers no tools — the session goes on.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import Any

from .base import Tool, ToolContext, ToolFailure, ToolOutput, cap_text

CONNECT_TIMEOUT_S = 20.0
SERVER_NAME_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-."


@dataclass
class McpServerConfig:
    name: str
    command: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None


def parse_mcp_servers(raw: Any, source: str) -> list[McpServerConfig]:
    """`{"name": {"command": str, "args": [str], "env": {str: str}, "cwd": str}}`; raises
    ValueError with one sentence naming the file and the server."""
    if raw is None:
        return []
    if not isinstance(raw, dict):
        raise ValueError(f"{source}: `mcpServers` must be an object of servers by name")
    servers = []
    for name, entry in raw.items():
        if not name or "__" in name or any(ch not in SERVER_NAME_CHARS for ch in name):
            raise ValueError(f"{source}: MCP server name {name!r} may use only letters, digits, _ - . (no `__`)")
        if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
            raise ValueError(f"{source}: MCP server {name!r} needs a `command` string (stdio servers only)")
        args = entry.get("args", [])
        env = entry.get("env", {})
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ValueError(f"{source}: MCP server {name!r}: `args` must be a list of strings")
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise ValueError(f"{source}: MCP server {name!r}: `env` must map names to strings")
        servers.append(McpServerConfig(name, entry["command"], list(args), dict(env), entry.get("cwd")))
    return servers


class McpConnection:
    """One server: a task holding the SDK client open, serving calls from a queue."""

    def __init__(self, config: McpServerConfig, cwd: str) -> None:
        self.config = config
        self.cwd = cwd
        self.status = "pending"
        self.error: str | None = None
        self.tools: list[Any] = []  # mcp_types.Tool
        self._requests: asyncio.Queue[tuple[str, dict[str, Any], asyncio.Future[Any]] | None] = asyncio.Queue()
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._serve())
        try:
            await asyncio.wait_for(self._ready.wait(), CONNECT_TIMEOUT_S)
        except asyncio.TimeoutError:
            self.status, self.error = "failed", f"no answer within {CONNECT_TIMEOUT_S:.0f} s"
            self._task.cancel()

    async def _serve(self) -> None:
        try:
            from mcp import Client
            from mcp.client.stdio import StdioServerParameters

            params = StdioServerParameters(
                command=self.config.command,
                args=self.config.args,
                env=self.config.env or None,
                cwd=os.path.join(self.cwd, self.config.cwd) if self.config.cwd else self.cwd,
            )
            async with Client(params) as client:  # the server's stderr stays on ours
                listing = await client.list_tools()
                self.tools = list(listing.tools)
                self.status = "connected"
                self._ready.set()
                while (request := await self._requests.get()) is not None:
                    name, arguments, future = request
                    try:
                        result = await client.call_tool(name, arguments)
                    except Exception as exc:  # the server's error reaches the model
                        if not future.done():
                            future.set_exception(ToolFailure(f"the MCP server {self.config.name} failed: {exc}"))
                        continue
                    if not future.done():
                        future.set_result(result)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 — a server that cannot start is reported, not fatal
            self.status = "failed"
            self.error = _first_error(exc)
        finally:
            self._ready.set()
            if self.status == "connected":
                self.status = "closed"

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        if self.status != "connected":
            raise ToolFailure(f"the MCP server {self.config.name} is not connected ({self.error or self.status})")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self._requests.put((tool, arguments, future))
        return await future

    async def close(self) -> None:
        if self._task is None:
            return
        await self._requests.put(None)
        try:
            await asyncio.wait_for(asyncio.shield(self._task), 5)
        except (asyncio.TimeoutError, Exception):
            self._task.cancel()


def _first_error(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__


class McpTool(Tool):
    """One server tool, offered as `mcp__<server>__<tool>`."""

    def __init__(self, connection: McpConnection, tool: Any) -> None:
        self.connection = connection
        self.tool_name = tool.name
        self.name = f"mcp__{connection.config.name}__{tool.name}"  # type: ignore[misc]
        self.description = tool.description or f"{tool.name} (MCP server {connection.config.name})"  # type: ignore[misc]
        self.input_schema = dict(tool.input_schema or {"type": "object"})  # type: ignore[misc]
        # The server's own readOnlyHint: Plan admits an allowed MCP call only with it (docs/reference/permissions.md).
        notes = getattr(tool, "annotations", None)
        self.read_only_hint = bool(getattr(notes, "read_only_hint", None) or getattr(notes, "readOnlyHint", None))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        result = await self.connection.call(self.tool_name, args)
        parts = []
        for block in result.content:
            text = getattr(block, "text", None)
            parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')} omitted]")
        if not parts and result.structured_content is not None:
            import json

            parts.append(json.dumps(result.structured_content))
        return ToolOutput(cap_text("\n".join(parts)) or "(no content)", is_error=bool(result.is_error))


class McpHub:
    def __init__(self, configs: list[McpServerConfig], cwd: str) -> None:
        self.connections = [McpConnection(config, cwd) for config in configs]

    async def start(self) -> None:
        await asyncio.gather(*(connection.start() for connection in self.connections))

    def tools(self) -> list[McpTool]:
        return [McpTool(c, tool) for c in self.connections if c.status == "connected" for tool in c.tools]

    def statuses(self) -> list[dict[str, str]]:
        return [{"name": c.config.name, "status": c.status} for c in self.connections]

    async def close(self) -> None:
        await asyncio.gather(*(connection.close() for connection in self.connections))
