"""What `metaharness batch check` asks of every cell before anything runs.

What belongs here: `preflight(plan)`, the run's own start checks (`metaharness.api.start_refusal`)
for every task × harness of a valid plan, with the run options its cells will run with — so the
vendor binary is resolved on the child PATH the cell will use (its `vendor_dir`, else the
default one), and its frame, scenario and policy files are loaded as the run loads them. Each
refusal comes back by name, as the run itself would refuse the cell.

Rules kept:
* the sentence is the run's own (`Name: why`), prefixed with the task and harness at fault;
  nothing here words a refusal of its own;
* nothing is written and no harness is started (a `--version` probe of a vendor binary is the
  most that runs); the working directory checked is the task's workspace template, or an empty
  directory removed afterwards (a cell runs in a fresh copy of the template, or an empty one);
* a cell that differs from another only by its repeat is checked once.
"""

from __future__ import annotations

import os
import tempfile

from .cell import cell_spec
from .plan import Plan


def preflight(plan: Plan) -> list[str]:
    """Every start refusal the plan's cells would meet, one sentence each (empty: they would all start)."""
    from metaharness.api import start_refusal

    refusals: list[str] = []
    with tempfile.TemporaryDirectory(prefix="metaharness-batch-check-") as empty:
        for task in plan.tasks:
            for harness in plan.harnesses:
                sentence = start_refusal(cell_spec(task, harness, task.workspace or empty))
                if sentence is not None:
                    refusals.append(f"task {task.id!r} on harness {harness.name!r}: {sentence}")
    return refusals
