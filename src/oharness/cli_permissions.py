"""`oharness permissions …`: explain, list, trust (docs/reference/permissions.md#the-commands).

A click group, mounted by `oharness.cli` as `oharness permissions`. `explain` and `list` never
execute a tool, prompt, or write anything; `trust` writes only `~/.oharness/trust.json`. All three
read the settings as they are on disk now. Bad input is one clear sentence and an exit code,
never a traceback.
"""

from __future__ import annotations

import json
import os
import sys

import click

from metaharness.permissions import MODES, WORKSPACE_MODES, NotationError, decide, load_settings, notation_call
from metaharness.permissions.settings import Settings, revoke_trust, trust_workspace

__all__ = ["permissions"]

EXIT_FOR = {"allow": 0, "ask": 3, "deny": 4}


def _cwd_option(f):
    return click.option("--cwd", "cwd", type=click.Path(file_okay=False), default=None,
                        help="Project directory (default: the current directory).")(f)


def _load(cwd: str | None, **kw) -> Settings:
    return load_settings(os.path.abspath(cwd or os.getcwd()), **kw)


def trust_summary(s: Settings) -> str:
    """What trusting this workspace would turn on: shown by `permissions trust` and by
    the first-start question of an interactive session."""
    lines = [f"project: {s.project_root}"]
    if s.trusted:
        lines.append("already trusted; trusting again records the project settings as they are now")
    elif s.untrusted_grants:
        lines.append("trusting it turns on these project settings:")
        lines += [f"  {grant}" for grant in s.untrusted_grants]
    else:
        lines.append("trusting it turns on no project allow rule, writableRoots or defaultMode accept-edits")
    lines.append("(project deny and ask rules apply whether or not it is trusted)")
    return "\n".join(lines)


def _print_issues(s: Settings) -> None:
    for e in s.errors:
        click.echo(f"error: {e}", err=True)
    for w in s.warnings:
        click.echo(f"warning: {w}", err=True)


@click.group(name="permissions")
def permissions() -> None:
    """Explain and list the permission rules, and trust a workspace."""


@permissions.command()
@click.argument("call_text", metavar="'<Tool(arg)>'")
@click.option("--mode", type=click.Choice(MODES), default=None, help="Mode to evaluate with (what-if).")
@click.option("--workspace-mode", "workspace_mode", type=click.Choice(WORKSPACE_MODES), default=None,
              help="workspaceMode to evaluate with (what-if).")
@click.option("--input", "input_json", default=None, help="A full JSON input object for the call.")
@click.option("--headless", is_flag=True, help="Evaluate with nobody able to answer an ask.")
@click.option("--json", "as_json", is_flag=True, help="Machine output.")
@_cwd_option
def explain(call_text: str, mode: str | None, workspace_mode: str | None, input_json: str | None,
            headless: bool, as_json: bool, cwd: str | None) -> None:
    """Decide a hypothetical call and print why. Exit 0 allow, 3 ask, 4 deny."""
    s = _load(cwd)
    if not s.ok:
        _print_issues(s)
        sys.exit(1)
    try:
        call = notation_call(call_text, s.cwd, input_json)
    except NotationError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    ctx = s.context(mode=mode, workspace_mode=workspace_mode, can_ask=not headless)
    v = decide(call, ctx)
    local_file = os.path.relpath(os.path.join(s.project_root, ".oharness", "settings.local.json"), s.cwd)
    if as_json:
        out = v.to_json()
        out["trusted"] = s.trusted
        click.echo(json.dumps(out, ensure_ascii=False))
        sys.exit(EXIT_FOR[v.behavior])
    click.echo(f"verdict:   {v.behavior}")
    click.echo(f"reason:    {v.reason}")
    if v.rule is not None:
        click.echo(f"rule:      {v.rule}    {v.scope}" + (f"  {v.file}" if v.file else ""))
    click.echo(f"mode:      {ctx.mode}   workspaceMode: {ctx.workspace_mode}   "
               f"workspace: {'trusted' if s.trusted else 'not trusted'}")
    click.echo(f"principal: {v.principal}")
    click.echo("subjects:")
    for i, sub in enumerate(v.subjects, 1):
        label = sub.path if sub.kind in ("read", "write") and sub.path else sub.label
        extra = f"  {sub.rule}  {sub.scope}" if sub.rule else ""
        why = f"  ({sub.why})" if sub.why else ""
        click.echo(f"  {i:<2} {sub.kind:<6} {label}    {sub.result}  {sub.reason}{extra}{why}")
    if v.behavior == "ask":
        click.echo("if nobody can answer: unavailable → refused")
        if v.remember:
            click.echo(f"always allow would write: {v.remember['local']} → {local_file}")
        else:
            click.echo(f"always allow: not offered ({v.remember_why_not or 'not rememberable'})")
    sys.exit(EXIT_FOR[v.behavior])


