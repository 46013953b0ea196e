"""The walk is fail-closed by construction (issue "deny holds", deliverable 1): one dispatch table
names every node type of the pinned tree-sitter-bash grammar, and a type it does not handle makes
the call opaque while its children are still walked for deny."""

from __future__ import annotations

import pytest

from metaharness.permissions.shell import _lazy, analyse
from metaharness.permissions.shell import walk


def grammar_node_types() -> set[str]:
    lang = _lazy("_LANGUAGE")
    return {lang.node_kind_for_id(i) for i in range(lang.node_kind_count)
            if lang.node_kind_is_named(i) and lang.node_kind_is_visible(i)} | {"ERROR"}


def test_every_grammar_node_type_is_handled_or_opaque_by_default():
    types = grammar_node_types()
    assert len(types) > 50  # the language object really was enumerated
    missing = types - set(walk.HANDLERS) - set(walk.OPAQUE_BY_DEFAULT)
    assert not missing, f"node types neither handled nor opaque by default: {sorted(missing)}"
    assert not set(walk.HANDLERS) & set(walk.OPAQUE_BY_DEFAULT)


def test_the_table_names_no_type_the_grammar_lacks():
    assert set(walk.HANDLERS) - grammar_node_types() == set()


def test_pinned_grammar_version():
    import importlib.metadata as md
    assert md.version("tree-sitter-bash") == "0.25.1"  # upgrading means re-running this table test


@pytest.mark.parametrize("node_type,command", [
    ("subshell", "(rm -rf build)"), ("compound_statement", "{ rm -rf build; }"), ("pipeline", "ls | rm -rf build"),
    ("command_substitution", "echo $(rm -rf build)"), ("for_statement", "for x in y; do rm -rf build; done"),
])
def test_an_unhandled_type_makes_the_call_opaque_and_deny_still_sees_inside(monkeypatch, node_type, command):
    monkeypatch.delitem(walk.HANDLERS, node_type)
    a = analyse(command, "/w/proj", "/home/u")
    assert any(node_type in why for why in a.opaque), a.opaque
    assert any(node_type in why for why in a.program_unknown)
    assert any(c.display() == "rm -rf build" for c in a.cmds), [c.display() for c in a.cmds]


def test_unhandled_type_is_denied_in_bypass(world, monkeypatch):
    monkeypatch.delitem(walk.HANDLERS, "subshell")
    v = world.decide("Bash((ls))", world.ctx(mode="bypass"))
    assert v.behavior == "deny", v.to_json()
