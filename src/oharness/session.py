"""Opening a session: settings, provider, MCP servers, tools, gate, agent — in that order,
and every start-up refusal as one `StartError` sentence before any turn runs.

Used by both front ends (`oharness --stdio` and `oharness -p`). The gate comes from
`gate_factory`; the default is the permission engine's gate with nobody to ask (headless:
an ask is `unavailable` → refused). A factory raising ValueError refuses the start.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol

from metaharness.permissions import MODES

from .gate import Gate
from .loop import Agent, Seam, Shared, Sink
from .model import Provider, ProviderError
from .tools import Tool, ToolContext, builtin_tools


class StartError(Exception):
    """The session cannot start; the message is one sentence."""


@dataclass
class Session:
    agent: Agent
    provider: Provider
    tools: list[Tool]
    gate: Gate
    skills: list[str]
    mcp_statuses: list[dict[str, str]]
    cwd: str
    _hub: object | None = None

    async def close(self) -> None:
        try:
            if self._hub is not None:
                await self._hub.close()  # type: ignore[attr-defined]
        finally:
            close_gate = getattr(self.gate, "close", None)
            if close_gate is not None:
                close_gate()  # drains the decision trail (bounded in time)


class GateFactory(Protocol):
    """Builds the session's gate; the permission engine's factory takes the same keywords."""

    def __call__(self, *, mode: str | None, cwd: str, session_dir: str | None, decision_trail: bool) -> Gate: ...


def default_gate(*, mode: str | None, cwd: str, session_dir: str | None, decision_trail: bool) -> Gate:
    """The permission engine with nobody to ask (docs/reference/permissions.md)."""
    from .permission_gate import engine_gate_factory

    return engine_gate_factory()(mode=mode, cwd=cwd, session_dir=session_dir, decision_trail=decision_trail)


async def open_session(
    *,
    model: str,
    script: str | None,
    cwd: str | None,
    mode: str | None,
    sink: Sink,
    seam: Seam | None = None,
    gate_factory: GateFactory = default_gate,
    session_dir: str | None = None,
    decision_trail: bool = True,
) -> Session:
    from .config import ConfigError, load_config
    from .providers import make_provider

    workdir = os.path.abspath(cwd or os.getcwd())
    if not os.path.isdir(workdir):
        raise StartError(f"the working directory {workdir} does not exist")
    if mode is not None and mode not in MODES:
        raise StartError(f"unknown permission mode {mode!r} (one of {', '.join(MODES)})")
    try:
        config = load_config(workdir)
    except ConfigError as exc:
        raise StartError(str(exc)) from None
    try:
        provider = make_provider(model, script)
    except ProviderError as exc:
        raise StartError(str(exc)) from None
    except ValueError as exc:  # ScenarioError: a malformed scenario, naming the turn
        raise StartError(str(exc)) from None

    hub = None
    tools: list[Tool] = builtin_tools()
    statuses: list[dict[str, str]] = []
    if config.mcp_servers:
        from .tools.mcp import McpHub

        hub = McpHub(config.mcp_servers, workdir)
        await hub.start()
        tools.extend(hub.tools())
        statuses = hub.statuses()

    check = getattr(provider, "check_offered", None)
    if check is not None:
        try:
            check({tool.name for tool in tools})
        except ValueError as exc:
            if hub is not None:
                await hub.close()
            raise StartError(str(exc)) from None

    from .tools.misc import list_skills

    try:
        gate = gate_factory(mode=mode, cwd=workdir, session_dir=session_dir, decision_trail=decision_trail)
    except ValueError as exc:  # the engine refuses to start (bad settings, forbidden mode)
        if hub is not None:
            await hub.close()
        raise StartError(str(exc)) from None
    ctx = ToolContext(cwd=workdir, skills_dirs=config.skills_dirs, scratch_dir=session_dir)
    attach = getattr(gate, "attach", None)
    if attach is not None:
        attach(ctx, tools)  # glob/grep skip unreadable paths; fetch vets redirects
    agent = Agent(provider, tools, sink, gate, ctx, seam=seam, shared=Shared())
    return Session(agent, provider, tools, gate, list_skills(config.skills_dirs), statuses, workdir, hub)
