"""The typed capability descriptor: its wire form is fixed, the run asks it by method, and
every adapter's tool table agrees with the rendering its descriptor prints."""

from __future__ import annotations

import pathlib
from importlib.metadata import version

import msgspec
import pytest

from metaharness.adapters import KINDS, adapter_class
from metaharness.adapters.base import Tool, path_at, resolve_tool
from metaharness.protocol.capabilities import descriptor_json
from metaharness.protocol.descriptor import CapabilityDescriptor, CommandRefused, harness_descriptor
from metaharness.run.spec import RunSpec, foreign_option

GOLDEN = pathlib.Path(__file__).parent / "golden" / "capabilities"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_wire_form_is_byte_for_byte_the_golden_file(kind):
    """What `metaharness capabilities KIND` prints (oharness's pin is this installation's version)."""
    expected = (GOLDEN / f"{kind}.json").read_text().replace("{version}", version("metaharness"))
    assert descriptor_json(adapter_class(kind).descriptor().to_wire()) == expected


def test_the_wire_form_leaves_out_the_adapter_options():
    descriptor = adapter_class("codex").descriptor()
    assert descriptor.options == ("codex_replace_relay",)
    assert "options" not in descriptor.to_wire()


def test_the_run_asks_the_descriptor_by_method():
    descriptor = harness_descriptor("x", "1.0", {"shell": "sh"}, registration="unverified", replace="absent",
                                    refused=("steer",))
    assert descriptor.command_refusal("tool.decide") is None
    assert descriptor.command_refusal("steer") == "UNSUPPORTED_CONTROL"
    assert descriptor.command_refusal("no.such.command") == "UNSUPPORTED_CONTROL"
    odd = msgspec.structs.replace(descriptor, commands={**descriptor.commands, "halt": CommandRefused("TOO_LATE")})
    assert odd.command_refusal("halt") == "TOO_LATE"
    assert descriptor.delivers_mode("ask") and not msgspec.structs.replace(
        descriptor, decision_modes={"ask": "unverified"}).delivers_mode("ask")
    assert not descriptor.delivers_mode("no-such-mode")
    assert descriptor.kind == "x"


def test_a_descriptor_round_trips_through_its_wire_form():
    for kind in KINDS:
        descriptor = adapter_class(kind).descriptor()
        back = msgspec.convert(descriptor.to_wire(), CapabilityDescriptor)
        assert msgspec.structs.replace(back, options=descriptor.options) == descriptor, kind


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_tool_table_resolves_what_the_rendering_names(kind):
    """Every vendor tool the descriptor names for an operation resolves to that operation
    (a row with a per-entry rule, Codex's apply_patch, resolves by its entries instead)."""
    cls = adapter_class(kind)
    for op, tool in cls.descriptor().rendering.items():
        if tool is None:
            continue
        row = cls.tools[tool]
        assert row.op == op or row.resolve is not None, (kind, op, tool)
    assert resolve_tool(cls.tools, "NoSuchTool", {}, "/w", "/w").operations == []
    assert resolve_tool(cls.tools, "mcp__server", {}, "/w", "/w").operations == []


def test_the_shared_resolver():
    table = {"Write": Tool("file.write", path_at("file_path")), "Glob": Tool("dir.list", path_at("path", ".")),
             "Grep": Tool("search", path_at("path", ".", when_absent_only=True))}
    write = resolve_tool(table, "Write", {"file_path": "src/a.py"}, None, "/w")
    assert write.operations == [("file.write", "", "")]
    assert write.subjects == [("file:src/a.py", [("file.write", "", "")])]
    assert resolve_tool(table, "Write", {"file_path": ""}, None, "/w").subjects == []
    assert resolve_tool(table, "Write", "not a dict", None, "/w").subjects == []
    # a default subject: for any unusable value, or only for a missing key
    assert resolve_tool(table, "Glob", {"path": ""}, None, "/w").subjects == [("file:.", [("dir.list", "", "")])]
    assert resolve_tool(table, "Grep", {}, None, "/w").subjects == [("file:.", [("search", "", "")])]
    assert resolve_tool(table, "Grep", {"path": ""}, None, "/w").subjects == []
    assert resolve_tool(table, "mcp__gh__create_issue", {}, None, "/w").operations == [("mcp.call", "gh", "create_issue")]
    assert resolve_tool(table, "mcp__gh__", {}, None, "/w").operations == []
    assert resolve_tool(table, "Edit", {}, None, "/w").operations == []


def test_an_adapter_option_is_refused_on_a_run_of_another_kind():
    owned = adapter_class("codex").descriptor().options
    assert foreign_option(RunSpec(kind="codex", codex_replace_relay=True), owned) is None
    for kind in (k for k in KINDS if k != "codex"):
        spec = RunSpec(kind=kind, codex_replace_relay=True)
        assert foreign_option(spec, adapter_class(kind).descriptor().options) == (
            f"--codex-replace-relay is a codex option and this run is {kind}")
        assert foreign_option(RunSpec(kind=kind), adapter_class(kind).descriptor().options) is None
