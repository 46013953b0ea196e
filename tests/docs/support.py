"""Shared facts for the documentation tests: where the site is, what it contains."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MKDOCS_YML = ROOT / "mkdocs.yml"

# What a user must never be pointed at: section signs, and the developers' own documents.
# (A site page may share a name, as docs/reference/permissions.md does: only a bare name is refused.)
FORBIDDEN = re.compile(r"§|(?<![\w/-])(?:protocol|permissions|vendors|acp-vendors)\.md\b|\bspec/|\bspec `")


def nav_pages() -> list[str]:
    """The pages in mkdocs.yml's nav, as paths relative to docs/."""
    return re.findall(r"^\s*- [^#\n]*?:\s*([\w./-]+\.md)\s*$", MKDOCS_YML.read_text(), flags=re.M)


DOCS_PATH = re.compile(r"\bdocs/([\w/.-]+\.md)")


def forbidden_in(text: str) -> list[str]:
    """Section signs, the developers' documents, and docs/ pages that are not in the site."""
    found = [match.group(0) for match in FORBIDDEN.finditer(text)]
    pages = set(nav_pages())
    found += [f"docs/{page}" for page in DOCS_PATH.findall(text) if page not in pages]
    return found
