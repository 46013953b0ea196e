"""The troubleshooting page is the catalogue's rendering, and the catalogue names everything the
code can refuse, warn or close with (a name added without a cause and a fix fails here)."""

from __future__ import annotations

import re
import subprocess
import sys
import typing

from metaharness.protocol.refusals import RefusalName, constants
from metaharness.protocol.troubleshooting import CLOSE_REASONS, COMMAND_REFUSALS, REFUSALS, WARNINGS
from metaharness.protocol.values import CloseReason, RefusalCode

from .support import DOCS, ROOT

SRC = ROOT / "src" / "metaharness"
SOURCES = {path: path.read_text() for path in SRC.rglob("*.py")}
WARNING_CALL = re.compile(r"\bWarningCode\.([A-Z][A-Z_]+)\b")  # every code is written as its constant


def test_the_page_is_the_generators_output():
    page = (DOCS / "troubleshooting.md").read_text()
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "troubleshooting.py")], capture_output=True,
                          text=True, check=True)
    assert page == proc.stdout, "docs/troubleshooting.md is stale: run `make docs` (tools/troubleshooting.py)"


def test_every_refusal_name_in_the_catalogue_is_raised_somewhere():
    # The code names a refusal only by its constant, and the constants are the catalogue's names
    # (tests/test_refusal_names.py); a name nothing refuses with is a stale entry.
    used = {name for name in constants(RefusalName) for text in SOURCES.values() if f"RefusalName.{name}" in text}
    assert len(used) > 30
    unused = {name for name in constants(RefusalName) if not any(f"RefusalName.{name}" in text for text in SOURCES.values())}
    assert not unused, f"nothing refuses with these; remove them from protocol/refusals.py and the catalogue: {sorted(unused)}"


def test_vendor_setting_invalid_names_every_setting_a_vendor_carries():
    from metaharness.adapters.acp import gemini, opencode, qwen
    from metaharness.adapters.codex import launch as codex

    carried = {name for module in (codex, opencode, gemini, qwen) for name in module.PASSED_THROUGH}
    entry = next(t for t in REFUSALS if t.name == "VendorSettingInvalid")
    assert set(re.findall(r"`(METAHARNESS_[A-Z_]+)`", entry.cause)) == carried, entry.cause


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
    assert {t.name for t in COMMAND_REFUSALS} == set(typing.get_args(RefusalCode))


def test_every_entry_says_a_cause_and_a_fix_once():
    entries = REFUSALS + COMMAND_REFUSALS + WARNINGS + CLOSE_REASONS
    assert len({(t.where.split()[0] == "warning", t.name) for t in entries}) == len(entries)
    assert all(t.cause.strip() and t.fix.strip() for t in entries)
