"""Calls: one tool call, normalised to what the engine needs, and the mapping of oharness's tools.

What belongs here: the `Call` value, `oharness_call` (an oharness native tool call → `Call`),
`replace_input` (the same tool with an embedder's replacement input) and the inert tools.
Vendor tools are mapped in `vendor.py`, the `Tool(argument)` notation there too.

Rules it keeps:
* mapping never decides: an input the engine cannot read (a missing or mistyped field, a patch
  that does not parse) becomes an opaque call, which the engine asks about (or, in Bypass under
  a deny rule, refuses);
* a replacement input is mapped by the mapper that built the original call, so it is read
  exactly as a first call of that tool would be.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .tables import lazy_attributes, load_table

__all__ = ["Call", "oharness_call", "replace_input", "INERT_TOOLS"]


def _load_inert() -> frozenset[str]:
    tools = frozenset(name.casefold() for name in load_table("inert.toml")["tools"])
    return tools | {"todowrite", "update_plan", "request_user_input"}


# `INERT_TOOLS` (data/inert.toml) is built on first use, not at import (see tables.py); it stays a
# module attribute; read it here through `_lazy`.
__getattr__, _lazy = lazy_attributes(globals(), {"INERT_TOOLS": _load_inert})


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call, normalised to what the engine needs (build with `oharness_call`,
    `vendor.vendor_call` or `vendor.notation_call`)."""

    tool: str  # the tool name as called (trail `tool`)
    rule_tool: str  # canonical rule tool: Bash, Read, Write, WebFetch, WebSearch, Agent, Skill, mcp__…, or a bare name
    input: Mapping[str, Any] = field(default_factory=dict)
    command: str | None = None
    argv: tuple[str, ...] | None = None
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    recursive_read: bool = False
    url: str | None = None
    name: str | None = None
    cwd: str | None = None
    opaque: str | None = None
    inert: bool = False
    read_only_hint: bool = False
    origin: str = "oharness"  # which mapper built it (used to re-map a replacement input)


def oharness_call(tool: str, input: Mapping[str, Any], cwd: str | None = None, *, read_only_hint: bool = False) -> Call:
    """Map an oharness native tool call to a Call."""
    folded = tool.casefold()
    fields = dict(input) if isinstance(input, Mapping) else {}

    def first_string(*names: str) -> str | None:
        for name in names:
            value = fields.get(name)
            if isinstance(value, str):
                return value
        return None

    if folded == "bash":
        command = fields.get("command")
        if isinstance(command, list) and all(isinstance(word, str) for word in command):
            return Call(tool, "Bash", fields, argv=tuple(command), cwd=cwd)
        if not isinstance(command, str):
            return Call(tool, "Bash", fields, cwd=cwd, opaque="input lacks a string 'command'")
        return Call(tool, "Bash", fields, command=command, cwd=cwd)
    if folded == "read":
        path = first_string("path", "file_path")
        return Call(tool, "Read", fields, reads=(path,) if path else (), cwd=cwd,
                    opaque=None if path else "input lacks 'path'")
    if folded in ("glob", "grep"):
        path = first_string("path") or "."
        return Call(tool, "Read", fields, reads=(path,), cwd=cwd)
    if folded in ("write", "edit", "multiedit", "notebookedit"):
        path = first_string("path", "file_path", "notebook_path")
        return Call(tool, "Write", fields, writes=(path,) if path else (), cwd=cwd,
                    opaque=None if path else "input lacks 'path'")
    if folded in ("apply_patch", "patch"):
        from .vendor import patch_paths

        text = first_string("patch", "input", "command")
        paths = patch_paths(text) if text is not None else None
        if paths is None:
            return Call(tool, "Write", fields, cwd=cwd, opaque="patch does not parse")
        return Call(tool, "Write", fields, writes=tuple(paths), cwd=cwd)
    if folded == "webfetch":
        return Call(tool, "WebFetch", fields, url=first_string("url") or "", cwd=cwd)
    if folded == "websearch":
        return Call(tool, "WebSearch", fields, cwd=cwd)
    if folded in ("agent", "task"):
        return Call(tool, "Agent", fields, name=first_string("type", "subagent_type") or "", cwd=cwd)
    if folded == "skill":
        return Call(tool, "Skill", fields, name=first_string("name", "skill") or "", cwd=cwd)
    if tool.startswith("mcp__"):
        return Call(tool, tool, fields, cwd=cwd, read_only_hint=read_only_hint)
    if folded in _lazy("INERT_TOOLS"):
        return Call(tool, tool, fields, cwd=cwd, inert=True)
    return Call(tool, tool, fields, cwd=cwd)


def replace_input(call: Call, new_input: Any) -> Call:
    """The same tool called with an embedder's replacement input (mapped by the call's own mapper).
    A replacement that is not an object (null, a string, a list) is decided as an input that
    names none of the tool's fields: the call the tool would refuse, never the original one."""
    if not isinstance(new_input, Mapping):
        new_input = {"__not_an_object__": new_input}
    if call.origin == "vendor":
        from .vendor import vendor_call

        return vendor_call(call.tool, new_input, call.cwd)
    return oharness_call(call.tool, new_input, call.cwd, read_only_hint=call.read_only_hint)
