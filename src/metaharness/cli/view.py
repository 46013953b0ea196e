"""`metaharness view` and `metaharness project`: looking at a recorded or live stream.

What belongs here: argument handling, reading the stream (a file, or stdin for `-`),
following a file still being written, and exit codes. Rendering lives in
`metaharness.view`.

Exit codes (docs/reference/wire.md#exit-codes): `project` 0 the document written, 2 a usage error, a
file that cannot be read or written, or a line that is not a valid event line (stderr
names the line). `view` 0 every line shown, 1 some line was not a valid event line
(shown in place, by number), 2 a usage error or a file that cannot be read.
Errors are one sentence on stderr, never a traceback.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import BinaryIO

import click

_FOLLOW_POLL_S = 0.1


def _fail(message: str, code: int = 2) -> None:
    click.echo(f"metaharness: {message}", err=True)
    sys.exit(code)


def _read_all(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        _fail(f"cannot read {path}: {exc.strerror or exc}")
    raise AssertionError("unreachable")


# --- view ------------------------------------------------------------------------------


@click.command()
@click.argument("events", metavar="EVENTS.jsonl")
@click.option("--follow", "-f", is_flag=True, help="Keep reading a file that is still being written, until stream.closed.")
@click.option("--width", type=click.IntRange(40, 1000), default=None, help="Render at this width instead of the terminal's.")
def view(events: str, follow: bool, width: int | None) -> None:
    """Show an event stream as one readable line per event, with a closing summary.

    EVENTS.jsonl is a file of metaharness.event/1 lines, or - for stdin (so
    `metaharness run … | metaharness view -` shows a run live).
    """
    from rich.console import Console

    from metaharness.view.terminal import EventRenderer

    console = Console(width=width, highlight=False)
    renderer = EventRenderer(console)
    try:
        if events == "-":
            _feed_stream(renderer, sys.stdin.buffer, follow=False)
        else:
            try:
                handle = open(events, "rb")
            except OSError as exc:
                _fail(f"cannot read {events}: {exc.strerror or exc}")
            with handle:
                _feed_stream(renderer, handle, follow=follow)
    except KeyboardInterrupt:
        console.print("[dim]interrupted; the summary covers what was read[/]")
    renderer.summary()
    sys.exit(1 if renderer.bad_lines else 0)


def _feed_stream(renderer, handle: BinaryIO, *, follow: bool) -> None:
    """Feed each complete line as it arrives; with `follow`, wait for more until stream.closed."""
    pending = b""
    while True:
        chunk = handle.readline()
        if chunk:
            pending += chunk
            if not pending.endswith(b"\n"):
                continue  # a line still being written: wait for the rest of it
            renderer.feed(pending)
            pending = b""
            if follow and renderer.closed is not None:
                return
            continue
        if not follow:
            if pending:
                renderer.feed(pending)  # a final line without "\n" is still a line
            return
        time.sleep(_FOLLOW_POLL_S)


# --- project ---------------------------------------------------------------------------


@click.command()
@click.argument("events", nargs=-1, required=True, metavar="EVENTS [EVENTS]")
@click.option("--out", "-o", "out", type=click.Path(dir_okay=False), default=None, help="Write the trace-ir/1 document here instead of stdout.")
@click.option("--html", "html", type=click.Path(dir_okay=False), default=None, metavar="PAGE", help="Write a self-contained HTML page showing one run, or two side by side.")
def project(events: tuple[str, ...], out: str | None, html: str | None) -> None:
    """Project an event stream into a trace-ir/1 document, or (with --html) an HTML page.

    With --html PAGE, give one stream to see it, or two to compare them row by row.
    """
    from metaharness.view.stream import BadLine, decode_stream

    if html is not None and out is not None:
        _fail("--out writes the trace-ir/1 document and --html writes a page; give one of them")
    if html is None and len(events) != 1:
        _fail(f"project takes one EVENTS stream, and {len(events)} were given (two are accepted only with --html)")
    if html is not None and len(events) > 2:
        _fail(
            f"project --html compares at most two streams, and {len(events)} were given "
            f"({', '.join(events)}); a page shows one run or two side by side"
        )
    if events.count("-") > 1:
        _fail("stdin (-) can be read only once")

    decoded = []
    for path in events:
        data = _read_all(path)
        try:
            lines = decode_stream(data)
        except BadLine as bad:
            _fail(f"{path}: {bad}")
        decoded.append((path, data, lines))

    if html is not None:
        from metaharness.view.html import render_page

        page = render_page([(path, lines) for path, _, lines in decoded])
        _write(html, page)
        return

    from metaharness.view.project import dump_document, project_lines

    path, data, lines = decoded[0]
    document = dump_document(project_lines(lines, data, path))
    if out is None:
        sys.stdout.buffer.write(document)
        sys.stdout.buffer.flush()
    else:
        _write(out, document)


def _write(path: str, data: bytes) -> None:
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        _fail(f"cannot write {path}: {exc.strerror or exc}")
