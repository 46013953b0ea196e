"""How a capability descriptor is printed (§ 9.1)."""

from __future__ import annotations

import json

from metaharness.protocol.capabilities import descriptor_json, render_table


def test_render_table_sorted_with_no_vendor_tool():
    text = render_table({"shell": "Bash", "file.read": "Read", "dir.list": None, "mcp.call": None})
    assert text.splitlines() == [
        "dir.list         -> (no vendor tool)",
        "file.read        -> Read",
        "mcp.call         -> (no vendor tool)",
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
