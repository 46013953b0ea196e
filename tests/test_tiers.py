"""The test tiers come from one place (tests/conftest.py): no test file marks itself `e2e`,
`browser` or `slow`, every rule of the table still names a test, and what needs a vendor binary,
a browser, Ray or a Phoenix server cannot land in `make check` unnoticed."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import importlib.util

# tests/conftest.py by its path: under xdist another package's conftest may hold the name
_spec = importlib.util.spec_from_file_location("tiers_conftest", Path(__file__).with_name("conftest.py"))
_tiers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_tiers)
FIXTURE_TIERS, ROOT, TIERS, tiers_of = _tiers.FIXTURE_TIERS, _tiers.ROOT, _tiers.TIERS, _tiers.tiers_of

TESTS = ROOT / "tests"
SOURCES = sorted(p for p in TESTS.rglob("*.py") if "fixtures" not in p.relative_to(TESTS).parts)
HAND_MARK = re.compile(r"pytest\.mark\.(e2e|browser|slow|waits)\b")


def test_no_test_file_marks_its_own_tier():
    marked = [str(p.relative_to(ROOT)) for p in SOURCES if p != TESTS / "conftest.py" and p != Path(__file__)
              and HAND_MARK.search(p.read_text())]
    assert marked == [], f"tier marks by hand (add a rule to tests/conftest.py instead): {marked}"


def test_every_rule_names_an_existing_test():
    files = [str(p.relative_to(ROOT)) for p in SOURCES]
    for tier, patterns in TIERS:
        for pattern in patterns:
            path, _, name = pattern.partition("::")
            hits = fnmatch.filter(files, path)
            assert hits, f"{tier} rule {pattern!r} matches no file"
            if name:
                function, _, case = name.partition("[")
                function = function.rstrip("*")
                assert any(f"def {function}" in (ROOT / hit).read_text() for hit in hits), pattern
                case = case.removeprefix("[]").removesuffix("]")
                if case and "*" not in case:  # one named case: its id is in the file
                    assert any(f'"{case}"' in (ROOT / hit).read_text() for hit in hits), pattern


def test_a_new_end_to_end_file_and_a_browser_test_get_their_tier_without_a_mark():
    assert tiers_of("tests/newharness/test_e2e_newharness.py::test_anything") == {"e2e"}
    assert tiers_of("tests/view/test_new_page.py::test_page", ("tmp_path", "chromium")) == {"browser"}
    assert tiers_of("tests/workflow/test_steps.py::test_checks[claude]") == {"e2e"}
    assert tiers_of("tests/workflow/test_steps.py::test_checks[oharness]") == set()
    assert tiers_of("tests/permissions/test_fuzz_bash_oracle.py::test_no_bypass_against_real_bash") == {"slow"}
    assert tiers_of("tests/run/test_core.py::test_anything") == set()
    assert tiers_of("tests/run/test_e2e_model_failures.py::test_a_failed_request_is_an_event[qwen-dns]") == {
        "e2e", "waits"}
    assert tiers_of("tests/run/test_e2e_model_failures.py::test_a_failed_request_is_an_event[qwen-401]") == {"e2e"}
    assert tiers_of("tests/run/test_live_otel.py::test_spans", ("tmp_path", "phoenix")) == {"slow"}
    assert tiers_of("tests/export/test_phoenix.py::test_ui", ("phoenix", "chromium")) == {"slow", "browser"}


def test_what_needs_a_browser_or_ray_goes_through_its_tier():
    # Playwright only through the `chromium` fixture; Ray's cluster only in a `slow` file; a
    # Phoenix server only through the `phoenix` fixture.
    for path in SOURCES:
        text, rel = path.read_text(), str(path.relative_to(ROOT))
        if path in (TESTS / "conftest.py", Path(__file__)):
            continue
        if "sync_playwright" in text:
            raise AssertionError(f"{rel} launches Playwright itself: use the `chromium` fixture ({FIXTURE_TIERS})")
        if re.search(r"phoenix_server\.serve\b|import[^\n]*\bserve\b", text) and "phoenix_server" in text:
            raise AssertionError(f"{rel} starts Phoenix itself: use the `phoenix` fixture ({FIXTURE_TIERS})")
        if "cluster_utils" in text:
            assert tiers_of(rel) == {"slow"}, f"{rel} starts a Ray cluster outside the slow tier"


def test_no_test_points_at_a_section_of_a_document_the_repository_does_not_hold():
    # A test names the rule it holds in words (or the site page), never a "§ n" of an outside spec.
    # tests/docs checks user-facing strings for that mark, so it spells it.
    marked = [str(p.relative_to(ROOT)) for p in sorted(TESTS.rglob("*"))
              if p.is_file() and p.suffix in (".py", ".md", ".toml", ".json", ".jsonl", "")
              and p != Path(__file__) and "docs" not in p.relative_to(TESTS).parts[:1] and "\u00a7" in p.read_text(errors="replace")]
    assert marked == [], marked
