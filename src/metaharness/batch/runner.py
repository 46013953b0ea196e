"""Scheduling a batch: the pool, the budget, retries, resume, interruption.

What belongs here: `run_batch(plan, out, …)`, the async generator both the CLI and
embedders use. It owns the rules over cells; how one cell runs is `cell.run_cell`,
and where it runs is a backend (`LocalBackend` here, `RayBackend` in ray_backend.py):
an object with `async execute(job) -> CellResult` and `close()` (and, to keep a batch budget live,
`async spend()` and `halt(out_dir, reason)`).

Rules kept:
* nothing runs and nothing is written to DIR until every cell would start: the plan's caps are
  priceable and every task × harness passes its start checks (`admit`, the checks of `batch check`);
* at most `jobs` cells run at once; cells start in plan order (task, harness, repeat);
* the budget is over the whole batch, the cells kept from an earlier run included:
  once `max_runs` cells have run or the cells' cost reaches `max_cost_usd`, no
  further cell starts; running cells finish; each cell never started is recorded
  `skipped: budget`;
* spend is kept live inside each cell: a cell's run gets `--max-cost-usd` of its
  plan's own cap (`max_cost_usd` of its harness or the defaults), or of what is left
  of the batch's `max_cost_usd` when it starts, whichever is less; a batch with a cap
  whose cells' traffic metaharness cannot price is refused before any cell runs;
* and across cells, on either backend: what a running cell has spent so far counts as spent
  (`results.LiveSpend` over its stream as it grows: read in DIR by the local backend, on its
  worker by the Ray one, which reports it to the driver), and once the batch's cap is reached the
  running cells are halted (each a result, its `budget` saying why) — the batch ends above its
  cap by at most the requests in flight then (on Ray, also what one report interval adds);
* a cell whose attempt failed for an infrastructure reason is run again, up to
  `retries` more times; a failed check is never retried;
* a result line is written the moment its cell ends; a resume on the same DIR keeps
  each cell whose last line says it ran and whose stream is complete, and runs the rest;
* cancelling the generator's consumer (Ctrl-C) halts the running cells (each
  stream still closes) and records them `interrupted`, so a resume runs them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import os
import shutil
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable, Protocol

import msgspec

from metaharness.protocol.refusals import RefusalName, Sentence
from metaharness.protocol.spec import RunSpec
from metaharness.protocol.stream import check_stream
from metaharness.run.spec import cost_unseen

from .cell import CellJob, Halt, live_events, run_cell
from .plan import Cell, Plan, PlanError, cells, plan_fingerprint
from .results import LIVE_POLL_S, CellResult, LiveSpend, ResultsFile, cell_dir, read_results, spend_so_far

BACKENDS = ("local", "ray")
PLAN_COPY = "plan.json"
RESULTS = "results.jsonl"


class Backend(Protocol):
    """Where cells run. One that keeps a batch budget live also has `async spend()` (what each
    running cell whose job says `live_spend` has spent so far, by its out_dir) and `halt(out_dir,
    reason)` (stop a running cell, its result saying `reason`)."""
    slots: int
    where: str | None  # which cluster the cells run on, said once when the batch starts (None: here)

    async def execute(self, job: CellJob) -> CellResult: ...

    def close(self) -> None: ...


class LocalBackend:
    """Cells as subprocesses of this process, `jobs` at a time. Their streams grow in DIR as they
    run (`spend()` reads them) and `halt(out_dir, reason)` stops a running one."""

    def __init__(self, jobs: int) -> None:
        self.slots = jobs
        self.where = None
        self._halts: dict[str, Halt] = {}
        self._readers: dict[str, tuple[LiveSpend, str]] = {}  # a live_spend job's stream, read as it grows

    async def execute(self, job: CellJob) -> CellResult:
        halt = self._halts[job.out_dir] = Halt()
        if job.live_spend:
            self._readers[job.out_dir] = (LiveSpend(_price_table(job.prices)), live_events(job.out_dir, job.task))
        try:
            return await run_cell(job, halt)
        finally:
            self._halts.pop(job.out_dir, None)
            self._readers.pop(job.out_dir, None)

    async def spend(self) -> dict[str, float]:
        for reader, path in self._readers.values():
            with contextlib.suppress(OSError):  # not written yet
                reader.read(path)
        return {out_dir: reader.spent for out_dir, (reader, _path) in self._readers.items()}

    def halt(self, out_dir: str, reason: str) -> None:
        if (halt := self._halts.get(out_dir)) is not None:
            halt.stop(reason)

    def close(self) -> None:
        pass


@dataclass
class Progress:
    """What a live display shows; `run_batch` updates it and calls `on_change`."""
    total: int
    kept: int = 0
    done: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    running: set[str] = field(default_factory=set)
    cost_usd: float = 0.0
    last: CellResult | None = None


@dataclass
class BatchOptions:
    jobs: int | None = None
    backend: str = "local"
    ray_address: str | None = None
    max_runs: int | None = None
    max_cost_usd: float | None = None
    cell_timeout_s: float | None = None
    retries: int | None = None
    keep_workspaces: bool = False
    atif: bool = False
    otel: str | None = None  # each cell's run's --otel; with it (or the OTEL_* variables) a batch span over the cells
    prices: str | None = None  # a metaharness.prices/1 file laid over the shipped table, in every cell
    on_change: Callable[[Progress], None] | None = None


def make_backend(options: BatchOptions, plan: Plan) -> Backend:
    jobs = options.jobs or os.cpu_count() or 1
    if options.backend == "local":
        return LocalBackend(jobs)
    if options.backend == "ray":
        from .ray_backend import RayBackend

        return RayBackend(plan, address=options.ray_address, jobs=options.jobs,
                          files=[options.prices] if options.prices else [])
    raise PlanError(f"unknown backend {options.backend!r} (known: {', '.join(BACKENDS)})")


def _prepare_out(plan: Plan, out: str) -> None:
    os.makedirs(out, exist_ok=True)
    fingerprint = plan_fingerprint(plan)
    copy = os.path.join(out, PLAN_COPY)
    if os.path.exists(copy):
        with open(copy, "rb") as handle:
            if handle.read() != fingerprint:
                raise PlanError(f"{out} holds the results of a different plan; give a new --out directory "
                                "(or the plan that made it, to resume)")
    else:
        with open(copy, "wb") as handle:
            handle.write(fingerprint)


def kept_results(plan: Plan, out: str) -> dict[tuple[str, str, int], CellResult]:
    """The cells a resume keeps: their last line says they ran, and their stream is complete."""
    wanted = {cell.key for cell in cells(plan)}
    kept = {}
    for key, result in read_results(os.path.join(out, RESULTS)).items():
        if key not in wanted or result.status != "ran":
            continue
        try:
            with open(os.path.join(cell_dir(out, key), "events.jsonl"), "rb") as handle:
                if check_stream(handle.read()).status != "complete":
                    continue
        except FileNotFoundError:
            continue
        kept[key] = result
    return kept


def _price_table(path: str | None):
    from metaharness.loopback.pricing import load_prices

    return load_prices(path)  # a file that does not load was refused at admit (PricesInvalid)


def cell_cap(cell: Cell, batch_cap: float | None, spent: float) -> float | None:
    """The `--max-cost-usd` a cell's run is given: its own cap, or what is left of the batch's."""
    left = None if batch_cap is None else max(batch_cap - spent, 1e-9)
    caps = [c for c in (cell.harness.max_cost_usd, left) if c is not None]
    return min(caps) if caps else None


def check_costs_seen(plan: Plan, batch_cap: float | None) -> None:
    """Refuse (PlanError, `CostNotSeen`) a capped cell whose model traffic metaharness cannot price."""
    for cell in cells(plan):
        cap = cell.harness.max_cost_usd if batch_cap is None else batch_cap
        if cap is None or cell.repeat != 1:
            continue
        harness = cell.harness
        spec = RunSpec(kind=harness.kind, script=cell.task.script, credentials=harness.credentials or "none",
                       model_endpoint=harness.model_endpoint, max_cost_usd=cap)
        if (sentence := cost_unseen(spec)) is not None:
            raise PlanError(f"{RefusalName.CostNotSeen}: task {cell.task.id!r} on harness {harness.name!r}: {sentence}")


class _Traced:
    """The batch's spans when live export is on (`--otel`, the OTEL_* variables): a `batch {id}`
    span, a `cell {task} {harness} #{repeat}` span per attempt under it, and each cell's run span
    under its cell's (the cell's run gets the cell span's TRACEPARENT in its environment). Off: nothing."""

    def __init__(self, plan: Plan, out: str, otel: str | None) -> None:
        from metaharness.export.otlp import live_target, otel_installed

        url, _named = live_target(otel)
        self.parent = None
        if url is not None and otel_installed():
            from metaharness.export.otel import ParentSpan

            self.parent = ParentSpan(url, f"batch {os.path.basename(out)}", {
                "metaharness.batch.out": out, "metaharness.batch.plan": hashlib.sha256(plan_fingerprint(plan)).hexdigest(),
                "metaharness.batch.cells": len(cells(plan))}, what="the batch")

    def cell(self, cell: Cell, attempt: int) -> object:
        if self.parent is None:
            return None
        return self.parent.child(f"cell {cell.task.id} {cell.harness.name} #{cell.repeat}", {
            "metaharness.cell.task": cell.task.id, "metaharness.cell.harness": cell.harness.name,
            "gen_ai.agent.name": cell.harness.kind, "metaharness.cell.repeat": cell.repeat,
            "metaharness.cell.attempt": attempt})

    def carrier(self, span: object) -> dict[str, str]:
        if self.parent is None:
            return {}
        from metaharness.export.otel import carrier_of

        return carrier_of(span)

    def cell_ended(self, span: object, result: CellResult | None, error: str | None = None) -> None:
        if self.parent is None:
            return
        attrs = {} if result is None else {
            "metaharness.cell.status": result.status, "metaharness.cell.passed": result.passed,
            "metaharness.cell.infra": result.infra, "metaharness.total_cost_usd": result.cost_usd}
        failed = error or (result.infra if result is not None and result.infra else None)
        self.parent.end(span, attrs, failed)

    def finish(self, progress: Progress) -> None:
        if self.parent is None:
            return
        import sys

        self.parent.finish({"metaharness.batch.done": progress.done, "metaharness.batch.passed": progress.passed,
                            "metaharness.batch.failed": progress.failed, "metaharness.batch.skipped": progress.skipped},
                           lambda text: print(text, file=sys.stderr, flush=True))
