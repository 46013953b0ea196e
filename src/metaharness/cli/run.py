"""`metaharness run <kind>` and `metaharness capabilities <kind>`.

Every option here is a RunSpec field spelled one-to-one (docs/guides/python.md);
tests/run/test_spec_flags.py fails if they drift. This module only parses.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

import click

from metaharness.permissions import MODES, WORKSPACE_MODES
from metaharness.protocol.spec import CREDENTIAL_MODES, DECISION_MODES, HERMETIC_MODES, KINDS, RunSpec


class _RunCommand(click.Command):
    def parse_args(self, ctx, args):
        # Not in this version: a usage error, nothing on stdout.
        for arg in args:
            if arg.split("=")[0] in ("--audit", "--spec", "--auditor"):
                raise click.UsageError(f"{arg.split('=')[0]} is not in this version of metaharness")
        return super().parse_args(ctx, args)


# Every `run` option, keyed by its RunSpec field. Commands that drive runs (workflow, batch …)
# pick theirs from here, so an option is spelled and explained once.
OPTIONS: dict[str, Callable] = {
    "prompt": click.option("-p", "--prompt", help="The prompt of the first turn."),
    "frame": click.option("--frame", type=click.Path(dir_okay=False), help="A sealed metaharness.frame/1 document."),
    "decisions": click.option("--decisions", type=click.Choice(DECISION_MODES), default="frame", show_default=True,
                  help="Who decides each tool call: frame (the frame in force; without one, abstain), ask (you, by "
                       "tool.decide on stdin), observe (allow and record), policy (OHarness permission rules)."),
    "deny_only": click.option("--deny-only", is_flag=True, help="Never grant: every allow is delivered as abstain."),
    "decision_timeout_ms": click.option("--decision-timeout-ms", type=click.IntRange(1, 2**32 - 1), default=55000, show_default=True,
                  help="How long a call waits for a tool.decide before metaharness denies it."),
    "keep_open": click.option("--keep-open", is_flag=True, help="Stay open between turns for frame.set / message.inject."),
    "posture": click.option("--posture", help="The launch permission posture, in the adapter's own words."),
    "codex_replace_relay": click.option("--codex-replace-relay", is_flag=True, help="codex only: deliver replace decisions for shell calls through a PreToolUse hook relay."),
    "required_commands": click.option("--require-command", "required_commands", multiple=True,
                  help="A command (or `replace`) this run needs; refused at start if the adapter cannot honour it."),
    "retain_dir": click.option("--retain-dir", type=click.Path(file_okay=False),
                  help="Keep the raw vendor transcript (and, in policy mode, the decision trail) here."),
    "hermetic": click.option("--hermetic", type=click.Choice(HERMETIC_MODES), default="off", show_default=True,
                  is_flag=False, flag_value="on",
                  help="Check the hermetic floor and attest it in session.started; a gap exits 1, an unknown 3 "
                       "(a bare --hermetic means on)."),
    "strict_version": click.option("--strict-version", is_flag=True, help="Refuse a vendor binary off its pin."),
    "model": click.option("--model", help="PROVIDER:MODEL for oharness; passed verbatim to vendor harnesses."),
    "max_turns": click.option("--max-turns", type=click.IntRange(1), help="End the run after this many turns (close reason budget)."),
    "fail_on_error": click.option("--fail-on-error", is_flag=True,
                  help="Exit 1 when the session's terminal record says it failed (is_error), e.g. a failed model request."),
    "max_cost_usd": click.option("--max-cost-usd", type=click.FloatRange(0, min_open=True), metavar="USD",
                  help="Stop the run once the model traffic metaharness prices reaches this (close reason budget)."),
    "prices": click.option("--prices", type=click.Path(dir_okay=False),
                  help="A metaharness.prices/1 file laid over the shipped price table (else $METAHARNESS_PRICES)."),
    "script": click.option("--script", type=click.Path(dir_okay=False), help="A metaharness.scenario/1 file scripting the model."),
    "cwd": click.option("--cwd", type=click.Path(file_okay=False),
                  help="Where the harness works and writes (default: the current directory, said on stderr)."),
    "events": click.option("--events", type=click.Path(dir_okay=False), help="Also write the event stream to this file."),
    "credentials": click.option("--credentials", type=click.Choice(CREDENTIAL_MODES), default="none", show_default=True,
                  help="claude/codex: none (a placeholder key; --script or --model-endpoint), loopback (your key "
                       "stays in a local proxy), api-key (the vendor gets your key)."),
    "model_endpoint": click.option("--model-endpoint", help="Base URL of the model server (credentials none)."),
    "vendor_dir": click.option("--vendor-dir", type=click.Path(file_okay=False), help="Directory holding the vendor binaries."),
    "policy_files": click.option("--policy", "policy_files", multiple=True, type=click.Path(dir_okay=False),
                  help="policy mode: an extra OHarness settings document (repeatable)."),
    "policy_scopes": click.option("--policy-scopes", type=click.Choice(["all", "none"]), default="all", show_default=True,
                  help="policy mode: read the user, project and local OHarness settings (all) or only --policy files."),
    "policy_mode": click.option("--policy-mode", type=click.Choice(MODES),
                  help="policy mode: the permission mode (default: the settings' defaultMode, else manual)."),
    "policy_workspace_mode": click.option("--policy-workspace-mode", type=click.Choice(WORKSPACE_MODES),
                  help="policy mode: narrow workspaceMode (it never widens what the settings say)."),
    "policy_ask": click.option("--policy-ask", type=click.Choice(["none", "embedder"]), default="none", show_default=True,
                  help="policy mode: who answers a rule that asks: none (refused fail-closed) or embedder (tool.decide)."),
    "no_decision_trail": click.option("--no-decision-trail", is_flag=True, help="policy mode: do not write the decision trail."),
    # record and replay of the model traffic
    "record": click.option("--record", type=click.Path(dir_okay=False),
                  help="Write the run's model traffic to this cassette (credentials never reach it)."),
    "replay": click.option("--replay", type=click.Path(dir_okay=False),
                  help="Answer the model from this cassette, offline (no key, no network)."),
    "replay_strict": click.option("--replay-strict/--replay-lenient", default=True, show_default=True,
                  help="--replay: on a request the cassette does not hold, warn and stop the run, or warn and go on."),
    "redact_patterns": click.option("--redact", "redact_patterns", multiple=True, metavar="PATTERN",
                  help="--record: mask text matching this regular expression in requests and responses (repeatable)."),
    "otel": click.option("--otel", metavar="URL", is_flag=False, flag_value="default", default=None,
                  help="Send the run's spans live over OTLP/HTTP to URL (a bare --otel: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "
                       "else OTEL_EXPORTER_OTLP_ENDPOINT plus /v1/traces, else http://localhost:4318/v1/traces; either "
                       "variable set turns it on too). Needs the otel extra."),
}


def with_options(*names: str) -> Callable:
    """Apply the named run options to a command, in the order given."""
    def apply(func):
        for name in reversed(names):
            func = OPTIONS[name](func)
        return func
    return apply


POLICY_FLAGS = ("policy_files", "policy_mode", "policy_workspace_mode", "policy_ask", "policy_scopes",
                "no_decision_trail")


def check_policy_flags(ctx: click.Context, decisions: str) -> None:
    """The --policy… flags mean something only in policy mode: a usage error otherwise."""
    given = [name for name in POLICY_FLAGS
             if (source := ctx.get_parameter_source(name)) is not None and source.name == "COMMANDLINE"]
    if given and decisions != "policy":
        raise click.UsageError("the --policy… flags need --decisions policy")


@click.command(cls=_RunCommand)
@click.argument("kind", type=click.Choice(KINDS))
@with_options(*OPTIONS)
@click.pass_context
def run(ctx: click.Context, **options) -> None:
    """Run a harness; events on stdout, commands on stdin.

    KIND is one of the harness kinds above. Every tool call is decided before it runs (--decisions);
    the exit code is 0 when the session ended, 2 when the run was refused or could not run,
    3 when nobody found out how it ended, 1 for a hermetic gap.
    """
    check_policy_flags(ctx, options["decisions"])
    options["required_commands"] = list(options["required_commands"])
    options["policy_files"] = list(options["policy_files"])
    options["redact_patterns"] = list(options["redact_patterns"])
    spec = RunSpec(**options)
    if spec.cwd is None and not spec.replay:
        # Every harness works in --cwd, else here; say so, since files may be written here. (A
        # replay works where its recording did; the cassette says where.)
        click.echo(f"metaharness: {spec.kind} works in {os.getcwd()} (the current directory; --cwd DIR picks "
                   "another)", err=True)
    from metaharness.run.host import run_blocking

    sys.exit(run_blocking(spec, _host))


async def _host(spec: RunSpec, **streams) -> int:
    """The run hosted by the library API (plain, recorded or replayed); a refused start exits 2."""
    from metaharness import api

    try:
        return await api.host_stdio(spec, **streams)
    except api.RunRefused as refused:  # already written: the sentence on stderr, stream.closed on stdout
        return refused.exit_code


@click.command()
@click.argument("kind")
@click.option("--render", is_flag=True, help="Print the rendering table, one operation per line.")
def capabilities(kind: str, render: bool) -> None:
    """Print an adapter's capability descriptor."""
    from metaharness.adapters import KINDS as ADAPTERS, adapter_class
    from metaharness.protocol.capabilities import descriptor_json, render_table

    if kind not in ADAPTERS:
        click.echo(f"metaharness: unknown adapter kind {kind!r} (known: {', '.join(ADAPTERS)})", err=True)
        sys.exit(2)
    descriptor = adapter_class(kind).descriptor()
    click.echo(render_table(descriptor.rendering) if render else descriptor_json(descriptor.to_wire()), nl=False)
