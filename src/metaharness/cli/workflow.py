"""`metaharness workflow check|run|resume|show` — a thin shell over `metaharness.workflow`.

Exit codes of `run` and `resume` (stable: batch runners depend on them):
0 the workflow completed; 1 it failed (a node used up its attempts) or a budget
stopped it; 2 nothing ran: a usage error, an invalid workflow file or a start
refusal; 3 the run stopped unfinished (the harness session ended early, or the host
was interrupted) — `workflow resume DIR` continues it.
`check` exits 0 when the file is valid and 1 when it has problems (2 if unreadable).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import click

from metaharness.cli.run import check_policy_flags, with_options
from metaharness.protocol.refusals import RefusalName
from metaharness.protocol.spec import KINDS

# The run options a workflow passes to its harness session, spelled and explained where `run` defines
# them; --cwd, --decisions and the budgets mean something of their own here.
_SHARED = ("script", "model", "vendor_dir", "credentials", "model_endpoint", "hermetic", "strict_version",
           "posture", "deny_only", "decision_timeout_ms", "codex_replace_relay", "retain_dir", "fail_on_error", "otel", "prices")
_POLICY = ("policy_files", "policy_scopes", "policy_mode", "policy_workspace_mode", "no_decision_trail")
_OWN = [
    click.option("--cwd", "workspace", type=click.Path(file_okay=False),
                 help="The workspace: the harness's working directory, where artifacts and checks live."),
    click.option("--decisions", type=click.Choice(["frame", "policy"]), default="frame", show_default=True,
                 help="frame: each step's frame decides every call; policy: OHarness permission rules decide "
                      "within what the frame admits."),
    click.option("--max-steps", type=click.IntRange(1), help="Stop the workflow before step N+1 (counts every step)."),
    click.option("--max-turns", type=click.IntRange(1),
                 help="Turns one step may take: a failing step is told why and gets another turn, up to N "
                      "(default 1), before its attempt fails."),
    click.option("--max-cost-usd", type=click.FloatRange(0, min_open=True),
                 help="Stop once the model traffic metaharness prices reaches this, over every step (refused "
                      "where metaharness does not see the traffic)."),
]


def _run_options(func):
    for option in reversed(_OWN):
        func = option(func)
    return with_options(*_SHARED, *_POLICY)(func)


def _spec(kind: str, options: dict):
    from metaharness.protocol.spec import RunSpec

    check_policy_flags(click.get_current_context(), options["decisions"])
    options["policy_files"] = list(options["policy_files"])
    workspace = options.pop("workspace")
    return RunSpec(kind=kind, cwd=os.path.abspath(workspace) if workspace else None, **options)


def _budgets(options: dict) -> dict:
    return {name: options.pop(name) for name in ("max_steps", "max_turns", "max_cost_usd")}


def _fail(message: str, code: int = 2) -> None:
    click.echo(f"metaharness: {message}", err=True)
    sys.exit(code)


def _print_step(step) -> None:
    where = f"step {step.index} {step.node} attempt {step.attempt}"
    tail = f": {step.reason.splitlines()[0]}" if step.reason else ""
    click.echo(f"{where}: {step.outcome} ({step.duration_ms / 1000:.1f}s){tail}")


def _drive(coro_factory) -> None:
    """Run the host with SIGINT/SIGTERM turned into a clean, resumable stop."""
    from metaharness.workflow import WorkflowError, WorkflowRefused

    async def main():
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await coro_factory(stop)

    try:
        result = asyncio.run(main())
    except WorkflowRefused as exc:
        _fail(f"{exc.name}: {exc.sentence}")
    except WorkflowError as exc:
        _fail(f"{RefusalName.WorkflowInvalid}: {exc}")
    outcome = result.outcome if result.reason_name is None else f"{result.outcome} ({result.reason_name}: {result.reason})"
    click.echo(f"workflow {outcome}; ledger {os.path.join(result.out_dir, 'workflow.jsonl')}")
    # --fail-on-error: the harness session's own exit 1 (its terminal record said it failed) fails
    # a workflow that would otherwise exit 0.
    sys.exit(1 if result.exit_code == 0 and result.run_exit_code == 1 else result.exit_code)


@click.group()
def workflow() -> None:
    """Run a multi-step workflow file: a sealed frame per step, each step's handoff checked."""


