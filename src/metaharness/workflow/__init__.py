"""Workflows: a multi-step workflow file driven step by step on one harness session.

Public API:

* `run_workflow(file, harness=…, out=DIR, task=…, spec=RunSpec(…), …)` — async;
  returns a `WorkflowResult`. Callbacks `on_step`, `on_event`, `decide`.
* `resume_workflow(DIR, …)` — continue a run after its last completed step.
* `start_refusal(file, harness=…, spec=…, …)` — the sentence `run_workflow` would be refused
  with at start, or None; nothing written, no harness started.
* `load(file)` → `LoadedWorkflow`; `problems(loaded)` → what `workflow check` reports.
* `WorkflowRefused` (a start refusal, by `.name`), `WorkflowError` (an unreadable or
  misshapen file).

The host sits above `metaharness.api` and uses it exactly as any embedder would.
"""

from __future__ import annotations

from .admit import WorkflowRefused
from .document import LoadedWorkflow, Problem, WorkflowError, load, problems
from .host import EXIT_CODES, StepResult, WorkflowResult, resume_workflow, run_workflow, start_refusal

__all__ = [
    "run_workflow", "resume_workflow", "start_refusal", "load", "problems", "LoadedWorkflow", "Problem",
    "WorkflowRefused", "WorkflowError", "WorkflowResult", "StepResult", "EXIT_CODES",
]
