"""Refusal names, command refusal codes and warning codes come from one place: protocol/refusals.py.

Every module under src/ is parsed with `ast`; a string that is a refusal name or code
(`"CostNotSeen"`, `"TOO_LATE"`), or a sentence led by one (`"CostNotSeen: …"`, an f-string
included), is a bare spelling of it and fails here: name it `RefusalName.CostNotSeen` or
`CommandCode.TOO_LATE` instead. The constants are checked against the troubleshooting
catalogue both ways (each name has its cause and fix there, each entry a constant here), and
the codes against the wire's `RefusalCode` type. A fixed sentence of `Sentence` is written there
once: the same sentence spelled again anywhere in src fails here too.

Not a spelling: the constants module itself, the catalogue (its entries are what the constants
are checked against), a `Literal[...]` type (a type is spelled with literals) and an `__all__`
list (it names classes such as `ScratchRefused`, not refusals).
"""

from __future__ import annotations

import ast
import pathlib
import re
import typing

from metaharness.protocol.refusals import CommandCode, RefusalName, Sentence, WarningCode, constants
from metaharness.protocol.troubleshooting import COMMAND_REFUSALS, REFUSALS, WARNINGS
from metaharness.protocol.values import RefusalCode

REPO = pathlib.Path(__file__).resolve().parent.parent
SRC = REPO / "src"
PROTOCOL = SRC / "metaharness" / "protocol"
THE_PLACES = (PROTOCOL / "refusals.py", PROTOCOL / "troubleshooting.py")
NAMES = set(constants(RefusalName).values()) | set(constants(CommandCode).values()) | set(constants(WarningCode).values())
LEAD = re.compile(r"([A-Za-z_]+): ")
SENTENCES = set(constants(Sentence).values())


def exempt(tree: ast.AST) -> set[int]:
    """The ids of the string nodes that are not spellings: inside `Literal[...]` or `__all__`."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        literal = isinstance(node, ast.Subscript) and (
            (isinstance(node.value, ast.Name) and node.value.id == "Literal")
            or (isinstance(node.value, ast.Attribute) and node.value.attr == "Literal"))
        names_all = isinstance(node, (ast.Assign, ast.AugAssign)) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in getattr(node, "targets", [getattr(node, "target", None)]))
        if literal or names_all:
            inside.update(id(n) for n in ast.walk(node))
    return inside


def bare_spellings(source: str) -> list[tuple[int, str]]:
    """(line, name) for each string in `source` that spells a refusal name or code by hand."""
    tree = ast.parse(source)
    skip = exempt(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            lead = LEAD.match(node.value)
            if node.value in NAMES:
                found.append((node.lineno, node.value))
            elif any(sentence in node.value for sentence in SENTENCES):
                found.append((node.lineno, next(k for k, v in constants(Sentence).items() if v in node.value)))
            elif lead and lead.group(1) in NAMES:
                found.append((node.lineno, lead.group(1)))
    return found


def test_no_bare_refusal_name_in_src():
    found = [f"{path.relative_to(REPO)}:{line}: {name}"
             for path in sorted(SRC.rglob("*.py")) if path not in THE_PLACES
             for line, name in bare_spellings(path.read_text())]
    assert found == [], "name these from metaharness.protocol.refusals:\n" + "\n".join(found)


def test_the_check_finds_a_bare_spelling():
    source = '''
raise StartRefusal("VendorMissing", "no binary")
raise RunRefused(f"CostNotSeen: {why}")
raise RunRefused("FrameConflict: give one frame")
refused("TOO_LATE", why)
fail(f"{RefusalName.FrameUnreadable}: {FrameRefusal('FrameUnreadable', 'x')}")
reason = ("no turn is running, so there is nothing to steer; "
          "message.inject reaches the next turn")
'''
    assert sorted(bare_spellings(source)) == [(2, "VendorMissing"), (3, "CostNotSeen"), (4, "FrameConflict"),
                                              (5, "TOO_LATE"), (6, "FrameUnreadable"), (7, "NOTHING_TO_STEER")]


def test_the_check_passes_a_constant_a_type_and_an_export_list():
    source = '''
raise StartRefusal(RefusalName.VendorMissing, "no binary")
raise RunRefused(f"{RefusalName.CostNotSeen}: {why}")
raise ControlRefused(CommandCode.TOO_LATE, Sentence.NOTHING_TO_STEER)
Code = Literal["TOO_LATE", "MALFORMED"]
__all__ = ["ScratchRefused", "FrameInvalid"]
doc = "a refusal such as `VendorMissing` is named in prose"
'''
    assert bare_spellings(source) == []


def test_each_refusal_name_is_a_constant_and_in_the_catalogue():
    by_attribute = constants(RefusalName)
    assert all(key == value for key, value in by_attribute.items())  # spelled as the name itself
    assert set(by_attribute.values()) == {t.name for t in REFUSALS}


def test_each_command_code_is_a_constant_on_the_wire_and_in_the_catalogue():
    by_attribute = constants(CommandCode)
    assert all(key == value for key, value in by_attribute.items())
    assert set(by_attribute.values()) == set(typing.get_args(RefusalCode)) == {t.name for t in COMMAND_REFUSALS}


def test_each_warning_code_is_a_constant_and_in_the_catalogue():
    by_attribute = constants(WarningCode)
    assert all(key == value for key, value in by_attribute.items())
    assert set(by_attribute.values()) == {t.name for t in WARNINGS}
