"""The pages that list the harness kinds list exactly the registry's (protocol/harnesses.py), in
its order: the wire reference's `adapter` row, a batch plan's `kind`, the Harbor export's agent
name, and the troubleshooting table (generated from the catalogue, which reads the registry)."""

from __future__ import annotations

import pathlib
import re

import pytest

from metaharness.protocol.harnesses import KINDS

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"
# page → a pattern for the one line that lists the kinds
LISTS = {
    "reference/wire.md": r"^\| `adapter` \|",
    "batches.md": r"^A \*\*harness\*\* has a `kind`",
    "guides/harbor.md": r"^\| `session\.started` \| `agent`",
    "troubleshooting.md": r"^\| `UnknownHarness` \|",
}
WORD = re.compile(r"`([a-z]+)`")


@pytest.mark.parametrize("page", sorted(LISTS))
def test_the_page_lists_the_registry_kinds(page):
    (line,) = [line for line in (DOCS / page).read_text().splitlines() if re.search(LISTS[page], line)]
    assert tuple(word for word in WORD.findall(line) if word in KINDS) == KINDS, line
