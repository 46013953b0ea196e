"""The documentation site builds with --strict (no broken link or anchor), and its pages hold together."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from .support import DOCS, MKDOCS_YML, ROOT, forbidden_in, nav_pages


def test_the_site_builds_strictly(tmp_path):
    try:
        import mkdocs  # noqa: F401
    except ImportError:  # make test installs the docs extra; a missing one is a failure, not a skip
        raise AssertionError("mkdocs is not installed: install the docs extra (pip install -e '.[docs]')")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(MKDOCS_YML),
                           "--site-dir", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "api" / "index.html").is_file()
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    assert "start_run" in api and "RunSpec" in api and "ToolRequested" in api  # mkdocstrings rendered


def test_every_nav_page_exists_and_every_page_is_in_the_nav():
    pages = nav_pages()
    assert pages and len(pages) == len(set(pages))
    for page in pages:
        assert (DOCS / page).is_file(), page
    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if "internals" not in p.parts}
    # Pages other developers are writing land in docs/ and join the nav in one line each.
    pending = {"workflows.md", "batches.md", "replay.md", "acp-harnesses.md"}
    assert on_disk - set(pages) <= pending, on_disk - set(pages)


def test_every_page_links_to_the_glossary():
    for page in nav_pages():
        if page == "concepts.md":
            continue
        text = (DOCS / page).read_text()
        assert re.search(r"\]\((?:\.\./)*concepts\.md(?:#[\w-]+)?\)", text), f"{page} does not link to concepts.md"


def test_no_page_points_outside_the_site():
    for page in DOCS.rglob("*.md"):
        if "internals" in page.parts:
            continue  # notes for developers, excluded from the site
        assert forbidden_in(page.read_text()) == [], page


def test_the_readme_points_only_inside_the_repository():
    text = (ROOT / "README.md").read_text()
    assert forbidden_in(text) == [], forbidden_in(text)
    for target in re.findall(r"\]\(([^)#]+)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target