@permissions.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Machine output.")
@_cwd_option
def list_(as_json: bool, cwd: str | None) -> None:
    """Print the effective settings and every rule with its origin."""
    s = _load(cwd)
    groups = {"deny": 0, "ask": 1, "allow": 2}
    scopes = {"builtin": 0, "user": 1, "project": 2, "local": 3, "file": 4}
    rules = sorted(enumerate(s.listed), key=lambda t: (groups[t[1].behavior], scopes[t[1].scope], t[0]))
    roots = [s.project_root, *s.writable_roots, "/tmp"]
    if as_json:
        click.echo(json.dumps({
            "mode": s.mode, "mode_source": s.mode_source, "workspace_mode": s.workspace_mode,
            "workspace_mode_source": s.workspace_mode_source, "writable_roots": roots, "trusted": s.trusted,
            "trail": s.trail_enabled,
            "rules": [{"behavior": r.behavior, "rule": r.text, "scope": r.scope, "file": r.file, "status": r.status,
                       "notes": list(r.notes)} for _, r in rules],
            "errors": [str(e) for e in s.errors], "warnings": [str(w) for w in s.warnings],
        }, ensure_ascii=False))
        sys.exit(1 if s.errors else 0)
    click.echo(f"mode:           {s.mode:<17} ({s.mode_source})")
    click.echo(f"workspaceMode:  {s.workspace_mode:<17} ({s.workspace_mode_source})")
    click.echo(f"writable roots: {', '.join(roots)}")
    click.echo(f"workspace:      {'trusted' if s.trusted else 'not trusted'}")
    click.echo(f"trail:          {'on' if s.trail_enabled else 'off'}")
    click.echo("")
    for _, r in rules:
        marks = [] if r.status == "active" else [r.status]
        marks += list(r.notes)
        line = f"{r.behavior:<6} {r.text:<24} {r.scope:<8}" + (f" {r.file}" if r.file else "")
        if marks:
            line += "   " + "; ".join(marks)
        click.echo(line.rstrip())
    if s.errors or s.warnings:
        click.echo("")
    for e in s.errors:
        click.echo(f"error: {e}")
    for w in s.warnings:
        click.echo(f"warning: {w}")
    sys.exit(1 if s.errors else 0)


@permissions.command()
@click.option("--revoke", is_flag=True, help="Remove the trust entry for this project.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@_cwd_option
def trust(revoke: bool, yes: bool, cwd: str | None) -> None:
    """Trust this workspace's project settings, or revoke that trust.

    Until a workspace is trusted its project allow rules, writableRoots and an
    accept-edits defaultMode are ignored; its deny and ask rules apply at once.
    """
    s = _load(cwd)
    if revoke:
        removed = revoke_trust(s.project_root, s.home)
        click.echo(f"trust {'revoked' if removed else 'was not recorded'} for {s.project_root}")
        return
    if not s.ok:
        _print_issues(s)
        sys.exit(1)
    click.echo(trust_summary(s))
    if not yes and not click.confirm("Trust this workspace?", default=False):
        click.echo("not trusted")
        sys.exit(1)
    digest = trust_workspace(s.project_root, s.home)
    click.echo(f"trusted {s.project_root} (settings sha256 {digest[:12]}…)")
