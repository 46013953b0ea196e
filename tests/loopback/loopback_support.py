"""Shared helpers for the loopback tests: scenarios from Python dicts, tool offers shaped like the real clients'."""

from __future__ import annotations

import json
from typing import Any

from metaharness.protocol.scenario import Scenario, parse_scenario


def sdks():
    """The official anthropic and openai SDKs, imported when a test first asks: seconds of import that
    a test worker which only collects the file should not pay."""
    import anthropic
    import openai

    return anthropic, openai


def scenario(*turns: dict[str, Any]) -> Scenario:
    return parse_scenario(json.dumps({"format": "metaharness.scenario/1", "turns": list(turns)}))


def claude_tool(name: str, required: list[str], optional: list[str] = (), **extra: Any) -> dict[str, Any]:
    props = {key: {"type": "string"} for key in [*required, *optional]}
    return {"name": name, "description": name, "input_schema": {"type": "object", "properties": props, "required": required}, **extra}


# What Claude Code 2.1.328 offers (the vendor rule “what each client sends”), trimmed to the keys that matter here.
CLAUDE_TOOLS = [
    claude_tool("Agent", ["description", "prompt"], ["subagent_type"]),
    claude_tool("Bash", ["command"], ["timeout", "description"]),
    claude_tool("Edit", ["file_path", "old_string", "new_string"], ["replace_all"]),
    claude_tool("Read", ["file_path"], ["offset", "limit"]),
    claude_tool("Skill", ["skill"], ["args"]),
    claude_tool("ToolSearch", ["query"], ["max_results"]),
    claude_tool("WebFetch", ["url", "prompt"], defer_loading=True),
    claude_tool("Write", ["file_path", "content"]),
]


def codex_function(name: str, required: list[str], optional: list[str] = ()) -> dict[str, Any]:
    props = {key: {"type": "string"} for key in [*required, *optional]}
    return {"type": "function", "name": name, "description": name, "strict": False,
            "parameters": {"type": "object", "properties": props, "required": required, "additionalProperties": False}}


# What Codex 0.171.0 offers with gpt-5.5 (the vendor rule “what each client sends”), trimmed.
CODEX_TOOLS = [
    codex_function("exec_command", ["cmd"], ["workdir", "yield_time_ms"]),
    codex_function("write_stdin", ["session_id"], ["chars"]),
    {"type": "custom", "name": "apply_patch", "description": "patch",
     "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}},
    codex_function("view_image", ["path"]),
    {"type": "web_search", "external_web_access": False},
]
