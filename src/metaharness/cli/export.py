"""`metaharness export`: a finished run in another tool's format.

`atif` writes Harbor's trajectory (ATIF); the mapping lives in `metaharness.export.atif`.
Bad input is one sentence on stderr and exit 2; nothing is written then.
"""

from __future__ import annotations

import os

import click

from metaharness.cli._out import fail, write_bytes


@click.group()
def export() -> None:
    """Write a finished run in another tool's format (Harbor's ATIF)."""


@export.command()
@click.argument("source", metavar="EVENTS_OR_RUN_DIR")
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False), default=None,
              help="Write the trajectory here instead of stdout.")
def atif(source: str, out: str | None) -> None:
    """One ATIF trajectory (ATIF-v1.8, as Harbor 0.25.0 validates it) of the run in SOURCE.

    SOURCE is an events file or a run directory (a workflow's or a batch cell's, holding
    events.jsonl and, after a resume, events-2.jsonl, …): its sessions make one trajectory,
    the workflow's steps marked with their frames' digests. Every call carries its decision
    in its `extra.metaharness`: decision, decided_by, reason, frame digest, seam, and `ran`.
    """
    from metaharness.export.atif import dumps, trajectory
    from metaharness.export.source import ExportError, read_streams

    try:
        text = dumps(trajectory(read_streams(source))).encode()
    except ExportError as exc:
        fail(str(exc))
    if out is None:
        write_bytes(text)
        return
    tmp = f"{out}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as handle:
            handle.write(text)
        os.replace(tmp, out)
    except OSError as exc:
        fail(f"{out}: {exc.strerror or exc}")
