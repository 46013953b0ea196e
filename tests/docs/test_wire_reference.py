"""The events-and-commands page names every event, every field in wire order with its presence
(req / null / omit), and every command with its keys — checked against the wire's own structs."""

from __future__ import annotations

import re

import msgspec

from metaharness.protocol.commands import COMMAND_BY_NAME
from metaharness.protocol.events import EVENT_BY_NAME

from .support import DOCS

PAGE = (DOCS / "reference" / "wire.md").read_text()


def _section(name: str) -> str:
    match = re.search(rf"^### `{re.escape(name)}`.*?$(.*?)(?=^#{{2,3}} )", PAGE, flags=re.M | re.S)
    assert match, f"no section for {name}"
    return match.group(1)


def _presence(field: msgspec.structs.FieldInfo) -> str:
    if field.required:
        return "req"
    if field.default is msgspec.UNSET:
        return "omit"
    return "null" if field.default is None else "req"  # a non-null default is always written


def test_every_event_has_a_section_listing_its_fields_in_wire_order():
    for name, struct in EVENT_BY_NAME.items():
        rows = re.findall(r"^\| `(\w+)` \| .*? \| (req|null|omit) \|", _section(name), flags=re.M)
        expected = [(f.encode_name, _presence(f)) for f in msgspec.structs.fields(struct)]
        assert rows == expected, name


def test_the_canonical_event_order_is_stated():
    stated = re.search(r"Twenty names, in this canonical order: (.*?)\. Keys", PAGE, flags=re.S).group(1)
    assert re.findall(r"`([\w.]+)`", stated) == list(EVENT_BY_NAME)


def test_every_command_is_in_the_table_with_its_keys():
    for name, struct in COMMAND_BY_NAME.items():
        row = re.search(rf"^\| `{re.escape(name)}` \| ([^|]*) \|", PAGE, flags=re.M)
        assert row, name
        keys = {f.encode_name for f in msgspec.structs.fields(struct)} - {"id"}
        assert set(re.findall(r"`(\w+)`", row.group(1))) == keys, name


def test_every_omitted_key_is_named_in_the_null_rule():
    rule = re.search(r"Only these keys are\s+\*\*omitted\*\*(.*?)In the tables", PAGE, flags=re.S).group(1)
    for name, struct in EVENT_BY_NAME.items():
        for field in msgspec.structs.fields(struct):
            if _presence(field) == "omit":
                assert f"`{field.encode_name}`" in rule or f"`{name}.{field.encode_name}`" in rule, (name, field.name)
