"""How a capability descriptor is printed (the wire rule “the capability descriptor”)."""

from __future__ import annotations

import json

from metaharness.adapters.base import resolve_tool
from metaharness.protocol.capabilities import descriptor_json, render_table


def test_render_table_sorted_with_no_vendor_tool():
    text = render_table({"shell": "Bash", "file.read": "Read", "dir.list": None, "mcp.call": None})
    assert text.splitlines() == [
        "dir.list         -> (no vendor tool)",
        "file.read        -> Read",
        "mcp.call         -> mcp__<server>__<tool> (resolved by name)",
        "shell            -> Bash",
    ]
    assert text.endswith("\n")


def test_descriptor_json_keeps_given_order_and_indents_two():
    d = {"adapter": {"id": "claude", "class": "harness"}, "versions_pinned": ["2.1.328"], "replace": "delivered",
         "rendering": {"dir.list": None, "file.edit": "Edit"}}
    text = descriptor_json(d)
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert list(json.loads(text)) == ["adapter", "versions_pinned", "replace", "rendering"]
    assert text.splitlines()[1] == '  "adapter": {'
    assert '"dir.list": null' in text


def test_render_agrees_with_what_every_adapter_does_for_mcp_calls():
    from metaharness.adapters import KINDS, adapter_class

    for kind in KINDS:
        cls = adapter_class(kind)
        assert "mcp.call         -> mcp__<server>__<tool> (resolved by name)" in render_table(
            cls.descriptor().rendering).splitlines(), kind
        resolution = resolve_tool(cls.tools, "mcp__github__create_issue", {"title": "x"}, "/w", "/w")
        assert resolution.operations == [("mcp.call", "github", "create_issue")], kind
