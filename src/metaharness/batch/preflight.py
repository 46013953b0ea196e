"""What `metaharness batch check` asks of every cell before anything runs — and `batch run` too.

What belongs here: `preflight(plan, prices=…)`, the run's own start checks
(`metaharness.api.start_refusal`) for every task × harness of a valid plan, with the run options
its cells will run with — so the vendor binary is resolved on the child PATH the cell will use (its
`vendor_dir`, else the default one), its frame, scenario, policy and price files are loaded as the
run loads them. A workflow task's cell is checked as `metaharness workflow run` checks its start
(`metaharness.workflow.start_refusal`): the workflow file and every node's schema file loaded, the
workflow admitted on the harness, and its first step's session start checks. Each refusal comes
back by name, as the run itself would refuse the cell.

Rules kept:
* the sentence is the run's own (`Name: why`), prefixed with the task and harness at fault;
  nothing here words a refusal of its own;
* nothing is written and no harness is started (a `--version` probe of a vendor binary is the
  most that runs); the working directory checked is the task's workspace template, or an empty
  directory removed afterwards (a cell runs in a fresh copy of the template, or an empty one);
* a cell that differs from another only by its repeat is checked once; a resume checks only
  the task × harness pairs that still have a cell to run.
"""

from __future__ import annotations

import dataclasses
import tempfile

from .cell import cell_spec
from .plan import Plan, PlanError, Task


class PreflightRefused(PlanError):
    """`batch run` refused before any cell ran (and before DIR was touched): every cell's refusal."""

    def __init__(self, sentences: list[str]) -> None:
        super().__init__("\n".join(sentences))
        self.sentences = sentences


def _cell_refusal(task: Task, harness, cwd: str, prices: str | None) -> str | None:
    spec = cell_spec(task, harness, cwd, prices=prices)
    if task.workflow is None:
        from metaharness.api import start_refusal

        return start_refusal(spec)
    from metaharness.workflow import start_refusal as workflow_refusal

    # the budgets are the workflow's own options (`workflow run --max-turns/--max-cost-usd`)
    return workflow_refusal(task.workflow, harness=harness.kind, task=task.prompt,
                            spec=dataclasses.replace(spec, max_turns=None, max_cost_usd=None),
                            max_turns=spec.max_turns, max_cost_usd=spec.max_cost_usd)


def preflight(plan: Plan, *, prices: str | None = None,
              only: set[tuple[str, str]] | None = None) -> list[str]:
    """Every start refusal the plan's cells would meet, one sentence each (empty: they would all
    start); `only`: the (task id, harness name) pairs to check (a resume's cells still to run)."""
    refusals: list[str] = []
    with tempfile.TemporaryDirectory(prefix="metaharness-batch-check-") as empty:
        for task in plan.tasks:
            for harness in plan.harnesses:
                if only is not None and (task.id, harness.name) not in only:
                    continue
                sentence = _cell_refusal(task, harness, task.workspace or empty, prices)
                if sentence is not None:
                    refusals.append(f"task {task.id!r} on harness {harness.name!r}: {sentence}")
    return refusals


def refuse_unstartable(plan: Plan, *, prices: str | None = None,
                       only: set[tuple[str, str]] | None = None) -> None:
    """Raise `PreflightRefused` when any cell (of `only`, when given) would be refused at start."""
    refusals = preflight(plan, prices=prices, only=only)
    if refusals:
        raise PreflightRefused(refusals)
