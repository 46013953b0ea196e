"""The `metaharness` command group.

Subcommands live in their own modules and are imported only when invoked, so
`metaharness run` does not pay for the HTML viewer's imports (start-up time is a
benchmarked figure). Each entry maps a command name to "module:attribute".
Exit codes: 0 ok, 1 a verdict against the input, 2 usage or refusal, 3 unknown.
"""

from __future__ import annotations

import sys


def _launched_to_run() -> bool:
    """This process is `metaharness run …`, launched as the console script or `python -m
    metaharness` (never a process that merely imports this module)."""
    launcher = sys.modules.get("__main__")
    by_module = getattr(getattr(launcher, "__spec__", None), "name", None) == "metaharness.__main__"
    by_script = (getattr(launcher, "__file__", None) or "").rsplit("/", 1)[-1] == "metaharness"
    return sys.argv[1:2] == ["run"] and (by_module or by_script)


# First, before click and everything else is imported (a tenth of a second on a loaded machine):
# from here on a SIGINT/SIGTERM is noted and ends the run with `stream.closed` (run/__init__.py).
if _launched_to_run():
    from metaharness.run import install_early_signal_handlers

    install_early_signal_handlers()

import importlib  # noqa: E402

import click  # noqa: E402

COMMANDS: dict[str, str] = {
    "run": "metaharness.cli.run:run",
    "demo": "metaharness.cli.demo:demo",
    "capabilities": "metaharness.cli.run:capabilities",
    "frame": "metaharness.cli.frame:frame",
    "check": "metaharness.cli.check:check",
    "schema": "metaharness.cli.check:schema",
    "loopback": "metaharness.cli.loopback:loopback",
    "doctor": "metaharness.cli.vendor:doctor",
    "conformance": "metaharness.cli.vendor:conformance",
    "view": "metaharness.cli.view:view",
    "project": "metaharness.cli.view:project",
    "workflow": "metaharness.cli.workflow:workflow",
    "redecide": "metaharness.cli.redecide:redecide",
    "batch": "metaharness.cli.batch:batch",
    "export": "metaharness.cli.export:export",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith(module_name):
                return None  # not built yet in this checkout
            raise
        return getattr(module, attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="metaharness")
def cli() -> None:
    """Drive coding-agent harnesses through one typed, decided control seam."""


def main() -> None:
    if sys.argv[1:2] == ["run"]:  # a stop during start-up still closes the stream (run/__init__.py)
        from metaharness.run import install_early_signal_handlers

        install_early_signal_handlers()  # again, for a caller that imported this module itself
    try:
        cli.main(prog_name="metaharness", standalone_mode=True)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
