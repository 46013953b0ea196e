"""A workflow task in a batch: its cells run `metaharness workflow run` on oharness."""

from __future__ import annotations

import asyncio
import shutil

from metaharness.batch import load_plan, run_batch
from metaharness.protocol.stream import check_stream

from .conftest import REPO, last_by_cell, write_plan

BUGFIX = REPO / "examples" / "bugfix"


def test_a_workflow_task_runs_its_workflow_in_each_cell(tmp_path):
    workspace = tmp_path / "workspace"
    shutil.copytree(BUGFIX / "workspace", workspace)
    tasks = [{"id": "bugfix", "prompt": "add(2, 3) should be 5", "workflow": str(BUGFIX / "bugfix.workflow.toml"),
              "script": str(BUGFIX / "bugfix.scenario.json"), "workspace": str(workspace),
              "check": {"command": "python3 test_calc.py"}}]
    plan = write_plan(tmp_path / "plan.json", tasks, [{"kind": "oharness"}], repeats=2)
    out = tmp_path / "out"

    async def go():
        return [r async for r in run_batch(load_plan(plan), str(out), jobs=2)]

    results = asyncio.run(go())
    assert len(results) == 2 and all(r.passed and r.check == "pass" and r.exit_code == 0 for r in results), results
    for repeat in (1, 2):
        cell = out / "bugfix" / "oharness" / str(repeat)
        assert check_stream((cell / "events.jsonl").read_bytes()).status == "complete"
        assert (cell / "workflow" / "workflow.jsonl").exists()  # the workflow's own ledger, beside the stream
    assert last_by_cell(out)[("bugfix", "oharness", 1)]["turns"] >= 3  # one turn per step at least
    assert (workspace / "calc.py").read_text() == (BUGFIX / "workspace" / "calc.py").read_text()  # template untouched
