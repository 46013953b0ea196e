"""A batch budget held live across concurrent cells (local backend; the Ray one's is in test_ray.py): each cell starts capped at
what is left of the batch's --max-cost-usd counting the running cells' spend so far, the running
cells are halted once the batch's spend reaches it, and no further cell starts — on oharness
against the offline scripted model, priced from the shipped table."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from metaharness.batch.report import why
from metaharness.batch.results import LiveSpend, read_results, spend_so_far
from metaharness.cli.main import cli
from metaharness.loopback.pricing import shipped_prices

from .conftest import write_plan, write_scenario

pytestmark = pytest.mark.timeout(300)

RESPONSE_USD = 0.315  # 100,000 input and 1,000 output tokens of the scripted model, at $3 / $15


# Answers 2.5 s apart: the batch (reading the streams every half second) sees the second answer of
# the two running cells well before either cell's own cap (0.7, crossed at its third) stops it.
def _turn(i: int) -> dict:
    return {"usage": {"input_tokens": 100000, "output_tokens": 1000}, "delay_ms": 2500, "text": f"step {i}",
            "calls": [{"op": "file.write", "input": {"path": f"t{i}.txt", "content": "x"}}]}


def spending_plan(tmp_path) -> str:
    """Three cells, each of which would spend 0.945 before its own cap of 0.7 stops it."""
    script = write_scenario(tmp_path / "spend.json", *[_turn(i) for i in range(5)], {"text": "done"})
    tasks = [{"id": f"t{i}", "prompt": "go", "script": script} for i in range(3)]
    return write_plan(tmp_path / "plan.json", tasks, [{"kind": "oharness", "decisions": "observe"}])


def test_concurrent_cells_stop_at_the_batch_budget_and_no_cell_starts_after(tmp_path, monkeypatch):
    monkeypatch.delenv("METAHARNESS_PRICES", raising=False)
    plan = spending_plan(tmp_path)
    out = tmp_path / "out"
    done = CliRunner().invoke(cli, ["batch", "run", plan, "--out", str(out), "--jobs", "2", "--max-cost-usd", "0.7"],
                              catch_exceptions=False)
    assert done.exit_code == 0, done.stderr
    assert_halted_at_the_batch_budget(out)


def assert_halted_at_the_batch_budget(out) -> None:
    """The two running cells halted by the batch at its 0.7, live, and the third never started
    (the local backend's test and the Ray backend's, tests/batch/test_ray.py)."""
    cells = read_results(str(out / "results.jsonl"))
    ran = [cells[(f"t{i}", "oharness", 1)] for i in range(2)]
    for cell in ran:
        # halted by the batch (its own cap, what was left when it started, was 0.7: not reached)
        assert cell.status == "ran" and not cell.passed and cell.infra is None and cell.attempts == 1, cell
        assert cell.close_reason != "budget" and cell.budget is not None
        assert cell.budget.startswith("the batch's --max-cost-usd 0.7 was spent ($"), cell.budget
        # the matrix, the page, --json; a halt that lands while a call waits denies it (the run's
        # wind-up), and the line counts it
        denied = f"; {cell.calls.denied} call(s) denied" if cell.calls.denied else ""
        assert why(cell) == f"stopped at its budget: {cell.budget}{denied}"
        assert cell.calls.denied <= 1, cell.calls  # at most the one call the halt found waiting
    # uncapped live, each would have run on to its own cap (0.945 apiece); here the batch stopped at
    # the responses in flight when its budget ran out: at most one more per running cell
    total = sum(cell.cost_usd or 0.0 for cell in ran)
    assert 0.7 <= total <= 0.7 + 2 * RESPONSE_USD + 1e-9, total
    assert cells[("t2", "oharness", 1)].status == "skipped" and cells[("t2", "oharness", 1)].skipped == "budget"


def test_a_running_cells_spend_is_read_from_its_stream():
    prices = shipped_prices()
    usage = b'{"event":"usage","model":"scripted:default","usage":{"input_tokens":100000,"output_tokens":1000}}'
    assert spend_so_far(usage + b"\n" + usage + b"\n{\"event\":\"us", prices) == pytest.approx(2 * RESPONSE_USD)
    # the run's own figure wins once it has one
    ended = b'{"event":"session.ended","metered_cost_usd":0.5}'
    assert spend_so_far(usage + b"\n" + ended, prices) == 0.5
    # a model the table does not price counts as nothing, or as the cost its harness reports
    assert spend_so_far(b'{"event":"usage","model":"nosuch-model","usage":{"input_tokens":5}}', prices) == 0.0
    assert spend_so_far(b'{"event":"usage","model":"nosuch","usage":{"input_tokens":5,"cost_usd":0.25}}', prices) == 0.25


def test_a_running_cells_stream_is_read_as_it_grows(tmp_path):
    """Each byte read once; a line waits for its newline; a stream begun again is read afresh."""
    prices = shipped_prices()
    usage = b'{"event":"usage","model":"scripted:default","usage":{"input_tokens":100000,"output_tokens":1000}}\n'
    path = tmp_path / "events.jsonl"
    reader = LiveSpend(prices)
    with pytest.raises(OSError):
        reader.read(str(path))  # not written yet
    path.write_bytes(usage + usage[:20])
    assert reader.read(str(path)) == pytest.approx(RESPONSE_USD)
    with open(path, "ab") as handle:
        handle.write(usage[20:] + b'{"event":"session.ended","metered_cost_usd":0.5}\n' + usage)
    assert reader.read(str(path)) == 0.5  # the run's own figure, once it has one
    path.write_bytes(usage)  # a new attempt's stream: shorter than what was read
    assert reader.read(str(path)) == pytest.approx(RESPONSE_USD)
    (tmp_path / "next.jsonl").write_bytes(usage * 3)
    (tmp_path / "next.jsonl").replace(path)  # another file in its place
    assert reader.read(str(path)) == pytest.approx(3 * RESPONSE_USD)
