"""`metaharness redecide` — which recorded calls a new frame or policy would decide differently.

Exit codes: 0 nothing that `--fail-on` counts changed; 1 something did; 2 a usage error, an
unreadable stream, or a frame or policy the run itself would refuse.
"""

from __future__ import annotations

import json
import sys

import click

from metaharness.cli._out import fail, say
from metaharness.permissions import MODES


@click.command()
@click.argument("streams", nargs=-1, required=True, metavar="EVENTS.jsonl|DIR…")
@click.option("--frame", "frame_path", type=click.Path(dir_okay=False),
              help="A sealed metaharness.frame/1 document, in force for every call.")
@click.option("--policy", "policy_files", multiple=True, type=click.Path(dir_okay=False),
              help="A settings document of permission rules (repeatable).")
@click.option("--policy-mode", type=click.Choice(MODES), help="The permission mode the policy decides in.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of text.")
@click.option("--fail-on", type=click.Choice(["allowed", "denied", "any"]), default="any", show_default=True,
              help="Exit 1 when a call would be newly allowed, newly denied, or either (or otherwise changed).")
def redecide(streams: tuple[str, ...], frame_path: str | None, policy_files: tuple[str, ...],
             policy_mode: str | None, as_json: bool, fail_on: str) -> None:
    """Decide every recorded tool call again under a new frame or policy, running nothing."""
    from metaharness.replay import redecide as rd

    if (frame_path is None) == (not policy_files):
        raise click.UsageError("give either --frame FILE or --policy FILE (one or more), not both")
    if policy_mode is not None and not policy_files:
        raise click.UsageError("--policy-mode needs --policy")
    decider = _decider(rd, frame_path, list(policy_files), policy_mode)
    try:
        report = rd.redecide(streams, decider)
    except (rd.StreamError, rd.PolicyUnusable) as exc:
        fail(str(exc))
    finally:
        getattr(decider, "close", lambda: None)()
    if as_json:
        sys.stdout.write(json.dumps({"streams": report.streams, "changed": [o.as_json() for o in report.changed()],
                                     "summary": report.summary(), "fail_on": fail_on,
                                     "fails": report.fails(fail_on)}, ensure_ascii=False, indent=2) + "\n")
    else:
        _print_text(report)
    sys.exit(1 if report.fails(fail_on) else 0)


def _decider(rd, frame_path: str | None, policy_files: list[str], policy_mode: str | None):
    if frame_path is not None:
        from metaharness.protocol.frame import FrameRefusal

        try:
            return rd.FrameDecider(rd.load_frame(frame_path))
        except FrameRefusal as refusal:
            fail(f"{refusal.name}: {refusal.sentence(frame_path)}")
    for path in policy_files:
        try:
            open(path, "rb").close()
        except OSError as exc:
            fail(f"the policy document {path} cannot be read: {exc.strerror or exc}")
    return rd.PolicyDeciderFor(policy_files, policy_mode)


def _print_text(report) -> None:
    for outcome in report.changed():
        old, new = outcome.old, outcome.new
        was = f"{old.klass} ({old.decided_by})" if old.decided_by else old.klass
        line = f"{outcome.change}: {outcome.call.call_id} {outcome.call.name} in {outcome.call.stream}: " \
               f"was {was}, now {new.klass} ({new.decided_by})"
        say(line + (f": {new.reason}" if new.reason else ""))
    counts = report.summary()
    say(f"{_count(counts['calls'], 'call')} in {_count(len(report.streams), 'stream')}: {counts['kept']} kept, "
        f"{counts['newly denied']} newly denied, {counts['newly allowed']} newly allowed, "
        f"{counts['changed']} otherwise changed")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
