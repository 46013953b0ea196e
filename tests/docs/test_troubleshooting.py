"""The troubleshooting page is the catalogue's rendering, and the catalogue names everything the
code can refuse, warn or close with (a name added without a cause and a fix fails here)."""

from __future__ import annotations

import re
import subprocess
import sys
import typing

from metaharness.protocol.troubleshooting import CLOSE_REASONS, COMMAND_REFUSALS, REFUSALS, WARNINGS
from metaharness.protocol.values import REFUSAL_CODES, CloseReason

from .support import DOCS, ROOT

SRC = ROOT / "src" / "metaharness"
SOURCES = {path: path.read_text() for path in SRC.rglob("*.py")}
# A refusal name is given to one of the refusal types, or leads a refusal sentence ("Name: …").
REFUSAL_CALL = re.compile(r"\b\w*Refus\w*\(\s*\"([A-Z][a-z]+(?:[A-Z][a-z]*)+)\"")
REFUSAL_SENTENCE = re.compile(r"f?\"([A-Z][a-z]+(?:[A-Z][a-z]*)+): ")
WARNING_CALL = re.compile(r"(?:warn\w*\(|code=|Warning\()\s*\"([A-Z][A-Z_]+)\"")


def test_the_page_is_the_generators_output():
    page = (DOCS / "troubleshooting.md").read_text()
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "troubleshooting.py")], capture_output=True,
                          text=True, check=True)
    assert page == proc.stdout, "docs/troubleshooting.md is stale: run `make docs` (tools/troubleshooting.py)"


def test_every_refusal_name_in_the_code_has_a_cause_and_a_fix():
    found = {name for text in SOURCES.values() for regex in (REFUSAL_CALL, REFUSAL_SENTENCE)
             for name in regex.findall(text)}
    assert len(found) > 30
    missing = found - {t.name for t in REFUSALS}
    assert not missing, f"add these to src/metaharness/protocol/troubleshooting.py: {sorted(missing)}"


def test_every_warning_code_has_a_cause_and_a_fix():
    wire = (DOCS / "reference" / "wire.md").read_text()
    table = wire[wire.index("### Warning codes"):]
    table = table[:table.index("\n#")]
    listed = set(re.findall(r"`([A-Z][A-Z_]+)`", table))
    written = {code for text in SOURCES.values() for code in WARNING_CALL.findall(text)}
    assert "NO_FRAME_IN_FORCE" in listed and "UNDECIDED_CALL_RAN" in written
    missing = (listed | written) - {t.name for t in WARNINGS}
    assert not missing, f"add these to src/metaharness/protocol/troubleshooting.py: {sorted(missing)}"


def test_every_close_reason_and_command_refusal_code_is_there():
    assert {t.name for t in CLOSE_REASONS} == set(typing.get_args(CloseReason))
    assert {t.name for t in COMMAND_REFUSALS} == set(REFUSAL_CODES)


def test_every_entry_says_a_cause_and_a_fix_once():
    entries = REFUSALS + COMMAND_REFUSALS + WARNINGS + CLOSE_REASONS
    assert len({(t.where.split()[0] == "warning", t.name) for t in entries}) == len(entries)
    assert all(t.cause.strip() and t.fix.strip() for t in entries)
