"""`metaharness batch report DIR [--html PAGE]`: the matrix as text, and as a page in real Chromium."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from metaharness.batch import load_plan, run_batch
from metaharness.cli.main import cli

from .conftest import REPO, make_suite, write_plan, write_scenario

ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture(scope="module")
def batch_dir(tmp_path_factory):
    """One batch of the suite (two repeats), with the third task skipped by the budget on its last cells."""
    tmp = tmp_path_factory.mktemp("report")
    data = make_suite(tmp)
    os.environ["REAL_HOME"] = os.path.expanduser("~")
    plan = write_plan(tmp / "plan.json", data["tasks"], data["harnesses"], repeats=2)
    out = tmp / "out"

    async def go():
        return [r async for r in run_batch(load_plan(plan), str(out), jobs=2, max_runs=10)]

    asyncio.run(go())
    return out


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_the_matrix_in_the_terminal(batch_dir):
    result = invoke("batch", "report", str(batch_dir))
    assert result.exit_code == 0, result.output
    text = result.output
    for word in ("notes", "fails", "isolate", "oh-frame", "oh-policy"):
        assert word in text
    assert "pass 2/2" in text and "pass 0/2" in text and "2 denied" in text
    # scripted runs are priced by metaharness from the loopback's usage (a scenario's default tokens)
    assert "cost $0.0004" in text and "cost not reported" not in text
    assert "2 skipped" in text  # the budget's unscheduled cells (isolate × oh-policy)
    # which calls were refused, and why: the frame's shell denial, once per repeat
    assert "refused in notes on oh-frame (×2): bash command=echo hi > shell.txt — this step admits" in text


def test_report_of_a_dir_that_is_not_a_batch_is_refused(tmp_path):
    result = invoke("batch", "report", str(tmp_path))
    assert result.exit_code == 2 and "is not a batch directory" in result.stderr


def test_the_report_page_in_chromium(batch_dir, tmp_path, chromium):
    page_path = tmp_path / "report.html"
    result = invoke("batch", "report", str(batch_dir), "--html", str(page_path))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "report-runs" / "notes" / "oh-frame" / "1.html").exists()
    ARTIFACTS.mkdir(exist_ok=True)
    page = chromium.new_page(viewport={"width": 1300, "height": 700})
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(page_path.as_uri())
    assert requests == [page_path.as_uri()]  # self-contained: nothing else is fetched
    cell = page.locator('td.cell[data-task="notes"][data-harness="oh-frame"]')
    assert "pass 2/2" in cell.inner_text() and "1 denied" not in cell.inner_text()
    assert "2 denied" in cell.inner_text()
    assert "all-pass" in cell.get_attribute("class")
    assert "none-pass" in page.locator('td.cell[data-task="fails"][data-harness="oh-policy"]').get_attribute("class")
    refused = cell.locator("details.refused")
    assert "refused calls (1)" in refused.inner_text()
    refused.locator("summary").click()
    assert "echo hi > shell.txt" in refused.inner_text() and "which it does not" in refused.inner_text()
    assert "2 skipped: budget" in page.locator('td.cell[data-task="isolate"][data-harness="oh-policy"]').inner_text()
    page.screenshot(path=str(ARTIFACTS / "batch-report.png"), full_page=True)
    # a cell's link opens that run's own page (the single-run view)
    cell.locator("a", has_text="run 1").click()
    page.wait_for_load_state()
    assert page.url.endswith("report-runs/notes/oh-frame/1.html")
    assert page.locator("tr.call-row").count() == 3
    assert "DENY" in page.locator("body").inner_text()
    page.go_back()
    # per task, two harnesses side by side (the compare view)
    page.locator("#task-notes td.compare a").click()
    page.wait_for_load_state()
    assert page.url.endswith("report-runs/notes/oh-frame-vs-oh-policy.html")
    body = page.locator("body").inner_text()
    assert "frame" in body and "policy" in body
    assert page.locator(".runs > *").count() == 2
    page.screenshot(path=str(ARTIFACTS / "batch-report-compare.png"), full_page=True)


def test_pair_chooses_the_two_harnesses_and_an_unknown_one_is_refused(batch_dir, tmp_path):
    page = tmp_path / "r.html"
    result = invoke("batch", "report", str(batch_dir), "--html", str(page), "--pair", "oh-policy", "oh-frame")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r-runs" / "notes" / "oh-policy-vs-oh-frame.html").exists()
    assert 'href="r-runs/notes/oh-policy-vs-oh-frame.html"' in page.read_text()
    refused = invoke("batch", "report", str(batch_dir), "--html", str(tmp_path / "x.html"), "--pair", "oh-frame", "codex")
    assert refused.exit_code == 2 and "--pair names harness 'codex', which the plan does not have" in refused.stderr


def test_every_failed_cell_says_why_in_one_line():

    from metaharness.batch.report import why
    from metaharness.batch.results import CellResult, Calls

    def cell(**kw):
        return CellResult(task="t", harness="h", kind="claude", repeat=1, **kw)

    assert why(cell(refusal="VendorMissing: claude is not on the child PATH")) == \
        "refused at start: VendorMissing: claude is not on the child PATH"
    assert why(cell(infra="the harness was killed")) == "infrastructure: the harness was killed"
    assert why(cell(check="fail", check_exit_code=3)) == "the check exited 3"
    assert why(cell(check="fail", check_exit_code=1, check_tail="FAILED test_x | 1 failed")) == \
        "the check exited 1: FAILED test_x | 1 failed"
    assert why(cell(check="timeout")) == "the check timed out"
    assert why(cell(exit_code=1, close_reason="error", stream="complete")) == \
        "the run exited 1, closed error, stream complete"
    assert why(cell(model_failure="anthropic rate_limited 429: slow down", check="fail", check_exit_code=1)) == \
        "a model request failed: anthropic rate_limited 429: slow down"
    # calls refused — by metaharness and by the harness itself — join what stopped the cell
    assert why(cell(check="fail", check_exit_code=1, harness_refused=2)) == \
        "the check exited 1; 2 call(s) refused by the harness itself"
    assert why(cell(calls=Calls(denied=1), harness_refused=1, exit_code=0, close_reason="completed")) == \
        "1 call(s) denied, 1 call(s) refused by the harness itself"
    assert "\n" not in why(cell(refusal="Bad: one\ntwo")) and len(why(cell(infra="x" * 1000))) <= 300


def test_the_stream_gives_the_model_failure_and_the_harness_refusals():
    from metaharness.batch.results import summarise_stream

    lines = [
        {"event": "warning", "code": "VENDOR_PERMISSION_DENIED", "message": "call_0: oharness refused the call"},
        {"event": "warning", "code": "MODEL_REQUEST_FAILED", "message": "the anthropic request failed",
         "model_failure": {"provider": "anthropic", "kind": "auth", "http_status": 401,
                           "provider_message": "invalid x-api-key"}},
        {"event": "warning", "code": "MODEL_REQUEST_FAILED", "message": "a second one",
         "model_failure": {"provider": "anthropic", "kind": "timeout", "http_status": None}},
        {"event": "warning", "code": "VENDOR_PERMISSION_DENIED", "message": "call_1: the agent refused"},
    ]
    summary = summarise_stream(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    assert summary["harness_refused"] == 2
    assert summary["model_failure"] == "anthropic auth 401: invalid x-api-key"  # the first one


def test_every_cell_that_did_not_pass_says_why_in_the_terminal_the_json_and_the_page(batch_dir, tmp_path, chromium):
    # `fails` on oh-frame runs frameless: oharness's own manual mode refuses the write (no one to ask)
    text = invoke("batch", "report", str(batch_dir)).output
    assert "failed: fails on oh-frame #1: the check exited 2: grep: notes.txt: No such file or directory; 1 call(s) refused by the harness itself" in text
    assert "failed: fails on oh-policy #1: the check exited 1\n" in text  # bypass: written, but wrong
    result = invoke("batch", "report", str(batch_dir), "--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["format"] == "metaharness.batch-report/1"
    by_cell = {(c["task"], c["harness"]): c for c in report["cells"]}
    fails = by_cell[("fails", "oh-frame")]
    assert fails["passed"] == 0 and fails["runs"] == 2 and fails["harness_refused"] == 2 and fails["denied"] == 0
    because = "the check exited 2: grep: notes.txt: No such file or directory; 1 call(s) refused by the harness itself"
    assert fails["failures"] == [{"repeat": r, "why": because} for r in (1, 2)]
    assert by_cell[("notes", "oh-frame")]["failures"] == [] and by_cell[("notes", "oh-frame")]["denied"] == 2
    page_path = tmp_path / "why.html"
    assert invoke("batch", "report", str(batch_dir), "--html", str(page_path), "--json").exit_code == 0
    page = chromium.new_page()
    page.goto(page_path.as_uri())
    cell = page.locator('td.cell[data-task="fails"][data-harness="oh-frame"]')
    assert "2 refused by the harness" in cell.inner_text()
    assert cell.locator("ul.why li").all_inner_texts() == [
        f"run {r}: {because}" for r in (1, 2)]
    assert page.locator('td.cell[data-task="notes"][data-harness="oh-frame"] ul.why').count() == 0


def test_a_failed_check_says_its_last_lines_and_a_failed_model_request_says_what_failed(tmp_path, monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdef")
    monkeypatch.setenv("OHARNESS_REQUEST_TIMEOUT", "3")
    script = write_scenario(tmp_path / "s.json", {"text": "done"})
    check = {"command": "echo 'expected HELLO'; echo 'notes.txt: wrong'; exit 4"}
    plans = {
        "tail": write_plan(tmp_path / "tail.json", [{"id": "t", "prompt": "go", "script": script, "check": check}],
                           [{"kind": "oharness"}]),
        "model": write_plan(tmp_path / "model.json", [{"id": "t", "prompt": "go", "check": check}],
                            [{"kind": "oharness", "model": "anthropic:claude-sonnet-4-5", "model_endpoint": dead}]),
    }

    async def batch(plan, out):
        return [r async for r in run_batch(load_plan(plan), str(out), jobs=1)]

    def go(plan, out):  # in a thread of its own: a browser test may hold this thread's event loop
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, batch(plan, out)).result()

    [tail] = go(plans["tail"], tmp_path / "tail")
    assert tail.check_tail == "expected HELLO | notes.txt: wrong"
    [model] = go(plans["model"], tmp_path / "model")
    assert model.model_failure is not None and model.model_failure.startswith("anthropic connection_refused")
    text = invoke("batch", "report", str(tmp_path / "tail")).output
    assert "failed: t on oharness #1: the check exited 4: expected HELLO | notes.txt: wrong" in text
    text = invoke("batch", "report", str(tmp_path / "model")).output
    assert "failed: t on oharness #1: a model request failed: anthropic connection_refused" in text
