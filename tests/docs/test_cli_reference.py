"""docs/reference/cli.md is generated from the click commands; it must not drift from them."""

from __future__ import annotations

import importlib.util

from .support import DOCS

_SPEC = importlib.util.spec_from_file_location("cli_reference", DOCS.parent / "tools" / "cli_reference.py")
_GENERATOR = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_GENERATOR)
render = _GENERATOR.render


def test_the_committed_cli_reference_is_what_the_commands_generate():
    committed = (DOCS / "reference" / "cli.md").read_text()
    assert committed == render(), "docs/reference/cli.md is stale: run `make docs` (or python tools/cli_reference.py > docs/reference/cli.md)"


def test_every_command_and_option_is_in_the_reference():
    import click

    from metaharness.cli.main import cli
    from oharness.cli import main as oharness

    text = render()

    def walk(command, path):
        ctx = click.Context(command, info_name=path[-1])
        assert f"## `{' '.join(path)}`" in text
        for param in command.params:
            if isinstance(param, click.Option):
                assert f"`{param.opts[0]}`" in text, (path, param.opts)
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), [*path, name])

    walk(cli, ["metaharness"])
    walk(oharness, ["oharness"])
