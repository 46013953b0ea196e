"""`metaharness run <kind>` and `metaharness capabilities <kind>`.

Every option here is a RunSpec field spelled one-to-one (protocol.md § 7.7);
tests/run/test_spec_flags.py fails if they drift. This module only parses.
"""

from __future__ import annotations

import sys

import click

from metaharness.run.spec import CREDENTIAL_MODES, DECISION_MODES, HERMETIC_MODES, KINDS, RunSpec


class _RunCommand(click.Command):
    def parse_args(self, ctx, args):
        # Not in this version (protocol.md § 7.7): a usage error, nothing on stdout.
        for arg in args:
            if arg.split("=")[0] in ("--audit", "--spec", "--auditor"):
                raise click.UsageError(f"{arg.split('=')[0]} is not in this version of metaharness")
        return super().parse_args(ctx, args)


@click.command(cls=_RunCommand)
@click.argument("kind", type=click.Choice(KINDS))
@click.option("-p", "--prompt", help="The prompt of the first turn.")
@click.option("--frame", type=click.Path(dir_okay=False), help="A sealed metaharness.frame/1 document.")
@click.option("--decisions", type=click.Choice(DECISION_MODES), default="frame", show_default=True)
@click.option("--deny-only", is_flag=True, help="Never grant: every allow is delivered as abstain.")
@click.option("--decision-timeout-ms", type=click.IntRange(1, 2**32 - 1), default=55000, show_default=True)
@click.option("--keep-open", is_flag=True, help="Stay open between turns for frame.set / message.inject.")
@click.option("--posture", help="The launch permission posture, in the adapter's own words.")
@click.option("--codex-replace-relay", is_flag=True, help="codex only: deliver replace through the hook relay.")
@click.option("--require-command", "required_commands", multiple=True,
              help="A command (or `replace`) this run needs; refused at start if the adapter cannot honour it.")
@click.option("--retain-dir", type=click.Path(file_okay=False), help="Copy the raw vendor transcript here.")
@click.option("--hermetic", type=click.Choice(HERMETIC_MODES), default="off", show_default=True,
              is_flag=False, flag_value="on")
@click.option("--strict-version", is_flag=True, help="Refuse a vendor binary off its pin.")
@click.option("--model", help="PROVIDER:MODEL for oharness; passed verbatim to vendor harnesses.")
@click.option("--max-turns", type=click.IntRange(1), help="End the run after this many turns (close reason budget).")
@click.option("--script", type=click.Path(dir_okay=False), help="A metaharness.scenario/1 file scripting the model.")
@click.option("--cwd", type=click.Path(file_okay=False), help="The harness's working directory.")
@click.option("--events", type=click.Path(dir_okay=False), help="Also write the event stream to this file.")
@click.option("--credentials", type=click.Choice(CREDENTIAL_MODES), default="none", show_default=True)
@click.option("--model-endpoint", help="Base URL of the model server (credentials none).")
@click.option("--vendor-dir", type=click.Path(file_okay=False), help="Directory holding the vendor binaries.")
@click.option("--policy", "policy_files", multiple=True, type=click.Path(dir_okay=False),
              help="policy mode: an extra settings document (repeatable).")
@click.option("--policy-scopes", type=click.Choice(["all", "none"]), default="all", show_default=True)
@click.option("--policy-mode", type=click.Choice(["manual", "accept-edits", "plan", "auto", "bypass"]))
@click.option("--policy-workspace-mode", type=click.Choice(["read-only", "workspace-write", "full-access"]))
@click.option("--policy-ask", type=click.Choice(["none", "embedder"]), default="none", show_default=True)
@click.option("--no-decision-trail", is_flag=True, help="policy mode: do not write the decision trail.")
@click.option("--record", type=click.Path(dir_okay=False), help="Write the run's model traffic to this cassette.")
@click.option("--replay", type=click.Path(dir_okay=False), help="Answer the model's part from this cassette, offline.")
@click.option("--replay-strict/--replay-lenient", default=True, show_default=True,
              help="On a request the cassette does not hold: warn and stop the run, or warn and go on.")
@click.option("--redact", "redact_patterns", multiple=True, metavar="PATTERN",
              help="--record: mask text matching this regular expression in requests and responses (repeatable).")
@click.pass_context
def run(ctx: click.Context, **options) -> None:
    """Run a harness; events on stdout, commands on stdin."""
    source = ctx.get_parameter_source
    policy_flags = [name for name in ("policy_files", "policy_mode", "policy_workspace_mode", "policy_ask",
                                      "policy_scopes", "no_decision_trail")
                    if source(name) is not None and source(name).name == "COMMANDLINE"]
    if policy_flags and options["decisions"] != "policy":
        raise click.UsageError("the --policy… flags need --decisions policy")
    options["required_commands"] = list(options["required_commands"])
    options["policy_files"] = list(options["policy_files"])
    options["redact_patterns"] = list(options["redact_patterns"])
    spec = RunSpec(**options)
    from metaharness.run.host import run_blocking

    if spec.record or spec.replay:
        from metaharness.replay.session import host_with_cassette

        sys.exit(run_blocking(spec, host_with_cassette))
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
