"""The HTML page in a real headless Chromium (Debian's package, driven by Playwright's Python API).

No browser is downloaded: Playwright launches the system executable. Screenshots go to
test-artifacts/ (git-ignored) for a person to look at.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import ARTIFACTS, invoke

@pytest.fixture(scope="module")
def browser(chromium):
    ARTIFACTS.mkdir(exist_ok=True)
    return chromium


def _page(browser, html: Path):
    page = browser.new_page(viewport={"width": 1400, "height": 700})
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(html.as_uri())
    return page, requests


def _build(tmp_path: Path, *streams: str) -> Path:
    html = tmp_path / "page.html"
    result = invoke(["project", "--html", str(html), *[f"fixtures/{s}" for s in streams]])
    assert result.exit_code == 0, result.stderr
    return html


def test_two_runs_side_by_side_with_gaps_and_divergences(browser, tmp_path):
    html = _build(tmp_path, "compare_claude.jsonl", "compare_codex.jsonl")
    page, requests = _page(browser, html)
    assert requests == [html.as_uri()]  # self-contained: nothing else is fetched
    assert page.locator("tr.call-row").count() == 5
    assert page.locator("tr.gap-row").count() == 2
    assert page.locator("td.gap").count() == 2
    assert page.locator("tr.divergent").count() == 3
    assert page.locator("tr.step-row").count() == 1
    gap_left = page.locator("#row-5 td.gap")
    assert gap_left.inner_text() == "no matching call in run A"
    assert "result differs: ok vs exit 1" in page.locator("#row-4 td.pos").inner_text()
    # a cell shows the call, its input, the decision, the result and the cost so far
    cell = page.locator("#row-3 td.cell").first.inner_text()
    assert "Edit" in cell and "file_path=/tmp/mh/work/notes.txt" in cell
    assert "DENY" in cell and "by frame · seam hook" in cell and "which it does not" in cell
    assert "cost reported so far: $0.0041" in cell
    assert "result exit 1" in page.locator("#row-4 td.cell").nth(1).inner_text()
    page.screenshot(path=str(ARTIFACTS / "view-compare.png"), full_page=True)

    button = page.locator("#next-divergence")
    counter = page.locator("#divergence-counter")
    visited = []
    for _ in range(4):
        button.click()
        current = page.locator("tr.current")
        assert current.count() == 1
        visited.append(current.get_attribute("id"))
        assert current.is_visible()
    assert visited == ["row-1", "row-4", "row-5", "row-1"]  # and round again
    assert counter.inner_text() == "divergence 1 of 3 (row 1)"
    page.locator("#prev-divergence").click()
    assert page.locator("tr.current").get_attribute("id") == "row-5"
    page.keyboard.press("n")
    assert page.locator("tr.current").get_attribute("id") == "row-1"
    button.click()
    in_view = page.evaluate(
        "() => { const r = document.querySelector('tr.current').getBoundingClientRect();"
        " return r.top >= 0 && r.bottom <= window.innerHeight; }"
    )
    assert in_view  # the button scrolled the divergent row into view
    page.screenshot(path=str(ARTIFACTS / "view-compare-current.png"))
    page.close()


def test_one_run_page(browser, tmp_path):
    html = _build(tmp_path, "all_events.jsonl")
    page, requests = _page(browser, html)
    assert requests == [html.as_uri()]
    assert page.locator("tr.call-row").count() == 3
    assert page.locator("#next-divergence").count() == 0
    assert page.locator("tr.divergent").count() == 0
    text = page.locator("body").inner_text()
    assert "REPLACE" in text and "by embedder" in text
    assert 'runs instead: {"content":"hello\\n","file_path":"greeting.txt"}' in text
    page.screenshot(path=str(ARTIFACTS / "view-one-run.png"), full_page=True)
    page.close()


def test_identical_runs_have_no_divergence(browser, tmp_path):
    html = _build(tmp_path, "compare_codex.jsonl", "compare_codex.jsonl")
    page, _ = _page(browser, html)
    assert page.locator("tr.divergent").count() == 0
    assert page.locator("#next-divergence").is_disabled()
    assert "no divergences" in page.locator("#divergence-counter").inner_text()
    page.close()
