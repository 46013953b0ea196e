"""Rendering a scenario's neutral calls into the requesting client's own tools (docs/scenarios.md).

What belongs here: the rendering table — for each neutral operation, which tool of Claude Code
(Anthropic Messages) or Codex (OpenAI Responses) carries it and how its input keys are filled —
and oharness's tools, which take the neutral input as it is, on either wire (`NEUTRAL_TOOLS`).

Rules it keeps: a tool counts only when the request's own `tools` array offers it by name and
not `defer_loading: true`; every key the offered tool's schema requires must be filled, and
optional keys we add are dropped when the schema does not list them; anything that cannot be
rendered raises `RenderError` whose message names the scenario turn, the operation and the
tools the client offered. Pure: no I/O except reading a file under `workdir` to check that a
Codex edit's old text is whole lines.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from metaharness.protocol.scenario import ScenarioCall, turn_label

CallKind = Literal["tool_use", "function_call", "custom_tool_call"]


class RenderError(Exception):
    """A scenario call this client cannot be shown; the message is the loopback's 400 text."""


@dataclass(frozen=True)
class RenderedCall:
    kind: CallKind
    name: str
    call_id: str
    arguments: dict[str, Any] | None = None  # tool_use input / function_call arguments
    text_input: str | None = None  # custom_tool_call input (apply_patch)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "name": self.name, "call_id": self.call_id}
        out["input"] = self.arguments if self.arguments is not None else self.text_input
        return out


@dataclass(frozen=True)
class Offer:
    """The tools one request offers, by name, in the order the client sent them."""

    tools: dict[str, dict[str, Any]]

    @property
    def names(self) -> list[str]:
        return list(self.tools)

    def describe(self) -> str:
        return ", ".join(self.names) if self.tools else "no tools"


def anthropic_offer(tools: Any) -> Offer:
    offered: dict[str, dict[str, Any]] = {}
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str) and tool.get("defer_loading") is not True:
            offered[tool["name"]] = tool
    return Offer(offered)


def responses_offer(tools: Any) -> Offer:
    offered: dict[str, dict[str, Any]] = {}
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict) or tool.get("defer_loading") is True:
            continue
        name = tool.get("name")
        if isinstance(name, str):
            offered[name] = tool
        elif isinstance(tool.get("type"), str):  # hosted tools (web_search, …) are named by type
            offered[tool["type"]] = tool
    return Offer(offered)


def _schema(tool: dict[str, Any], key: str) -> tuple[dict[str, Any] | None, list[str]]:
    schema = tool.get(key)
    if not isinstance(schema, dict):
        return None, []
    properties = schema.get("properties")
    required = schema.get("required")
    return (
        properties if isinstance(properties, dict) else None,
        [name for name in required if isinstance(name, str)] if isinstance(required, list) else [],
    )


class _Context:
    def __init__(self, call: ScenarioCall, offer: Offer, turn_index: int, turn_id: str | None) -> None:
        self.call, self.offer = call, offer
        self.where = f"scenario {turn_label(turn_index, turn_id)}"

    def no_tool(self) -> RenderError:
        return RenderError(
            f'{self.where}: operation "{self.call.op}" has no tool in this client\'s offer '
            f"(offered: {self.offer.describe()})"
        )

    def fail(self, why: str) -> RenderError:
        return RenderError(f'{self.where}: operation "{self.call.op}" cannot be rendered: {why}')


def _fill(ctx: _Context, tool: dict[str, Any], schema_key: str, essential: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Essential keys always go in; extras only when the schema lists them; then check `required`."""
    properties, required = _schema(tool, schema_key)
    filled = dict(essential)
    for key, value in extra.items():
        if properties is None or key in properties:
            filled[key] = value
    missing = [key for key in required if key not in filled]
    if missing:
        raise ctx.fail(
            f"the offered tool {tool.get('name')} requires key(s) {', '.join(missing)} the scenario cannot fill"
        )
    return filled


# oharness's own tool for each operation (its adapter's rendering table; tests/loopback hold the two
# equal). Its tools take the scenario's neutral keys unchanged, so a client that offers one of
# these names gets the call as the scenario wrote it; Claude Code's and Codex's names never collide.
NEUTRAL_TOOLS: dict[str, str] = {
    "file.read": "read", "file.write": "write", "file.edit": "edit", "dir.list": "glob", "search": "grep",
    "shell": "bash", "web.read": "webfetch", "skill.load": "skill", "subagent.spawn": "agent", "task.todo": "todo",
}


def _neutral(ctx: "_Context", schema_key: str) -> tuple[str, dict[str, Any]] | None:
    """(tool name, input) when the offer holds the operation's oharness tool, else None."""
    name = NEUTRAL_TOOLS.get(ctx.call.op)
    tool = ctx.offer.tools.get(name) if name else None
    if tool is None:
        return None
    return name, _fill(ctx, tool, schema_key, dict(ctx.call.input), {})


def _call_id(call: ScenarioCall, prefix: str) -> str:
    return call.id if call.id is not None else f"{prefix}{uuid.uuid4().hex[:24]}"


def _absolute(path: str, workdir: str) -> str:
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(workdir, path))


