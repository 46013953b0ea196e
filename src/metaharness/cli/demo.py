"""`metaharness demo` — the README's main job: a two-step workflow on oharness, offline.

The bundled workflow file runs through the workflow host, shown live (the same
renderer as `metaharness view`); the run directory holds the ledger, the event stream
(`metaharness check` complete) and each step's sealed frame. `--json` prints the raw
stream on stdout instead.
"""

from __future__ import annotations

import asyncio
import os
import sys

import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the raw event stream instead of the live view.")
@click.option("--workspace", type=click.Path(file_okay=False), help="Where to run (default: a new scratch directory).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="A new directory for the ledger, the stream and the frames (default: beside the workspace).")
def demo(as_json: bool, workspace: str | None, out_dir: str | None) -> None:
    """Run the bundled two-step workflow on oharness with the scripted model."""
    from metaharness.demo import prepare, run_demo
    from metaharness.workflow import WorkflowRefused

    workspace, out_dir = prepare(os.path.abspath(workspace) if workspace else None,
                                 os.path.abspath(out_dir) if out_dir else None)
    try:
        if as_json:
            def on_line(line: bytes) -> None:
                sys.stdout.buffer.write(line)
                sys.stdout.buffer.flush()

            result = asyncio.run(run_demo(workspace, out_dir, on_line))
            sys.exit(result.exit_code)
        from rich.console import Console

        from metaharness.view.terminal import EventRenderer
        from metaharness.workflow.ledger import read
        from metaharness.workflow.show import ledger_table

        console = Console()
        renderer = EventRenderer(console)
        console.rule("[bold]metaharness demo[/] — a two-step workflow on oharness (scripted model, offline)")
        result = asyncio.run(run_demo(workspace, out_dir, renderer.feed))
    except WorkflowRefused as exc:
        click.echo(f"metaharness: {exc.name}: {exc.sentence}", err=True)
        sys.exit(2)
    renderer.summary()
    console.print(ledger_table(read(out_dir)))
    console.print(f"\nworkspace: {workspace}")
    summary = os.path.join(workspace, "summary.md")
    if os.path.exists(summary):
        console.print(f"summary.md (written in step 2):\n[dim]{open(summary, encoding='utf-8').read().rstrip()}[/]")
    events = os.path.join(out_dir, "events.jsonl")
    console.print(f"run directory: {out_dir} (workflow.jsonl, events.jsonl, frames/)")
    # Name the command as this shell can run it (after `make demo` it lives in .venv/bin).
    import shutil

    exe = "metaharness" if shutil.which("metaharness") else os.path.relpath(sys.argv[0])
    console.print(f"next: [bold]{exe} workflow show {out_dir}[/]   [bold]{exe} check {events}[/]   "
                  f"[bold]{exe} project --html demo.html {events}[/]")
    sys.exit(result.exit_code)
