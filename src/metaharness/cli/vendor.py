"""`metaharness doctor KIND` and `metaharness conformance KIND` (docs/guides/claude-and-codex.md).

A dispatch on the kind: each kind's checks live in its adapter package
(`metaharness.adapters.<kind>.doctor`; the ACP kinds' in `cli/acp_doctor.py`, which builds a
run spec), exposing `doctor_checks(vendor_dir)` and
`conformance_checks(fixtures)`, each yielding `(name, ok, detail)`. One line per check
(`ok` / `FAIL`); exit 0 only when every check passed.
"""

from __future__ import annotations

import os
import sys

import click

from metaharness.protocol.harnesses import REGISTRY, load, with_doctor

KINDS = with_doctor()  # the registry's kinds with a doctor (the vendor harnesses)


def _module(kind: str):
    # "module" holds the checks itself; "module:name" names the object in it that does (ACP kinds share one module).
    try:
        return load(REGISTRY[kind].doctor)
    except ModuleNotFoundError as exc:
        raise click.UsageError(f"the {kind} checks are not built in this checkout ({exc.name})") from None


def _report(checks, *, hint: str | None = None) -> None:
    failed = 0
    for index, (name, ok, detail) in enumerate(checks):
        click.echo(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
        failed += not ok
        if index == 0 and not ok and hint:
            click.echo(hint, err=True)  # the first check finds the binary
    sys.exit(1 if failed else 0)


def _vendor_hint(kind: str, vendor_dir: str | None) -> str | None:
    if vendor_dir:
        return None
    return (f"metaharness: no {kind} binary was found on the child's PATH; point at one with --vendor-dir DIR "
            "(or METAHARNESS_VENDOR_DIR). In a source checkout, `make test` installs the pinned CLIs in "
            ".vendor/node_modules/.bin.")


@click.command()
@click.argument("kind", type=click.Choice(sorted(KINDS)))
@click.option("--vendor-dir", type=click.Path(file_okay=False), help="Directory holding the vendor binaries.")
@click.option("--smoke", is_flag=True, help="Also run one sandboxed call through the loopback (codex).")
def doctor(kind: str, vendor_dir: str | None, smoke: bool) -> None:
    """Check the vendor binary the child would run: path, pin, flags, control channel."""
    module = _module(kind)
    checks = module.doctor_checks(vendor_dir, smoke=True) if smoke else module.doctor_checks(vendor_dir)
    _report(checks, hint=_vendor_hint(kind, vendor_dir or os.environ.get("METAHARNESS_VENDOR_DIR")))


@click.command()
@click.argument("kind", type=click.Choice(sorted(KINDS)))
@click.option("--fixtures", type=click.Path(file_okay=False), help="Directory of recorded wire fixtures.")
def conformance(kind: str, fixtures: str | None) -> None:
    """The free checks: recorded wire through the translator, and the launch plan."""
    _report(_module(kind).conformance_checks(fixtures))
