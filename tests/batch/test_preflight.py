"""`batch run` makes `batch check`'s start checks before any cell runs (the same sentences, by
name, nothing written to DIR); a workflow task's cell is checked as `workflow run` checks its start;
`--prices` reaches every cell (a plain run and a workflow run), on the offline scripted model."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from click.testing import CliRunner

from metaharness.batch.cell import CellJob, run_argv
from metaharness.batch.plan import load_plan
from metaharness.batch.results import read_results
from metaharness.cli.main import cli

from .conftest import REPO, write_plan, write_scenario

BUGFIX = REPO / "examples" / "bugfix"
# the scripted model (`scripted:default`) at twice the shipped table's price of it ($3 / $15)
PRICES = 'format = "metaharness.prices/1"\ntaken = "2031-01-01"\n[models."default"]\ninput = 6.0\noutput = 30.0\n'
TURN = {"usage": {"input_tokens": 100000, "output_tokens": 1000}}  # $0.63 at these prices, $0.315 shipped


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def refusals(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("metaharness: ")]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_run_refuses_by_name_with_the_sentences_of_check_and_writes_nothing(suite):
    tmp = suite["tmp"]
    notes = suite["tasks"][0]
    harnesses = [{"kind": "oharness"}, {"kind": "oharness", "id": "watch", "decisions": "observe"},
                 {"kind": "codex", "vendor_dir": str(tmp / "nowhere")}]
    plan = write_plan(tmp / "p.json", [notes], harnesses)
    checked = invoke("batch", "check", plan)
    assert checked.exit_code == 1
    expected = refusals(checked.stderr)
    assert len(expected) == 2, checked.stderr  # notes/watch (a frame under observe), notes/codex (no binary)
    out = tmp / "out"
    started = invoke("batch", "run", plan, "--out", str(out))
    assert started.exit_code == 2 and refusals(started.stderr) == expected, started.stderr
    assert not out.exists()  # refused before DIR was made: no plan.json, no results.jsonl, no cell


def test_a_resume_its_start_checks_refuse_leaves_the_dir_as_it_was(suite):
    tmp = suite["tmp"]
    policy = tmp / "policy.json"
    policy.write_text('{"permissions": {"allow": ["Write"]}}')
    script = write_scenario(tmp / "s.json", {"text": "done"})
    plan = write_plan(tmp / "p.json", [{"id": "t", "prompt": "go", "script": script, "policy": [str(policy)]}],
                      [{"kind": "oharness", "decisions": "policy", "policy_scopes": "none"}], repeats=2)
    out = tmp / "out"
    first = invoke("batch", "run", plan, "--out", str(out), "--jobs", "1", "--max-runs", "1")
    assert first.exit_code == 0, first.stderr
    before = _tree(out)
    assert len(read_results(str(out / "results.jsonl"))) == 2  # one ran, one skipped (budget)
    policy.write_text('{"permissions": {"deny": 5}}')  # the policy file no longer loads
    resumed = invoke("batch", "run", plan, "--out", str(out))
    assert resumed.exit_code == 2
    said = refusals(resumed.stderr)
    assert len(said) == 1 and said[0].startswith("metaharness: task 't' on harness 'oharness': PolicyInvalid: ")
    assert "resumed:" not in resumed.stderr  # no cell kept or run
    assert _tree(out) == before  # the results, the plan copy and every cell's files, untouched
    # a resume checks only what it still runs: with every cell kept, nothing is refused
    policy.write_text('{"permissions": {"allow": ["Write"]}}')
    assert invoke("batch", "run", plan, "--out", str(out)).exit_code == 0
    policy.write_text('{"permissions": {"deny": 5}}')
    again = invoke("batch", "run", plan, "--out", str(out))
    assert again.exit_code == 0, again.stderr
    assert "resumed: 2 cell(s) kept from before, 0 to run" in again.stderr


def _workflow_task(tmp: Path, **extra) -> dict:
    workspace = tmp / "workspace"
    if not workspace.exists():
        shutil.copytree(BUGFIX / "workspace", workspace)
    return {"id": "bugfix", "prompt": "add(2, 3) should be 5", "workflow": str(BUGFIX / "bugfix.workflow.toml"),
            "script": str(BUGFIX / "bugfix.scenario.json"), "workspace": str(workspace), **extra}


def test_check_and_run_load_a_workflow_tasks_files_and_check_its_start(tmp_path):
    good = _workflow_task(tmp_path)
    assert invoke("batch", "check", write_plan(tmp_path / "ok.json", [good], [{"kind": "oharness"}])).exit_code == 0
    # a node's schema file that does not load, a harness setting a workflow refuses, a session
    # start the run refuses: each by the workflow run's own name, for its task and harness
    (tmp_path / "bad.schema.json").write_text('{"type": 12}')
    broken = tmp_path / "broken.workflow.toml"
    broken.write_text('format = "metaharness.workflow/1"\nid = "b"\nversion = "1"\nstart = "a"\n'
                      '[nodes.a]\nprompt = "answer"\nhandoff = { kind = "structured_answer", schema = "bad.schema.json" }\n')
    tasks = [good, _workflow_task(tmp_path, id="broken", workflow=str(broken)),
             _workflow_task(tmp_path, id="unscripted", script=None)]
    plan = write_plan(tmp_path / "p.json", tasks, [{"kind": "oharness"},
                                                   {"kind": "oharness", "id": "watch", "decisions": "observe"}])
    checked = invoke("batch", "check", plan)
    assert checked.exit_code == 1
    said = refusals(checked.stderr)
    assert "metaharness: task 'bugfix' on harness 'watch': ObserveCannotFrame: observe mode enforces nothing, " \
           "so no step's frame could hold" in said, said
    assert any(line.startswith("metaharness: task 'broken' on harness 'oharness': SchemaUnloadable: node 'a': the schema ")
               for line in said), said
    assert any(line.startswith("metaharness: task 'unscripted' on harness 'oharness': NoModel: ") for line in said), said
    assert len(said) == 5, said  # bugfix/watch, broken × 2, unscripted/oharness, unscripted/watch
    out = tmp_path / "out"
    started = invoke("batch", "run", plan, "--out", str(out))
    assert started.exit_code == 2 and refusals(started.stderr) == said
    assert not out.exists()


def test_prices_reach_every_cell_and_a_bad_price_file_is_refused_before_any_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("METAHARNESS_PRICES", raising=False)
    monkeypatch.chdir(tmp_path)  # --prices given relative: every cell runs in a workspace of its own
    (tmp_path / "prices.toml").write_text(PRICES)
    turns = [dict(TURN, text=f"step {i}", calls=[{"op": "file.write", "input": {"path": f"t{i}.txt", "content": "x"}}])
             for i in range(3)]
    script = write_scenario(tmp_path / "spend.json", *turns, {"text": "done"})
    plan = write_plan(tmp_path / "plan.json", [{"id": "spend", "prompt": "go", "script": script}],
                      [{"kind": "oharness", "decisions": "observe"}])
    # the shipped table: the cap is crossed at the second answer
    done = invoke("batch", "run", plan, "--out", "shipped", "--max-cost-usd", "0.5")
    assert done.exit_code == 0, done.stderr
    cell = read_results(str(tmp_path / "shipped" / "results.jsonl"))[("spend", "oharness", 1)]
    assert cell.close_reason == "budget" and "spent $0.6300 over 2 model responses (prices taken 2025-" in cell.budget
    # with --prices every cell prices its traffic from the user's table: crossed at the first
    done = invoke("batch", "run", plan, "--out", "priced", "--max-cost-usd", "0.5", "--prices", "prices.toml")
    assert done.exit_code == 0, done.stderr
    cell = read_results(str(tmp_path / "priced" / "results.jsonl"))[("spend", "oharness", 1)]
    assert cell.close_reason == "budget" and cell.cost_usd == 0.63
    assert "--max-cost-usd 0.5 reached: spent $0.6300 over 1 model response (prices taken 2031-01-01)" in cell.budget
    # a price file that does not load: the sentence `batch check --prices` gives, and no DIR
    (tmp_path / "bad.toml").write_text('format = "metaharness.prices/1"\n')
    checked = invoke("batch", "check", plan, "--prices", "bad.toml")
    assert checked.exit_code == 1
    assert refusals(checked.stderr) == ["metaharness: task 'spend' on harness 'oharness': PricesInvalid: the price "
                                        "file bad.toml needs `taken`, the date its prices were taken"]
    refused = invoke("batch", "run", plan, "--out", "bad", "--prices", "bad.toml")
    assert refused.exit_code == 2 and refusals(refused.stderr) == refusals(checked.stderr)
    assert not (tmp_path / "bad").exists()


def test_a_workflow_cell_is_given_the_prices_and_its_ledger_keeps_them(tmp_path):
    (tmp_path / "prices.toml").write_text(PRICES)
    plan = write_plan(tmp_path / "plan.json", [_workflow_task(tmp_path, check={"command": "python3 test_calc.py"})],
                      [{"kind": "oharness"}])
    job = CellJob(task=load_plan(plan).tasks[0], harness=load_plan(plan).harnesses[0], repeat=1,
                  out_dir=str(tmp_path / "cell"), scratch_root=str(tmp_path / "scratch"),
                  prices=str(tmp_path / "prices.toml"))
    argv = run_argv(job, str(tmp_path / "w"), os.devnull)
    assert argv[:2] == ["workflow", "run"] and argv[argv.index("--prices") + 1] == str(tmp_path / "prices.toml")
    out = tmp_path / "out"
    done = invoke("batch", "run", plan, "--out", str(out), "--prices", str(tmp_path / "prices.toml"))
    assert done.exit_code == 0, done.stderr
    cell = read_results(str(out / "results.jsonl"))[("bugfix", "oharness", 1)]
    assert cell.passed, cell
    ledger = [json.loads(line) for line in (out / "bugfix" / "oharness" / "1" / "workflow" / "workflow.jsonl").read_text().splitlines()]
    started = next(r for r in ledger if r["record"] == "workflow.started")
    assert started["run"]["prices"] == str(tmp_path / "prices.toml")  # a resume prices as the run did
