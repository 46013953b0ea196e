"""Printing a capability descriptor (docs/guides/claude-and-codex.md#capabilities).

What belongs here: the two text forms of `metaharness capabilities <kind>` — the
descriptor as pretty JSON, and the `--render` table. The descriptor's content is
each adapter's; this module only fixes how it is written.
"""

from __future__ import annotations

import json
from typing import Any


def descriptor_json(descriptor: dict[str, Any]) -> str:
    """2-space indented JSON, keys in the order given, non-ASCII raw, one trailing newline."""
    return json.dumps(descriptor, indent=2, ensure_ascii=False) + "\n"


# Operations with no single tool in the table because every adapter resolves them by the
# vendor tool's name (the descriptor keeps `null` for them): what --render shows instead.
BY_NAME = {"mcp.call": "mcp__<server>__<tool> (resolved by name)"}


def render_table(rendering: dict[str, str | None]) -> str:
    """One line per operation sorted by name: `{op:<16} -> {tool}`, the by-name form, or `(no vendor tool)`."""
    lines = [f"{op:<16} -> {tool if tool is not None else BY_NAME.get(op, '(no vendor tool)')}"
             for op, tool in sorted(rendering.items())]
    return "".join(line + "\n" for line in lines)