def _todos(ctx: _Context, tool: dict[str, Any], items: Any) -> list[dict[str, Any]]:
    if not isinstance(items, list):
        raise ctx.fail("`items` is not a list")
    properties, _ = _schema(tool, "input_schema")
    entry_props: dict[str, Any] | None = None
    entry_required: list[str] = []
    todos_schema = (properties or {}).get("todos")
    if isinstance(todos_schema, dict) and isinstance(todos_schema.get("items"), dict):
        entry_props, entry_required = _schema({"s": todos_schema["items"]}, "s")
    todos: list[dict[str, Any]] = []
    for number, item in enumerate(items, start=1):
        if isinstance(item, str):
            entry: dict[str, Any] = {"content": item}
        elif isinstance(item, dict):
            entry = dict(item)
            entry.setdefault("content", item.get("text") or item.get("title") or "")
        else:
            raise ctx.fail(f"todo item {number} is neither text nor an object")
        entry.setdefault("status", "pending")
        entry.setdefault("activeForm", entry["content"])
        entry.setdefault("id", str(number))
        if entry_props is not None:
            entry = {key: value for key, value in entry.items() if key in entry_props}
        missing = [key for key in entry_required if key not in entry]
        if missing:
            raise ctx.fail(f"todo item {number} lacks {', '.join(missing)}, which TodoWrite requires")
        todos.append(entry)
    return todos


def render_anthropic(call: ScenarioCall, tools: Any, *, workdir: str, turn_index: int, turn_id: str | None = None) -> RenderedCall:
    """One neutral call as a Claude Code `tool_use` block, from the request's `tools`."""
    offer = anthropic_offer(tools)
    ctx = _Context(call, offer, turn_index, turn_id)
    args = call.input
    op = call.op
    if (neutral := _neutral(ctx, "input_schema")) is not None:
        return RenderedCall(kind="tool_use", name=neutral[0], call_id=_call_id(call, "toolu_"), arguments=neutral[1])

    def pick(*names: str) -> dict[str, Any]:
        for name in names:
            if name in offer.tools:
                return offer.tools[name]
        raise ctx.no_tool()

    if op == "shell":
        tool = pick("Bash")
        rendered = _fill(ctx, tool, "input_schema", {"command": args["command"]}, {"description": "scenario call"})
    elif op == "file.read":
        tool = pick("Read")
        rendered = _fill(ctx, tool, "input_schema", {"file_path": _absolute(args["path"], workdir)}, {})
    elif op == "file.write":
        tool = pick("Write")
        rendered = _fill(ctx, tool, "input_schema", {"file_path": _absolute(args["path"], workdir), "content": args["content"]}, {})
    elif op == "file.edit":
        tool = pick("Edit")
        rendered = _fill(
            ctx, tool, "input_schema",
            {"file_path": _absolute(args["path"], workdir), "old_string": args["old"], "new_string": args["new"]}, {},
        )
    elif op == "dir.list":
        tool = pick("Glob")
        rendered = _fill(ctx, tool, "input_schema", {"pattern": "*", "path": _absolute(args["path"], workdir)}, {})
    elif op == "search":
        tool = pick("Grep")
        rendered = _fill(ctx, tool, "input_schema", {"pattern": args["pattern"], "path": _absolute(args["path"], workdir)}, {})
    elif op == "web.read":
        tool = pick("WebFetch")
        rendered = _fill(ctx, tool, "input_schema", {"url": args["url"]}, {"prompt": "Return the page text."})
    elif op == "task.todo":
        tool = pick("TodoWrite")
        rendered = _fill(ctx, tool, "input_schema", {"todos": _todos(ctx, tool, args["items"])}, {})
    elif op == "skill.load":
        tool = pick("Skill")
        rendered = _fill(ctx, tool, "input_schema", {"skill": args["name"]}, {})
    elif op == "subagent.spawn":
        tool = pick("Agent", "Task")
        prompt = str(args["prompt"])
        description = " ".join(prompt.split()[:5])[:60] or "subagent"
        rendered = _fill(ctx, tool, "input_schema", {"description": description, "prompt": prompt}, {})
    elif op == "mcp.call":
        tool = pick(f"mcp__{args['server']}__{args['tool']}")
        arguments = args["arguments"]
        if not isinstance(arguments, dict):
            raise ctx.fail("`arguments` is not an object")
        rendered = _fill(ctx, tool, "input_schema", dict(arguments), {})
    else:  # parse_scenario admits only known operations
        raise ctx.no_tool()
    return RenderedCall(kind="tool_use", name=tool["name"], call_id=_call_id(call, "toolu_"), arguments=rendered)


