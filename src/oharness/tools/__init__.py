"""The tools oharness offers the model, and how neutral operations render to them.

`OP_TO_TOOL` is the oharness column of the operations table in
docs/reference/frame.md; `render_call` fills a
tool's input from a neutral scenario input (docs/scenarios.md). The neutral input keys
are the tools' own keys (read {path}, write {path, content}, edit {path, old, new},
glob {path}, grep {pattern, path}, bash {command}, webfetch {url}, skill {name},
agent {prompt}, todo {items}); mcp.call renders to `mcp__<server>__<tool>` with
`arguments` as the input.
"""

from __future__ import annotations

from typing import Any

from .base import Tool, ToolContext, ToolFailure, ToolOutput

OP_TO_TOOL: dict[str, str | None] = {
    "file.read": "read",
    "file.write": "write",
    "file.edit": "edit",
    "dir.list": "glob",
    "search": "grep",
    "shell": "bash",
    "web.read": "webfetch",
    "skill.load": "skill",
    "subagent.spawn": "agent",
    "task.todo": "todo",
    "mcp.call": None,  # resolved by name: mcp__<server>__<tool>
}


def builtin_tools(*, with_agent: bool = True) -> list[Tool]:
    from .bash import BashTool
    from .files import EditTool, GlobTool, GrepTool, ReadTool, WriteTool
    from .misc import AgentTool, SkillTool, TodoTool, WebFetchTool

    tools: list[Tool] = [
        ReadTool(), WriteTool(), EditTool(), GlobTool(), GrepTool(), BashTool(),
        WebFetchTool(), SkillTool(), TodoTool(),
    ]
    if with_agent:
        tools.append(AgentTool())
    return tools


def render_call(op: str, neutral_input: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The oharness tool name and input for one neutral call."""
    if op == "mcp.call":
        return f"mcp__{neutral_input['server']}__{neutral_input['tool']}", dict(neutral_input["arguments"] or {})
    tool = OP_TO_TOOL[op]
    assert tool is not None
    return tool, dict(neutral_input)


__all__ = ["OP_TO_TOOL", "Tool", "ToolContext", "ToolFailure", "ToolOutput", "builtin_tools", "render_call"]
