"""`batch run` keeps spend live inside each cell: a plan's per-cell `max_cost_usd` and the batch's
`--max-cost-usd` reach every cell's run as its own cap, a cell stopped there is a result (close
reason budget, its BUDGET_REACHED sentence, its cost from metaharness's meter), never retried, and
a cap whose traffic metaharness cannot price is refused before any cell runs. On oharness and on
the real Claude Code binary against the scripted loopback."""

from __future__ import annotations

import json
import os

import pytest

from metaharness.batch.report import why
from metaharness.batch.results import read_results

from .conftest import write_plan, write_scenario
from .test_e2e import VENDOR, batch

pytestmark = pytest.mark.timeout(400)

TURN = {"usage": {"input_tokens": 100000, "output_tokens": 1000}}  # $0.315 at the `*` row's price
# Every model is priced alike (Claude Code's default model may be newer than the shipped table);
# the cells read it from METAHARNESS_PRICES, as every run does.
PRICES = 'format = "metaharness.prices/1"\ntaken = "2031-01-01"\n[models."*"]\ninput = 3.0\noutput = 15.0\n'


@pytest.fixture(autouse=True)
def _prices(tmp_path, monkeypatch):
    (tmp_path / "prices.toml").write_text(PRICES)
    monkeypatch.setenv("METAHARNESS_PRICES", str(tmp_path / "prices.toml"))


def _scenario(tmp_path) -> str:
    turns = [dict(TURN, text=f"step {i}", calls=[{"op": "file.write", "input": {"path": f"t{i}.txt", "content": "x"}}])
             for i in range(3)]
    return write_scenario(tmp_path / "spend.json", *turns, {"text": "done"})


def _harnesses() -> list[dict]:
    found = [{"kind": "oharness", "decisions": "observe"}]
    if (VENDOR / "claude").exists():
        found.append({"kind": "claude", "vendor_dir": str(VENDOR), "decisions": "observe"})
    elif os.environ.get("METAHARNESS_REQUIRE_VENDOR") == "1":
        pytest.fail(f"claude is not installed in {VENDOR}")
    return found


def test_a_per_cell_cap_stops_each_cell_at_its_budget(tmp_path):
    harnesses = _harnesses()
    plan = write_plan(tmp_path / "plan.json", [{"id": "spend", "prompt": "go", "script": _scenario(tmp_path),
                                                "check": {"command": "test ! -e t2.txt"}}],
                      harnesses, defaults={"max_cost_usd": 0.5})
    out = tmp_path / "out"
    done = batch("run", plan, "--out", str(out), "--jobs", "1")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    results = read_results(str(out / "results.jsonl"))
    assert len(results) == len(harnesses)
    for (_, harness, _), cell in results.items():
        assert cell.close_reason == "budget" and cell.attempts == 1 and cell.infra is None, (harness, cell)
        assert cell.budget and "--max-cost-usd 0.5 reached: spent $0.6300 over 2 model responses (prices taken 2031-01-01)" in cell.budget
        assert cell.cost_usd == pytest.approx(0.63, abs=1e-6), (harness, cell)  # the meter's figure
        assert not cell.passed and why(cell).startswith("stopped at its budget: --max-cost-usd 0.5 reached")
        events = [json.loads(line) for line in (out / "spend" / harness / "1" / "events.jsonl").read_text().splitlines()]
        assert events[-1]["reason"] == "budget"


def test_the_batch_budget_caps_the_running_cell_at_what_is_left_and_skips_the_rest(tmp_path):
    script = _scenario(tmp_path)
    tasks = [{"id": f"t{i}", "prompt": "go", "script": script} for i in range(2)]
    plan = write_plan(tmp_path / "plan.json", tasks, [{"kind": "oharness", "decisions": "observe"}])
    out = tmp_path / "out"
    done = batch("run", plan, "--out", str(out), "--jobs", "1", "--max-cost-usd", "0.8")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    results = read_results(str(out / "results.jsonl"))
    first, second = results[("t0", "oharness", 1)], results[("t1", "oharness", 1)]
    # the first cell ran under the batch's whole budget and stopped once its third answer crossed it
    assert first.close_reason == "budget" and "--max-cost-usd 0.8 reached: spent $0.9450" in (first.budget or "")
    assert second.status == "skipped" and second.skipped == "budget"


def test_a_cap_on_traffic_metaharness_cannot_price_is_refused_before_any_cell_runs(tmp_path):
    plan = write_plan(tmp_path / "plan.json", [{"id": "t", "prompt": "go"}],
                      [{"kind": "codex", "model_endpoint": "http://127.0.0.1:9"}])
    out = tmp_path / "out"
    done = batch("run", plan, "--out", str(out), "--max-cost-usd", "1")
    assert done.returncode == 2
    assert "CostNotSeen: task 't' on harness 'codex': --max-cost-usd cannot be kept on codex" in done.stderr.decode()
    assert not (out / "results.jsonl").exists()


def test_batch_check_refuses_a_per_cell_cap_on_traffic_metaharness_cannot_price(tmp_path):
    plan = write_plan(tmp_path / "plan.json", [{"id": "t", "prompt": "go"}],
                      [{"kind": "claude", "credentials": "api-key", "max_cost_usd": 1.0}])
    done = batch("check", plan)
    assert done.returncode == 1 and "CostNotSeen: task 't' on harness 'claude'" in done.stderr.decode()