@workflow.command()
@click.argument("file", type=click.Path(dir_okay=False))
def check(file: str) -> None:
    """Validate a workflow file (TOML or JSON); every problem names its node and field."""
    from metaharness.workflow import WorkflowError, load, problems

    try:
        loaded = load(file)
    except WorkflowError as exc:
        _fail(str(exc), 1 if os.path.exists(file) else 2)
    found = problems(loaded)
    for problem in found:
        click.echo(f"{file}: {problem}")
    if found:
        sys.exit(1)
    wf = loaded.workflow
    click.echo(f"{file}: valid — workflow {wf.id} ({wf.version}), {len(wf.nodes)} node(s), start {wf.start}")


EXIT_EPILOG = ("Exit codes: 0 the workflow completed; 1 it failed or a budget stopped it; 2 nothing ran "
               "(usage error, invalid workflow file, refusal at start); 3 stopped unfinished — "
               "`metaharness workflow resume DIR` continues it.")


@workflow.command(epilog=EXIT_EPILOG)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--harness", type=click.Choice(KINDS), required=True, help="The harness that runs every step.")
@click.option("-p", "--task", help="The task, carried to every step as an established line.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True,
              help="A new directory for the ledger, the event stream and every step's frame.")
@_run_options
def run(file: str, harness: str, task: str | None, out_dir: str, **options) -> None:
    """Run FILE on one harness session, step by step."""
    from metaharness.workflow import run_workflow

    budgets = _budgets(options)
    spec = _spec(harness, options)
    _drive(lambda stop: run_workflow(file, harness=harness, out=out_dir, task=task, spec=spec, on_step=_print_step,
                                     stop=stop, **budgets))


@workflow.command(epilog=EXIT_EPILOG)
@click.argument("out_dir", type=click.Path(file_okay=False))
@_run_options
def resume(out_dir: str, **options) -> None:
    """Continue the workflow run in OUT_DIR after its last completed step, in a new session.

    Every run option the run started with (harness options, script, model, decisions, budgets,
    workspace) is taken from its ledger; an option given here overrides it."""
    from metaharness.workflow import resume_workflow
    from metaharness.workflow.ledger import LedgerError, read

    try:
        read(os.path.abspath(out_dir))
    except LedgerError as exc:
        name, _, sentence = str(exc).partition(": ")
        _fail(f"{name}: {sentence}")
    ctx = click.get_current_context()
    given = {name for name in options
             if (source := ctx.get_parameter_source(name)) is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")}
    budgets = {name: value for name, value in _budgets(options).items() if name in given}
    if "decisions" in given:
        check_policy_flags(ctx, options["decisions"])
    overrides = {name: value for name, value in options.items() if name in given}
    if "workspace" in overrides:
        overrides["cwd"] = os.path.abspath(overrides.pop("workspace"))
    if "policy_files" in overrides:
        overrides["policy_files"] = [os.path.abspath(p) for p in overrides["policy_files"]]
    for path in ("script", "vendor_dir", "retain_dir", "prices"):
        if overrides.get(path) is not None:
            overrides[path] = os.path.abspath(overrides[path])
    _drive(lambda stop: resume_workflow(out_dir, options=overrides, on_step=_print_step, stop=stop, **budgets))


@workflow.command()
@click.argument("out_dir", type=click.Path(file_okay=False))
def show(out_dir: str) -> None:
    """Print a workflow run's ledger as a table: step, node, attempt, verdict, cost, duration."""
    from rich.console import Console

    from metaharness.workflow.ledger import LedgerError, read
    from metaharness.workflow.show import ledger_table

    try:
        records = read(os.path.abspath(out_dir))
    except LedgerError as exc:
        name, _, sentence = str(exc).partition(": ")
        _fail(f"{name}: {sentence}")
    Console().print(ledger_table(records))