def _lines(text: str) -> list[str]:
    if text == "":
        return []
    if text.endswith("\n"):
        text = text[:-1]
    return text.split("\n")


def _patch_add(ctx: _Context, path: str, content: str) -> str:
    if content == "":
        raise ctx.fail("apply_patch cannot add an empty file")
    body = "".join(f"+{line}\n" for line in _lines(content))
    return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"


def _patch_update(ctx: _Context, path: str, old: str, new: str, workdir: str) -> str:
    old_lines, new_lines = _lines(old), _lines(new)
    if not old_lines:
        raise ctx.fail("apply_patch needs a non-empty `old` (whole lines)")
    target = _absolute(path, workdir)
    try:
        with open(target, encoding="utf-8") as handle:
            file_lines = handle.read().split("\n")
    except (OSError, UnicodeDecodeError):
        file_lines = None  # cannot check here; Codex will say
    if file_lines is not None:
        n = len(old_lines)
        if not any(file_lines[i : i + n] == old_lines for i in range(len(file_lines) - n + 1)):
            raise ctx.fail(f"`old` is not whole lines of {path} (apply_patch edits whole lines only)")
    hunk = "".join(f"-{line}\n" for line in old_lines) + "".join(f"+{line}\n" for line in new_lines)
    return f"*** Begin Patch\n*** Update File: {path}\n@@\n{hunk}*** End Patch\n"


def render_responses(call: ScenarioCall, tools: Any, *, workdir: str, turn_index: int, turn_id: str | None = None) -> RenderedCall:
    """One neutral call as a Codex `function_call` or `custom_tool_call` item, from the request's `tools`."""
    offer = responses_offer(tools)
    ctx = _Context(call, offer, turn_index, turn_id)
    args = call.input
    op = call.op
    call_id = _call_id(call, "call_")
    if (neutral := _neutral(ctx, "parameters")) is not None and ctx.offer.tools[neutral[0]].get("type") == "function":
        return RenderedCall(kind="function_call", name=neutral[0], call_id=call_id, arguments=neutral[1])

    if op == "shell":
        tool = offer.tools.get("exec_command")
        if tool is None or tool.get("type") != "function":
            raise ctx.no_tool()
        rendered = _fill(ctx, tool, "parameters", {"cmd": args["command"]}, {})
        return RenderedCall(kind="function_call", name="exec_command", call_id=call_id, arguments=rendered)
    if op in ("file.write", "file.edit"):
        tool = offer.tools.get("apply_patch")
        if tool is None:
            raise ctx.no_tool()
        if op == "file.write":
            patch = _patch_add(ctx, args["path"], args["content"])
        else:
            patch = _patch_update(ctx, args["path"], args["old"], args["new"], workdir)
        if tool.get("type") == "custom":
            return RenderedCall(kind="custom_tool_call", name="apply_patch", call_id=call_id, text_input=patch)
        if tool.get("type") == "function":  # the JSON-function flavour of apply_patch takes {"input": patch}
            rendered = _fill(ctx, tool, "parameters", {"input": patch}, {})
            return RenderedCall(kind="function_call", name="apply_patch", call_id=call_id, arguments=rendered)
        raise ctx.no_tool()
    if op == "mcp.call":
        name = f"mcp__{args['server']}__{args['tool']}"
        tool = offer.tools.get(name)
        if tool is None or tool.get("type") != "function":
            raise ctx.no_tool()
        if not isinstance(args["arguments"], dict):
            raise ctx.fail("`arguments` is not an object")
        rendered = _fill(ctx, tool, "parameters", dict(args["arguments"]), {})
        return RenderedCall(kind="function_call", name=name, call_id=call_id, arguments=rendered)
    raise ctx.no_tool()


def arguments_json(call: RenderedCall) -> str:
    return json.dumps(call.arguments or {}, ensure_ascii=False, separators=(",", ":"))
