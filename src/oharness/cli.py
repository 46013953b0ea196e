"""The `oharness` command.

`oharness -p "…"` runs one prompt and prints the conversation with rich (text, tool
calls, results); `oharness --stdio …` is the child of metaharness (oharness.stdio);
`oharness permissions …` is the permission engine's group, imported only when invoked
(and refused by name when that module is absent).

Rules it keeps: bad input is one sentence on stderr and exit 2, never a traceback;
rich loads only when something is printed.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import click

from metaharness.permissions import MODES



class _Group(click.Group):
    """A group that is also a command: with no subcommand it runs a prompt."""

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name != "permissions":
            return None
        try:
            from oharness.cli_permissions import permissions
        except ImportError as exc:
            raise click.UsageError(f"`oharness permissions` is not available in this build ({exc})") from None
        return permissions

    def list_commands(self, ctx: click.Context) -> list[str]:
        from importlib.util import find_spec

        return ["permissions"] if find_spec("oharness.cli_permissions") is not None else []


@click.group(cls=_Group, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-p", "--prompt", help="Run this prompt once and print the conversation.")
@click.option("--model", help="PROVIDER:MODEL: anthropic:…, openai:…, or scripted:default (with --script).")
@click.option("--script", type=click.Path(dir_okay=False), help="A metaharness.scenario/1 file for the scripted model.")
@click.option("--cwd", type=click.Path(file_okay=False), help="Working directory of the session.")
@click.option("--mode", type=click.Choice(MODES), help="Permission mode.")
@click.option("--stdio", is_flag=True, help="Run as metaharness's child: one JSON record per line on stdin and stdout.")
@click.option("--no-decision-trail", is_flag=True, help="Do not write decisions.jsonl.")
@click.option("--session-dir", type=click.Path(file_okay=False), help="Where the session's transcript goes.")
@click.version_option(package_name="metaharness", prog_name="oharness")
@click.pass_context
def main(ctx: click.Context, prompt: str | None, model: str, script: str | None, cwd: str | None, mode: str | None,
         stdio: bool, no_decision_trail: bool, session_dir: str | None) -> None:
    """oharness — the project's own agent harness."""
    if ctx.invoked_subcommand is not None:
        return
    if stdio:
        from .stdio import keep_to_myself, parse_args, serve

        keep_to_myself()
        argv = ["--stdio", "--model", model or "scripted:default"]
        for flag, value in (("--script", script), ("--cwd", cwd), ("--mode", mode), ("--session-dir", session_dir)):
            if value is not None:
                argv += [flag, value]
        if no_decision_trail:
            argv.append("--no-decision-trail")
        sys.exit(asyncio.run(serve(parse_args(argv))))
    if prompt is None:
        raise click.UsageError("give a prompt with -p/--prompt (or --stdio to run under metaharness)")
    if model is None and script is None:
        from .providers import NO_MODEL

        click.echo(f"oharness: {NO_MODEL}", err=True)
        sys.exit(2)
    sys.exit(asyncio.run(_run_prompt(prompt, model or "scripted:default", script, cwd, mode, session_dir=session_dir,
                                     decision_trail=not no_decision_trail)))


def can_ask_here() -> bool:
    """Whether a person can answer a permission question: a terminal on stdin and not CI."""
    import os

    try:
        interactive = sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):
        interactive = False
    return interactive and not os.environ.get("CI")


async def _run_prompt(prompt: str, model: str, script: str | None, cwd: str | None, mode: str | None, *,
                      session_dir: str | None = None, decision_trail: bool = True, ask: Any = "auto",
                      console: Any = None) -> int:
    """One standalone session. `ask`: "auto" (a terminal question when a person can answer),
    None (headless: asks are unavailable → refused), or a prompt function for `TerminalAsker`."""
    from rich.console import Console

    from .permission_gate import engine_gate_factory, standalone_session_dir
    from .session import StartError, open_session
    from .terminal import TerminalAsker, TerminalSink

    console = console or Console(highlight=False, soft_wrap=False)
    sink = TerminalSink(console)
    if ask == "auto":
        asker = TerminalAsker(console) if can_ask_here() else None
    else:
        asker = TerminalAsker(console, ask) if ask is not None else None
    notices = Console(stderr=True, highlight=False) if console.file is sys.stdout else console
    factory = engine_gate_factory(asker=asker, notify=lambda text: notices.print(f"[yellow]{_escape(text)}[/yellow]"))
    session_dir = session_dir or standalone_session_dir()
    if asker is not None:
        _offer_trust(cwd, asker, console)
    try:
        session = await open_session(model=model, script=script, cwd=cwd, mode=mode, sink=sink,
                                     gate_factory=factory, session_dir=session_dir, decision_trail=decision_trail)
    except StartError as exc:
        click.echo(f"oharness: {exc}", err=True)
        return 2
    sink.header(model, session)
    console.print(f"[bold]user[/bold] {_escape(prompt)}")
    try:
        outcome = await session.agent.run_turn(prompt)
    except (KeyboardInterrupt, asyncio.CancelledError):
        console.print("[yellow]interrupted[/yellow]")
        return 130
    finally:
        await session.close()
    sink.footer(outcome, session.agent.shared.usage)
    return 1 if outcome.stop_reason == "error" else 0


def _offer_trust(cwd: str | None, asker: Any, console: Any) -> None:
    """Interactive first start in an untrusted workspace whose project settings trust would turn
    on (docs/reference/permissions.md#workspace-trust): show them and ask. A headless start never grants trust."""
    import os

    from .cli_permissions import trust_summary
    from metaharness.permissions import load_settings, trust_workspace

    settings = load_settings(os.path.abspath(cwd or os.getcwd()))
    if not settings.ok or settings.trusted or not settings.untrusted_grants:
        return  # load errors are reported by the session start itself
    if asker.confirm_trust(trust_summary(settings)):
        trust_workspace(settings.project_root, settings.home)
        console.print(f"[green]trusted[/green] {_escape(settings.project_root)}")


def _escape(text: Any) -> str:
    from rich.markup import escape

    return escape(str(text))
