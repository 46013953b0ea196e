"""RunSpec and the `metaharness run` flags are spelled one-to-one (the wire rule “run options”).

Fails when a flag is added without its field, a field without its flag, or the two
are spelled differently.
"""

from __future__ import annotations

import dataclasses

from metaharness.cli.run import run as run_command
from metaharness.protocol.spec import REPEATABLE
from metaharness.run.spec import RunSpec


def _flag_fields() -> dict[str, str]:
    mapping = {}
    for param in run_command.params:
        if param.param_type_name != "option":
            continue
        long = [o for o in param.opts if o.startswith("--")][0][2:]
        mapping[long] = param.name
    return mapping


def test_every_flag_is_a_field_spelled_the_same():
    fields = {f.name for f in dataclasses.fields(RunSpec)}
    for flag, dest in _flag_fields().items():
        expected = REPEATABLE.get(flag, flag.replace("-", "_"))
        assert dest == expected, f"--{flag} parses into {dest!r}, expected {expected!r}"
        assert dest in fields, f"--{flag} has no RunSpec field {dest!r}"


def test_every_field_is_a_flag():
    dests = set(_flag_fields().values()) | {"kind"}
    library_only = {f.name for f in dataclasses.fields(RunSpec) if f.metadata.get("library_only")}
    for field in dataclasses.fields(RunSpec):
        if field.name in library_only:
            continue
        assert field.name in dests, f"RunSpec.{field.name} has no flag"


def test_defaults_agree():
    """Parsing a bare `run oharness` yields exactly RunSpec's defaults."""
    ctx = run_command.make_context("run", ["oharness"])
    spec_defaults = RunSpec(kind="oharness")
    for name, value in ctx.params.items():
        expected = getattr(spec_defaults, name)
        if isinstance(value, tuple):
            value = list(value)
        assert value == expected, f"{name}: the flag parses to {value!r}, RunSpec defaults to {expected!r}"
