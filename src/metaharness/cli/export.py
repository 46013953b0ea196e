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
    """Write a finished run in another tool's format (Harbor's ATIF, OpenTelemetry)."""


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


@export.command()
@click.argument("source", metavar="EVENTS_OR_RUN_DIR")
@click.option("--endpoint", metavar="URL",
              help="The OTLP/HTTP traces URL (default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else "
                   "OTEL_EXPORTER_OTLP_ENDPOINT plus /v1/traces, else http://localhost:4318/v1/traces).")
@click.option("--content", is_flag=True, help="Also send tool arguments and results as span attributes.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(0, min_open=True), default=10.0, show_default=True,
              metavar="SECONDS", help="How long the collector has to take the spans.")
def otel(source: str, endpoint: str | None, content: bool, timeout_s: float) -> None:
    """Send the finished run in SOURCE as OpenTelemetry spans (GenAI conventions) over OTLP/HTTP.

    One invoke_agent span per run, a span per workflow step and per turn, an execute_tool span
    per call with its decision as metaharness.* attributes and a guardrail event where it was
    denied. Needs the otel extra: pip install 'metaharness[otel]'. (`run`, `workflow run` and
    `batch run --otel` send the same spans live.)
    """
    from metaharness.export.source import ExportError, read_streams

    try:
        from metaharness.export import otel as spans
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("opentelemetry"):
            fail("export otel needs the otel extra, which is not installed: pip install 'metaharness[otel]'")
        raise
    url = spans.endpoint_of(endpoint)
    try:
        built = spans.build_spans(read_streams(source), content=content)
        spans.send(built, url, timeout_s=timeout_s)
    except ExportError as exc:
        fail(str(exc))
    click.echo(f"sent {len(built)} span(s) to {url}", err=True)
