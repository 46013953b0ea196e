"""`metaharness.batch` — many runs: tasks × harnesses × repeats, each in its own workspace.

The library face of `metaharness batch`. A plan (`metaharness.batch/1`, TOML or JSON)
names tasks and harnesses; every cell (task × harness × repeat) is one full
`metaharness run` subprocess in a fresh copy of the task's workspace and a scratch
home of its own. `run_batch` runs the cells on a local pool (or a Ray cluster) under
one budget and yields each cell's result as it ends:

    plan = load_plan("suite.toml")
    async for result in run_batch(plan, "out", jobs=4, max_cost_usd=5.0):
        print(result.task, result.harness, result.repeat, result.passed)

Layout: `plan` (the document and its checks), `preflight` (every cell's start checks,
for `batch check`), `cell` (one cell, the function every
backend runs), `results` (a cell's figures and results.jsonl), `runner` (the pool,
budget, retries, resume), `ray_backend` (the same cells as Ray tasks), `report` (the
matrix, as text and as a page), `progress` (the live display).
"""

from .plan import BATCH_FORMAT, Cell, Harness, Plan, PlanError, Task, cells, load_plan, parse_plan, plan_schema
from .results import CellResult, read_results
from .runner import BACKENDS, BatchOptions, Progress, run_batch

__all__ = [
    "BATCH_FORMAT", "BACKENDS", "BatchOptions", "Cell", "CellResult", "Harness", "Plan", "PlanError", "Progress",
    "Task", "cells", "load_plan", "parse_plan", "plan_schema", "read_results", "run_batch",
]
