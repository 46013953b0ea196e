"""docs/reference/cli.md is generated from the click commands; it must not drift from them."""

from __future__ import annotations

from metaharness.cli.reference import render

from .support import DOCS


def test_the_committed_cli_reference_is_what_the_commands_generate():
    committed = (DOCS / "reference" / "cli.md").read_text()
    assert committed == render(), "docs/reference/cli.md is stale: run `make docs` (or python -m metaharness.cli.reference)"


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
