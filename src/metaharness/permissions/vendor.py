"""Mapping foreign tool calls to engine calls: vendor tools for policy mode (docs/reference/permissions.md)
and the `Tool(arg)` call notation of `permissions explain`.

Rules this module keeps: an input that lacks the expected field, or has it with the wrong type, is
opaque (never guessed); relative paths resolve against the call's own cwd, else the run's.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from .calls import Call, oharness_call
from .rules import canonical_tool

__all__ = ["vendor_call", "patch_entries", "patch_paths", "notation_call", "NotationError"]

_INERT_VENDOR = {"TodoWrite", "update_plan", "request_user_input"}
_PATCH_LINE = re.compile(r"^\*\*\* (Add File|Update File|Delete File|Move to): (.+?)\s*$")


def patch_entries(text: str) -> list[tuple[str, str]] | None:
    """The file headers of a Codex `apply_patch` text, in order, as (header, path) with header one of
    `Add File`, `Update File`, `Delete File`, `Move to`; None if it does not parse."""
    lines = text.splitlines()
    try:
        start = next(index for index, patch_line in enumerate(lines) if patch_line.strip() == "*** Begin Patch")
        end = max(index for index, patch_line in enumerate(lines) if patch_line.strip() == "*** End Patch")
    except (StopIteration, ValueError):
        return None
    if end <= start:
        return None
    entries: list[tuple[str, str]] = []
    for line in lines[start + 1 : end]:
        match = _PATCH_LINE.match(line)
        if match:
            entries.append((match.group(1), match.group(2)))
        elif line.startswith("*** ") and not line.startswith("*** End of File"):
            return None
    return entries if entries else None


def patch_paths(text: str) -> list[str] | None:
    """Paths a Codex `apply_patch` text touches, or None if it does not parse."""
    entries = patch_entries(text)
    return [path for _, path in entries] if entries is not None else None


def vendor_call(tool_name: str, input: Any, cwd: str | None) -> Call:
    """Map a vendor (Claude Code / Codex) tool call to an engine Call."""
    inp: Mapping[str, Any] = input if isinstance(input, Mapping) else {}
    call_cwd = inp.get("cwd") if isinstance(inp.get("cwd"), str) else cwd

    def bad(rule_tool: str, why: str) -> Call:
        return Call(tool_name, rule_tool, inp, cwd=call_cwd, opaque=why, origin="vendor")

    def string_field(field: str) -> str | None:
        value = inp.get(field)
        return value if isinstance(value, str) else None

    tool = tool_name
    if tool == "Bash":
        cmd = string_field("command")
        return Call(tool, "Bash", inp, command=cmd, cwd=call_cwd, origin="vendor") if cmd is not None else bad("Bash", "input lacks a string 'command'")
    if tool in ("exec_command", "exec"):
        cmd = inp.get("cmd", inp.get("command"))
        if isinstance(cmd, str):
            return Call(tool, "Bash", inp, command=cmd, cwd=call_cwd, origin="vendor")
        if isinstance(cmd, list) and all(isinstance(item, str) for item in cmd):
            return Call(tool, "Bash", inp, argv=tuple(cmd), cwd=call_cwd, origin="vendor")
        return bad("Bash", "input lacks 'cmd'")
    if tool in ("shell", "local_shell"):
        cmd = inp.get("command")
        if isinstance(cmd, list) and cmd and all(isinstance(item, str) for item in cmd):
            return Call(tool, "Bash", inp, argv=tuple(cmd), cwd=call_cwd, origin="vendor")
        if isinstance(cmd, str):
            return Call(tool, "Bash", inp, command=cmd, cwd=call_cwd, origin="vendor")
        return bad("Bash", "input lacks an argv 'command'")
    if tool == "write_stdin":
        return bad("Bash", "types into a running process")
    if tool == "Write":
        path = string_field("file_path")
        return Call(tool, "Write", inp, writes=(path,), cwd=call_cwd, origin="vendor") if path else bad("Write", "input lacks 'file_path'")
    if tool in ("Edit", "MultiEdit", "NotebookEdit"):
        path = string_field("notebook_path") if tool == "NotebookEdit" else string_field("file_path")
        return Call(tool, "Write", inp, writes=(path,), cwd=call_cwd, origin="vendor") if path else bad("Write", "input lacks its path")
    if tool == "apply_patch":
        changes = inp.get("changes") if isinstance(input, Mapping) else None
        if isinstance(changes, list):
            paths: list[str] = []
            for char in changes:
                if not isinstance(char, Mapping) or not isinstance(char.get("path"), str):
                    return bad("Write", "patch changes do not parse")
                paths.append(char["path"])
                kind = char.get("kind")
                if isinstance(kind, Mapping) and isinstance(kind.get("move_path"), str):
                    paths.append(kind["move_path"])
            return Call(tool, "Write", inp, writes=tuple(paths), cwd=call_cwd, origin="vendor")
        text = input if isinstance(input, str) else string_field("command") or string_field("input") or string_field("patch")
        if isinstance(inp.get("command"), list):
            text = "\n".join(item for item in inp["command"] if isinstance(item, str))
        found = patch_paths(text) if isinstance(text, str) else None
        if found is None:
            return bad("Write", "patch does not parse")
        return Call(tool, "Write", inp if isinstance(input, Mapping) else {"patch": text}, writes=tuple(found),
                    cwd=call_cwd, origin="vendor")
    if tool in ("Read", "view_image"):
        path = string_field("file_path") if tool == "Read" else string_field("path")
        return Call(tool, "Read", inp, reads=(path,), cwd=call_cwd, origin="vendor") if path else bad("Read", "input lacks its path")
    if tool in ("Glob", "Grep"):
        path = string_field("path") or "."
        return Call(tool, "Read", inp, reads=(path,), recursive_read=True, cwd=call_cwd, origin="vendor")
    if tool == "WebFetch":
        url = string_field("url")
        return Call(tool, "WebFetch", inp, url=url, cwd=call_cwd, origin="vendor") if url is not None else bad("WebFetch", "input lacks 'url'")
    if tool in ("WebSearch", "web_search"):
        return Call(tool, "WebSearch", inp, cwd=call_cwd, origin="vendor")
    if tool in ("Task", "Agent"):
        return Call(tool, "Agent", inp, name=string_field("subagent_type") or "", cwd=call_cwd, origin="vendor")
    if tool == "Skill":
        return Call(tool, "Skill", inp, name=string_field("skill") or string_field("name") or "", cwd=call_cwd, origin="vendor")
    if tool in _INERT_VENDOR:
        return Call(tool, tool, inp, cwd=call_cwd, inert=True, origin="vendor")
    if tool.startswith("mcp__"):
        return Call(tool, tool, inp, cwd=call_cwd, origin="vendor")
    return Call(tool, tool, inp, cwd=call_cwd, origin="vendor")


class NotationError(ValueError):
    """An `explain` argument that is not a call in rule notation."""


def notation_call(text: str, cwd: str, input_json: str | None = None) -> Call:
    """`Bash(git status)`, `Write(src/a.py)`, `WebFetch(https://…)`, `mcp__s__t` → Call.
    The text between the first `(` and the final `)` is the argument, verbatim."""
    text = text.strip()
    match = re.fullmatch(r"([A-Za-z][A-Za-z0-9_.-]*)(?:\((.*)\))?", text, re.DOTALL)
    if not match:
        raise NotationError(f"{text!r} is not a call in rule notation, e.g. 'Bash(git status)'")
    name, arg = match.group(1), match.group(2)
    extra: dict[str, Any] = {}
    if input_json is not None:
        try:
            extra = json.loads(input_json)
        except json.JSONDecodeError as e:
            raise NotationError(f"--input is not valid JSON: {e.msg}") from None
        if not isinstance(extra, dict):
            raise NotationError("--input must be a JSON object")
    tool = canonical_tool(name)
    if name.casefold() == "edit":
        tool = "Write"
    if tool == "Bash":
        if arg is None and "command" not in extra:
            raise NotationError("Bash needs a command: Bash(<command>)")
        return oharness_call("bash", {"command": arg if arg is not None else extra["command"], **{field_name: value for field_name, value in extra.items() if field_name != "command"}}, cwd)
    if tool in ("Read", "Write"):
        if arg is None and "path" not in extra:
            raise NotationError(f"{tool} needs a path: {tool}(<path>)")
        return oharness_call("read" if tool == "Read" else "write", {"path": arg if arg is not None else extra["path"]}, cwd)
    if tool == "WebFetch":
        return oharness_call("webfetch", {"url": arg if arg is not None else extra.get("url", "")}, cwd)
    if tool == "WebSearch":
        return oharness_call("websearch", {"query": arg or ""}, cwd)
    if tool in ("Agent", "Skill"):
        key = "type" if tool == "Agent" else "name"
        return oharness_call(tool.lower(), {key: arg if arg is not None else extra.get(key, "")}, cwd)
    if tool in ("Glob", "Grep"):
        return oharness_call(tool.lower(), {"path": arg or "."}, cwd)
    if arg is not None and not extra:
        # A parameter in notation: `mcp__x__y(repo:acme/site)` → {"repo": "acme/site"}.
        field_name, sep, value = arg.partition(":")
        if sep:
            extra = {field_name: value}
    call = oharness_call(name, extra, cwd, read_only_hint=bool(extra.pop("readOnlyHint", False)) if isinstance(extra, dict) else False)
    return call
