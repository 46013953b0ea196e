"""Shared facts for the documentation tests: where the site is, what it contains."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MKDOCS_YML = ROOT / "mkdocs.yml"

# What a user must never be pointed at: section signs, and the developers' own documents.
FORBIDDEN = re.compile(r"§|\b(?:protocol|permissions|vendors|acp-vendors)\.md\b|\bspec/|\bspec `")


def nav_pages() -> list[str]:
    """The pages in mkdocs.yml's nav, as paths relative to docs/."""
    return re.findall(r":\s*([\w./-]+\.md)\s*$", MKDOCS_YML.read_text(), flags=re.M)


def forbidden_in(text: str) -> list[str]:
    return [match.group(0) for match in FORBIDDEN.finditer(text)]
