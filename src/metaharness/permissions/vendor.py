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
        start = next(i for i, l in enumerate(lines) if l.strip() == "*** Begin Patch")
        end = max(i for i, l in enumerate(lines) if l.strip() == "*** End Patch")
    except (StopIteration, ValueError):
        return None
    if end <= start:
        return None
    entries: list[tuple[str, str]] = []
    for line in lines[start + 1 : end]:
        m = _PATCH_LINE.match(line)
        if m:
            entries.append((m.group(1), m.group(2)))
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

    def s(field: str) -> str | None:
        v = inp.get(field)
        return v if isinstance(v, str) else None

    t = tool_name
    if t == "Bash":
        cmd = s("command")
        return Call(t, "Bash", inp, command=cmd, cwd=call_cwd, origin="vendor") if cmd is not None else bad("Bash", "input lacks a string 'command'")
    if t in ("exec_command", "exec"):
        cmd = inp.get("cmd", inp.get("command"))
        if isinstance(cmd, str):
            return Call(t, "Bash", inp, command=cmd, cwd=call_cwd, origin="vendor")
        if isinstance(cmd, list) and all(isinstance(x, str) for x in cmd):
            return Call(t, "Bash", inp, argv=tuple(cmd), cwd=call_cwd, origin="vendor")
        return bad("Bash", "input lacks 'cmd'")
    if t in ("shell", "local_shell"):
        cmd = inp.get("command")
        if isinstance(cmd, list) and cmd and all(isinstance(x, str) for x in cmd):
            return Call(t, "Bash", inp, argv=tuple(cmd), cwd=call_cwd, origin="vendor")
        if isinstance(cmd, str):
            return Call(t, "Bash", inp, command=cmd, cwd=call_cwd, origin="vendor")
        return bad("Bash", "input lacks an argv 'command'")
    if t == "write_stdin":
        return bad("Bash", "types into a running process")
    if t == "Write":
        p = s("file_path")
        return Call(t, "Write", inp, writes=(p,), cwd=call_cwd, origin="vendor") if p else bad("Write", "input lacks 'file_path'")
    if t in ("Edit", "MultiEdit", "NotebookEdit"):
        p = s("notebook_path") if t == "NotebookEdit" else s("file_path")
        return Call(t, "Write", inp, writes=(p,), cwd=call_cwd, origin="vendor") if p else bad("Write", "input lacks its path")
    if t == "apply_patch":
        changes = inp.get("changes") if isinstance(input, Mapping) else None
        if isinstance(changes, list):
            paths: list[str] = []
            for ch in changes:
                if not isinstance(ch, Mapping) or not isinstance(ch.get("path"), str):
                    return bad("Write", "patch changes do not parse")
                paths.append(ch["path"])
                kind = ch.get("kind")
                if isinstance(kind, Mapping) and isinstance(kind.get("move_path"), str):
                    paths.append(kind["move_path"])
            return Call(t, "Write", inp, writes=tuple(paths), cwd=call_cwd, origin="vendor")
        text = input if isinstance(input, str) else s("command") or s("input") or s("patch")
        if isinstance(inp.get("command"), list):
            text = "\n".join(x for x in inp["command"] if isinstance(x, str))
        found = patch_paths(text) if isinstance(text, str) else None
        if found is None:
            return bad("Write", "patch does not parse")
        return Call(t, "Write", inp if isinstance(input, Mapping) else {"patch": text}, writes=tuple(found),
                    cwd=call_cwd, origin="vendor")
    if t in ("Read", "view_image"):
        p = s("file_path") if t == "Read" else s("path")
        return Call(t, "Read", inp, reads=(p,), cwd=call_cwd, origin="vendor") if p else bad("Read", "input lacks its path")
    if t in ("Glob", "Grep"):
        p = s("path") or "."
        return Call(t, "Read", inp, reads=(p,), recursive_read=True, cwd=call_cwd, origin="vendor")
    if t == "WebFetch":
        u = s("url")
        return Call(t, "WebFetch", inp, url=u, cwd=call_cwd, origin="vendor") if u is not None else bad("WebFetch", "input lacks 'url'")
    if t in ("WebSearch", "web_search"):
        return Call(t, "WebSearch", inp, cwd=call_cwd, origin="vendor")
    if t in ("Task", "Agent"):
        return Call(t, "Agent", inp, name=s("subagent_type") or "", cwd=call_cwd, origin="vendor")
    if t == "Skill":
        return Call(t, "Skill", inp, name=s("skill") or s("name") or "", cwd=call_cwd, origin="vendor")
    if t in _INERT_VENDOR:
        return Call(t, t, inp, cwd=call_cwd, inert=True, origin="vendor")
    if t.startswith("mcp__"):
        return Call(t, t, inp, cwd=call_cwd, origin="vendor")
    return Call(t, t, inp, cwd=call_cwd, origin="vendor")


class NotationError(ValueError):
    """An `explain` argument that is not a call in rule notation."""


def notation_call(text: str, cwd: str, input_json: str | None = None) -> Call:
    """`Bash(git status)`, `Write(src/a.py)`, `WebFetch(https://…)`, `mcp__s__t` → Call.
    The text between the first `(` and the final `)` is the argument, verbatim."""
    text = text.strip()
    m = re.fullmatch(r"([A-Za-z][A-Za-z0-9_.-]*)(?:\((.*)\))?", text, re.DOTALL)
    if not m:
        raise NotationError(f"{text!r} is not a call in rule notation, e.g. 'Bash(git status)'")
    name, arg = m.group(1), m.group(2)
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
        return oharness_call("bash", {"command": arg if arg is not None else extra["command"], **{k: v for k, v in extra.items() if k != "command"}}, cwd)
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
        k, sep, v = arg.partition(":")
        if sep:
            extra = {k: v}
    call = oharness_call(name, extra, cwd, read_only_hint=bool(extra.pop("readOnlyHint", False)) if isinstance(extra, dict) else False)
    return call
