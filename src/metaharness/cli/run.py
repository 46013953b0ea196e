"""`metaharness run <kind>` and `metaharness capabilities <kind>`.

Every option here is a RunSpec field spelled one-to-one (docs/guides/python.md);
tests/run/test_spec_flags.py fails if they drift. This module only parses.
"""

from __future__ import annotations

import os
import sys

import click

from metaharness.run.spec import CREDENTIAL_MODES, DECISION_MODES, HERMETIC_MODES, KINDS, RunSpec


class _RunCommand(click.Command):
    def parse_args(self, ctx, args):
        # Not in this version: a usage error, nothing on stdout.
        for arg in args:
            if arg.split("=")[0] in ("--audit", "--spec", "--auditor"):
                raise click.UsageError(f"{arg.split('=')[0]} is not in this version of metaharness")
        return super().parse_args(ctx, args)


@click.command(cls=_RunCommand)
@click.argument("kind", type=click.Choice(KINDS))
@click.option("-p", "--prompt", help="The prompt of the first turn.")
@click.option("--frame", type=click.Path(dir_okay=False), help="A sealed metaharness.frame/1 document.")
@click.option("--decisions", type=click.Choice(DECISION_MODES), default="frame", show_default=True,
              help="Who decides each tool call: frame (the frame in force; without one, abstain), ask (you, by "
                   "tool.decide on stdin), observe (allow and record), policy (OHarness permission rules).")
@click.option("--deny-only", is_flag=True, help="Never grant: every allow is delivered as abstain.")
@click.option("--decision-timeout-ms", type=click.IntRange(1, 2**32 - 1), default=55000, show_default=True,
              help="How long a call waits for a tool.decide before metaharness denies it.")
@click.option("--keep-open", is_flag=True, help="Stay open between turns for frame.set / message.inject.")
@click.option("--posture", help="The launch permission posture, in the adapter's own words.")
@click.option("--codex-replace-relay", is_flag=True, help="codex only: deliver replace decisions for shell calls through a PreToolUse hook relay.")
@click.option("--require-command", "required_commands", multiple=True,
              help="A command (or `replace`) this run needs; refused at start if the adapter cannot honour it.")
@click.option("--retain-dir", type=click.Path(file_okay=False),
              help="Keep the raw vendor transcript (and, in policy mode, the decision trail) here.")
@click.option("--hermetic", type=click.Choice(HERMETIC_MODES), default="off", show_default=True,
              is_flag=False, flag_value="on",
              help="Check the hermetic floor and attest it in session.started; a gap exits 1, an unknown 3 "
                   "(a bare --hermetic means on).")
@click.option("--strict-version", is_flag=True, help="Refuse a vendor binary off its pin.")
@click.option("--model", help="PROVIDER:MODEL for oharness; passed verbatim to vendor harnesses.")
@click.option("--max-turns", type=click.IntRange(1), help="End the run after this many turns (close reason budget).")
@click.option("--script", type=click.Path(dir_okay=False), help="A metaharness.scenario/1 file scripting the model.")
@click.option("--cwd", type=click.Path(file_okay=False),
              help="Where the harness works and writes (default: the current directory, said on stderr).")
@click.option("--events", type=click.Path(dir_okay=False), help="Also write the event stream to this file.")
@click.option("--credentials", type=click.Choice(CREDENTIAL_MODES), default="none", show_default=True,
              help="claude/codex: none (a placeholder key; --script or --model-endpoint), loopback (your key "
                   "stays in a local proxy), api-key (the vendor gets your key).")
@click.option("--model-endpoint", help="Base URL of the model server (credentials none).")
@click.option("--vendor-dir", type=click.Path(file_okay=False), help="Directory holding the vendor binaries.")
@click.option("--policy", "policy_files", multiple=True, type=click.Path(dir_okay=False),
              help="policy mode: an extra OHarness settings document (repeatable).")
@click.option("--policy-scopes", type=click.Choice(["all", "none"]), default="all", show_default=True,
              help="policy mode: read the user, project and local OHarness settings (all) or only --policy files.")
@click.option("--policy-mode", type=click.Choice(["manual", "accept-edits", "plan", "auto", "bypass"]),
              help="policy mode: the permission mode (default: the settings' defaultMode, else manual).")
@click.option("--policy-workspace-mode", type=click.Choice(["read-only", "workspace-write", "full-access"]),
              help="policy mode: narrow workspaceMode (it never widens what the settings say).")
@click.option("--policy-ask", type=click.Choice(["none", "embedder"]), default="none", show_default=True,
              help="policy mode: who answers a rule that asks: none (refused fail-closed) or embedder (tool.decide).")
@click.option("--no-decision-trail", is_flag=True, help="policy mode: do not write the decision trail.")
@click.pass_context
def run(ctx: click.Context, **options) -> None:
    """Run a harness; events on stdout, commands on stdin.

    KIND is oharness, claude or codex. Every tool call is decided before it runs (--decisions);
    the exit code is 0 when the session ended, 2 when the run was refused or could not run,
    3 when nobody found out how it ended, 1 for a hermetic gap.
    """
    source = ctx.get_parameter_source
    policy_flags = [name for name in ("policy_files", "policy_mode", "policy_workspace_mode", "policy_ask",
                                      "policy_scopes", "no_decision_trail")
                    if source(name) is not None and source(name).name == "COMMANDLINE"]
    if policy_flags and options["decisions"] != "policy":
        raise click.UsageError("the --policy… flags need --decisions policy")
    options["required_commands"] = list(options["required_commands"])
    options["policy_files"] = list(options["policy_files"])
    spec = RunSpec(**options)
    if spec.cwd is None:
        # Every harness works in --cwd, else here; say so, since files may be written here.
        click.echo(f"metaharness: {spec.kind} works in {os.getcwd()} (the current directory; --cwd DIR picks "
                   "another)", err=True)
    from metaharness.run.host import run_blocking

    sys.exit(run_blocking(spec))


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
    click.echo(render_table(descriptor["rendering"]) if render else descriptor_json(descriptor), nl=False)
