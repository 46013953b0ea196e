"""`metaharness demo` — the README's main job: a two-step framed run, offline.

Shows the run live (the same renderer as `metaharness view`), writes the raw
stream to a file that `metaharness check` accepts, and prints where it is.
`--json` prints the raw stream on stdout instead.
"""

from __future__ import annotations

import asyncio
import os
import sys

import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the raw event stream instead of the live view.")
@click.option("--workspace", type=click.Path(file_okay=False), help="Where to run (default: a new scratch directory).")
@click.option("--events", "events_path", type=click.Path(dir_okay=False),
              help="Where to write the raw stream (default: <workspace>/demo.events.jsonl).")
def demo(as_json: bool, workspace: str | None, events_path: str | None) -> None:
    """Run the bundled two-step workflow on oharness with the scripted model."""
    from metaharness.demo import prepare_workspace, run_demo

    workspace = prepare_workspace(os.path.abspath(workspace) if workspace else None)
    events_path = os.path.abspath(events_path or os.path.join(workspace, "demo.events.jsonl"))
    if as_json:
        def on_line(line: bytes) -> None:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()

        code = asyncio.run(run_demo(workspace, events_path, on_line))
        sys.exit(code)

    from rich.console import Console

    from metaharness.view.terminal import EventRenderer

    console = Console()
    renderer = EventRenderer(console)
    console.rule("[bold]metaharness demo[/] — a two-step workflow on oharness (scripted model, offline)")
    code = asyncio.run(run_demo(workspace, events_path, renderer.feed))
    renderer.summary()
    console.print(f"\nworkspace: {workspace}")
    summary = os.path.join(workspace, "summary.md")
    if os.path.exists(summary):
        console.print(f"summary.md (written in step 2):\n[dim]{open(summary, encoding='utf-8').read().rstrip()}[/]")
    console.print(f"raw stream: {events_path}")
    # Name the command as this shell can run it (after `make demo` it lives in .venv/bin).
    import shutil

    exe = "metaharness" if shutil.which("metaharness") else os.path.relpath(sys.argv[0])
    console.print(f"next: [bold]{exe} check {events_path}[/]   "
                  f"[bold]{exe} project --html demo.html {events_path}[/]")
    sys.exit(code)
