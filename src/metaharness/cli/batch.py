"""`metaharness batch check|run|report`: many runs from one plan.

What belongs here: argument handling, the live display's wiring, exit codes, and
turning refusals into one sentence on stderr. Everything else is
`metaharness.batch`; this module is a thin shell over `run_batch`.

Exit codes: 0 done (every cell has a result, failures and budget skips included);
1 `batch check` found the plan invalid; 2 a usage error or a refusal (a bad plan,
a cell its start checks refuse — nothing is written to DIR then —, a DIR of another plan, a
backend that is not installed); 130 interrupted (DIR is
left resumable).
"""

from __future__ import annotations

import sys

import click

from metaharness.cli._out import fail, say, say_err
from metaharness.cli.run import OPTIONS as RUN_OPTIONS


OTEL = RUN_OPTIONS["otel"]  # each cell's run's --otel, spelled where `run` defines it; a batch span over the cells


def _load(path: str):
    from metaharness.batch.plan import PlanError, load_plan

    try:
        return load_plan(path)
    except PlanError as exc:
        fail(str(exc))


@click.group()
def batch() -> None:
    """Run tasks × harnesses × repeats, each in its own workspace, under one budget."""


def _refuse(exc, code: int) -> None:
    """A plan refused: every sentence on its own `metaharness: ` line (a preflight names each cell)."""
    sentences = getattr(exc, "sentences", None) or [str(exc)]
    for sentence in sentences[:-1]:
        say_err(sentence)
    fail(sentences[-1], code=code)


@batch.command("check")
@click.argument("plan", metavar="PLAN")
@RUN_OPTIONS["prices"]
def check(plan: str, prices: str | None) -> None:
    """Validate a metaharness.batch/1 plan (TOML or JSON), make every cell's start checks, and count its cells.

    Each task × harness is checked as its run will start: the vendor binary on the child PATH it
    will use, its frame, scenario, policy and price files loaded; a workflow task's workflow file,
    its nodes' schema files and its first step's start; every refusal is named. `batch run` makes
    the same checks before any cell runs."""
    from metaharness.batch.plan import PlanError, cells, load_plan
    from metaharness.batch.runner import BatchOptions, admit

    try:
        loaded = load_plan(plan)
        admit(loaded, BatchOptions(prices=prices))  # a plan's own per-cell caps, then every cell's start
    except PlanError as exc:
        _refuse(exc, code=1)
    count = len(cells(loaded))
    say(f"ok: {len(loaded.tasks)} task(s) × {len(loaded.harnesses)} harness(es) × {loaded.repeats} "
        f"repeat(s) = {count} cell(s)")


@batch.command("run")
@click.argument("plan", metavar="PLAN")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), metavar="DIR",
              help="Where events, check output and results.jsonl go; the same DIR again resumes.")
@click.option("--jobs", type=click.IntRange(1), help="Cells at once (default: the core count, or the cluster's CPUs).")
@click.option("--backend", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where cells run: a local pool of subprocesses, or Ray tasks (the ray extra).")
@click.option("--ray-address", metavar="ADDR",
              help="An existing Ray cluster to join (default: start a Ray of its own; RAY_ADDRESS is not read).")
@click.option("--max-runs", type=click.IntRange(0), help="Start no more than this many cells over the batch.")
@click.option("--max-cost-usd", type=click.FloatRange(0), metavar="USD", help="A budget over the whole batch: each cell's run is capped live at what is left, no cell starts once "
                   "it is spent, and the running cells are then halted (on both backends).")
@click.option("--cell-timeout", "cell_timeout_s", type=click.FloatRange(0, min_open=True), metavar="SECONDS",
              help="Halt a cell's run after this many seconds (a task's own timeout_s wins).")
@click.option("--retries", type=click.IntRange(0), help="Rerun a cell this many times after an infrastructure failure.")
@click.option("--keep-workspaces", is_flag=True, help="Keep each cell's workspace beside its events.")
@click.option("--atif", is_flag=True, help="Also write each cell's run as an ATIF trajectory.json beside its events.")
@OTEL
@RUN_OPTIONS["prices"]
def run(plan: str, out: str, **options) -> None:
    """Run every cell of PLAN into DIR; results.jsonl grows as cells end."""
    import asyncio
    import contextlib

    from rich.console import Console

    from metaharness.batch.plan import PlanError
    from metaharness.batch.progress import Display
    from metaharness.batch.runner import BatchOptions, admit, make_backend, run_batch

    if options["ray_address"] and options["backend"] != "ray":
        raise click.UsageError("--ray-address needs --backend ray")
    loaded = _load(plan)
    batch_options = BatchOptions(**options)
    console = Console(stderr=True, highlight=False)
    try:
        admit(loaded, batch_options, out)  # before the backend (a Ray) is started or DIR is touched
        backend = make_backend(batch_options, loaded)
    except PlanError as exc:
        _refuse(exc, code=2)
    if getattr(backend, "where", None):  # which cluster the cells run on (a backend of an embedder may not say)
        console.print(backend.where, markup=False)
    display = Display(console, live=console.is_terminal, slots=backend.slots)
    batch_options.on_change = display.update

    async def go() -> None:
        async with contextlib.aclosing(run_batch(loaded, out, batch_options, backend=backend, admitted=True)) as results:
            async for result in results:
                display.result(result)

    try:
        asyncio.run(go())
    except PlanError as exc:  # refused before any cell ran (a DIR of another plan)
        display.close()
        backend.close()
        fail(str(exc))
    except KeyboardInterrupt:
        display.close()
        console.print(f"interrupted: running cells were halted; `metaharness batch run {plan} --out {out}` resumes")
        sys.exit(130)
    display.close()
    from metaharness.batch.report import build_matrix, load_dir, render_text

    render_text(build_matrix(*load_dir(out)), Console(highlight=False))
    console.print(f"done: results in {out}/results.jsonl; `metaharness batch report {out} --html PAGE` writes the page")


@batch.command("report")
@click.argument("out", metavar="DIR")
@click.option("--html", "html", type=click.Path(dir_okay=False), metavar="PAGE",
              help="Also write a self-contained page (run pages go in a folder beside it).")
@click.option("--pair", nargs=2, metavar="A B", help="The two harnesses shown side by side (default: the first two).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the matrix as one JSON document (metaharness.batch-report/1) instead of the table.")
def report(out: str, html: str | None, pair: tuple[str, str] | None, as_json: bool) -> None:
    """Print the tasks × harnesses matrix of a batch DIR, and why each cell that did not pass failed."""
    import json

    from rich.console import Console

    from metaharness.batch.report import ReportError, build_matrix, load_dir, render_text, report_json, write_html

    try:
        plan, results = load_dir(out)
        matrix = build_matrix(plan, results)
        if as_json:
            click.echo(json.dumps(report_json(matrix), ensure_ascii=False, indent=2))
        else:
            render_text(matrix, Console(highlight=False))
        if html is not None:
            written = write_html(out, html, tuple(pair) if pair else None)
            # with --json, stdout is the document alone
            click.echo(f"wrote {written[0]} and {len(written) - 1} run page(s) beside it", err=as_json)
    except ReportError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {html}: {exc.strerror or exc}")