def admit(plan: Plan, options: BatchOptions, out: str | None = None) -> None:
    """Every refusal a batch meets before any cell runs, raised as a PlanError before DIR is
    touched: a capped cell whose traffic cannot be priced (`CostNotSeen`), then every cell's
    start checks, as `batch check` makes them (`preflight.PreflightRefused`, each cell by name).
    With `out`, a DIR being resumed: only the cells it does not keep are checked."""
    from .preflight import refuse_unstartable

    check_costs_seen(plan, options.max_cost_usd)
    todo = None
    if out is not None and os.path.isdir(out):
        kept = kept_results(plan, os.path.abspath(out))
        todo = {(cell.task.id, cell.harness.name) for cell in cells(plan) if cell.key not in kept}
    refuse_unstartable(plan, prices=options.prices, only=todo)


async def run_batch(plan: Plan, out: str, options: BatchOptions | None = None, *,
                    backend: Backend | None = None, admitted: bool = False,
                    **kwargs) -> AsyncIterator[CellResult]:
    """Run every cell of `plan` into DIR `out`, yielding each cell's result as it ends.

    Keyword arguments are `BatchOptions` fields (`jobs=2, max_runs=10, …`). Before anything is
    written, `admit(plan, options)` refuses a batch a cell of which would be refused at start
    (`admitted=True`: the caller already called it, before it made its backend). Cells kept from
    an earlier run of the same DIR are not yielded again. The backend (given, or made from the
    options) is closed when the generator ends."""
    options = options or BatchOptions(**kwargs)
    out = os.path.abspath(out)
    if options.otel:
        from metaharness.export.otlp import otel_installed

        if not otel_installed():
            raise PlanError(f"{RefusalName.OtelUnavailable}: {Sentence.OTEL_MISSING}")
    if options.prices is not None:  # every cell runs in a workspace of its own
        options = dataclasses.replace(options, prices=os.path.abspath(options.prices))
    if not admitted:
        admit(plan, options, out)
    _prepare_out(plan, out)
    retries = options.retries if options.retries is not None else plan.defaults.retries
    kept = kept_results(plan, out)
    todo = [cell for cell in cells(plan) if cell.key not in kept]
    progress = Progress(total=len(cells(plan)), kept=len(kept),
                        cost_usd=sum(r.cost_usd or 0.0 for r in kept.values()))
    runs_started = len(kept)
    backend = backend or make_backend(options, plan)
    results = ResultsFile(os.path.join(out, RESULTS))
    scratch_root = os.path.join(out, ".scratch")
    finished: asyncio.Queue[CellResult] = asyncio.Queue()
    running: dict[asyncio.Task, Cell] = {}
    traced = _Traced(plan, out, options.otel)
    # A batch budget is kept live where the backend reports the running cells' spend as it grows
    # and can halt a running cell (both do): their spend so far counts as spent.
    watch = options.max_cost_usd is not None and all(callable(getattr(backend, name, None)) for name in ("spend", "halt"))
    prices = _price_table(options.prices) if watch else None
    live: dict[tuple[str, str, int], float] = {}  # what each running cell has spent so far

    def spent() -> float:
        return progress.cost_usd + sum(live.values())

    async def observe() -> None:
        far = await backend.spend()  # type: ignore[attr-defined]
        for task, cell in running.items():
            if not task.done() and cell_dir(out, cell.key) in far:
                live[cell.key] = far[cell_dir(out, cell.key)]
        cap = options.max_cost_usd
        if cap is not None and spent() >= cap:
            reason = (f"the batch's --max-cost-usd {cap:g} was spent (${spent():.4f} over its cells, as their "
                      "streams report it), so the batch halted this cell and starts no other")
            for task, cell in running.items():
                if not task.done():
                    backend.halt(cell_dir(out, cell.key), reason)  # type: ignore[attr-defined]

    def notify() -> None:
        if options.on_change is not None:
            options.on_change(progress)

    def budget_reached() -> bool:
        if options.max_runs is not None and runs_started >= options.max_runs:
            return True
        return options.max_cost_usd is not None and spent() >= options.max_cost_usd

    def record(result: CellResult) -> CellResult:
        results.append(result)
        progress.last = result
        if result.status == "ran":
            progress.done += 1
            progress.cost_usd += result.cost_usd or 0.0
            if result.passed:
                progress.passed += 1
            else:
                progress.failed += 1
        elif result.status == "skipped":
            progress.skipped += 1
        return result

    async def attempt_cell(cell: Cell) -> CellResult:
        retried: list[str] = []
        attempt = 1
        while True:
            live.pop(cell.key, None)  # an attempt's stream is its own
            span = traced.cell(cell, attempt)
            job = CellJob(task=cell.task, harness=cell.harness, repeat=cell.repeat,
                          out_dir=cell_dir(out, cell.key), scratch_root=scratch_root,
                          timeout_s=cell.task.timeout_s or options.cell_timeout_s or plan.defaults.timeout_s,
                          keep_workspace=options.keep_workspaces, attempt=attempt, atif=options.atif,
                          prices=options.prices,
                          max_cost_usd=cell_cap(cell, options.max_cost_usd, spent()), live_spend=watch,
                          otel=options.otel, trace=traced.carrier(span))
            try:
                result = await backend.execute(job)
            except BaseException as exc:
                traced.cell_ended(span, None, type(exc).__name__)
                raise
            traced.cell_ended(span, result)
            if result.infra is None or attempt > retries:
                return msgspec.structs.replace(result, retried_for=retried + result.retried_for)
            retried.append(result.infra)
            attempt += 1

    async def one(cell: Cell) -> None:
        progress.running.add(cell.label)
        notify()
        try:
            result = await attempt_cell(cell)
        finally:
            progress.running.discard(cell.label)
            live.pop(cell.key, None)  # its result's cost counts from here
        if watch and result.cost_usd is None and result.status == "ran":
            # a run halted before it said what it spent: its usage events, priced as while it ran
            with contextlib.suppress(OSError), open(os.path.join(cell_dir(out, cell.key), "events.jsonl"), "rb") as handle:
                result = msgspec.structs.replace(result, cost_usd=round(spend_so_far(handle.read(), prices), 6) or None)
        finished.put_nowait(record(result))

    pending = list(todo)
    try:
        while pending or running:
            while pending and len(running) < backend.slots and not budget_reached():
                cell = pending.pop(0)
                runs_started += 1
                running[asyncio.create_task(one(cell))] = cell
            if budget_reached() and pending and not running:
                for cell in pending:
                    yield record(CellResult(task=cell.task.id, harness=cell.harness.name, kind=cell.harness.kind,
                                            repeat=cell.repeat, status="skipped", skipped="budget"))
                pending = []
                notify()
            if not running:
                break
            done, _ = await asyncio.wait(list(running), return_when=asyncio.FIRST_COMPLETED,
                                         timeout=LIVE_POLL_S if watch else None)
            if watch:
                await observe()
            for task in done:
                running.pop(task, None)
            while not finished.empty():
                yield finished.get_nowait()
            notify()
            for task in done:
                task.result()  # a failure of the machinery itself is not swallowed
        while not finished.empty():
            yield finished.get_nowait()
    finally:
        for task in running:
            task.cancel()
        for task, cell in list(running.items()):
            try:
                await task
            except asyncio.CancelledError:
                record(CellResult(task=cell.task.id, harness=cell.harness.name, kind=cell.harness.kind,
                                  repeat=cell.repeat, status="interrupted"))
            except Exception:
                pass
        results.close()
        backend.close()
        shutil.rmtree(scratch_root, ignore_errors=True)
        traced.finish(progress)
        notify()
