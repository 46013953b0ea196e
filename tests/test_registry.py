"""The registry of harness kinds (protocol/harnesses.py) is the only list of them.

Every module under src/ is parsed with `ast`; a literal collection (tuple, list, set, dict keys,
a `Literal[...]`) or one string naming three or more of the kinds is another list of them, and
fails here: read the kinds from the registry instead. The registry's facts are checked against
what they name: the adapter class (its kind and pin), the doctor, the vendor pin file.
"""

from __future__ import annotations

import ast
import json
import pathlib
import re

import pytest

from metaharness.adapters import adapter_class
from metaharness.protocol.harnesses import HARNESSES, KINDS, REGISTRY, load

REPO = pathlib.Path(__file__).resolve().parent.parent
SRC = REPO / "src"
REGISTRY_MODULE = SRC / "metaharness" / "protocol" / "harnesses.py"
WORD = re.compile(r"[a-z]+")


def named_kinds(node: ast.AST) -> set[str]:
    """The kinds a literal collection's string elements, or one string's words, name."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return set(WORD.findall(node.value)) & set(KINDS)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        elements = node.elts
    elif isinstance(node, ast.Dict):
        elements = [key for key in node.keys if key is not None]
    else:
        return set()
    return {e.value for e in elements if isinstance(e, ast.Constant) and e.value in KINDS}


def other_lists() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == REGISTRY_MODULE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            kinds = named_kinds(node)
            if len(kinds) >= 3:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {', '.join(sorted(kinds))}")
    return found


def test_no_other_list_of_the_kinds_in_src():
    assert other_lists() == []


def test_the_check_finds_a_list():
    source = 'A = ("oharness", "claude", "codex")\nB = {"claude": 1, "codex": 2, "gemini": 3}\nC = "claude, codex or gemini"\n'
    assert sum(len(named_kinds(node)) >= 3 for node in ast.walk(ast.parse(source))) == 3


@pytest.mark.parametrize("entry", HARNESSES, ids=lambda entry: entry.name)
def test_each_entry_names_its_adapter_and_pin(entry):
    cls = adapter_class(entry.name)
    assert cls.kind == entry.name
    assert cls.descriptor().adapter.id == entry.name
    if entry.package:
        assert cls.descriptor().versions_pinned == (entry.pin,)
        assert getattr(cls, "binary_name", entry.binary) == entry.binary
        assert getattr(cls, "package", entry.package) == entry.package


@pytest.mark.parametrize("entry", [e for e in HARNESSES if e.doctor], ids=lambda entry: entry.name)
def test_each_doctor_has_its_checks(entry):
    checks = load(entry.doctor)
    assert callable(checks.doctor_checks) and callable(checks.conformance_checks)


def test_every_vendor_pin_is_in_the_vendor_package_file():
    pinned = json.loads((REPO / ".vendor" / "package.json").read_text())["dependencies"]
    assert {e.package: e.pin for e in HARNESSES if e.package} == {p: pinned[p] for p in pinned if p in
                                                                 {e.package for e in HARNESSES}}


def test_the_wire_and_the_plan_take_exactly_the_registry_kinds():
    import msgspec.inspect as mi

    from metaharness.batch.plan import Harness as PlanHarness
    from metaharness.protocol.events import SessionStarted

    def literal(struct, name):
        field = next(f for f in mi.type_info(struct).fields if f.name == name)
        return field.type.values

    assert sorted(literal(SessionStarted, "adapter")) == sorted(KINDS)
    assert sorted(literal(PlanHarness, "kind")) == sorted(KINDS)


@pytest.mark.parametrize("entry", HARNESSES, ids=lambda entry: entry.name)
def test_each_rendering_is_an_inverse_of_its_tool_table(entry):
    """Every operation the descriptor renders names a tool of the table that performs it."""
    cls = adapter_class(entry.name)
    for op, tool in cls.descriptor().rendering.items():
        if tool is not None:
            row = cls.tools[tool]
            assert op == row.op or op in row.renders, (op, tool)
