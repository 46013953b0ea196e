"""`metaharness loopback serve` — run the local fake model server standalone (docs/concepts.md#loopback).

Prints the base URL as one line on stdout, then serves until SIGINT or SIGTERM and exits 0.
Bad input (an unreadable or invalid scenario, a port in use) is one sentence on stderr, exit 2.
"""

from __future__ import annotations

import asyncio
import signal
import sys

import click


@click.group()
def loopback() -> None:
    """A local fake model server (127.0.0.1 only) answering from a scenario."""


@loopback.command()
@click.option("--scenario", "scenario_path", required=True, type=click.Path(dir_okay=False),
              help="A metaharness.scenario/1 file.")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535), help="0 picks a free port.")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Directory relative scenario paths resolve against (default: the current directory).")
@click.option("--log", "log_path", type=click.Path(dir_okay=False), default=None,
              help="Append every request as one JSON line to this file.")
@click.option("--expect-key", default=None, help="Answer 401 to any request not carrying this key.")
@click.option("--minimal", is_flag=True, help="Responses API: emit only the minimal SSE sequence (conformance tests).")
def serve(scenario_path: str, port: int, workdir: str | None, log_path: str | None, expect_key: str | None,
          minimal: bool) -> None:
    """Serve the Anthropic Messages and OpenAI Responses APIs from SCENARIO; print the URL."""
    from metaharness.loopback import LoopbackServer
    from metaharness.protocol.scenario import ScenarioError, load_scenario

    try:
        scenario = load_scenario(scenario_path)
    except ScenarioError as exc:
        click.echo(f"metaharness loopback: {exc}", err=True)
        sys.exit(2)
    if log_path is not None:
        try:
            open(log_path, "ab").close()
        except OSError as exc:
            click.echo(f"metaharness loopback: the log {log_path} cannot be written: {exc.strerror or exc}", err=True)
            sys.exit(2)
    server = LoopbackServer(scenario, port=port, log_path=log_path, workdir=workdir, expect_key=expect_key,
                            minimal=minimal)
    try:
        asyncio.run(_serve_until_signalled(server))
    except OSError as exc:
        click.echo(f"metaharness loopback: cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}", err=True)
        sys.exit(2)


async def _serve_until_signalled(server: "LoopbackServer") -> None:  # noqa: F821 - imported lazily
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    url = await server.start()
    click.echo(url)
    sys.stdout.flush()
    try:
        await stop.wait()
    finally:
        await server.stop()
