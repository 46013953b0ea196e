"""`python -m oharness`: the `--stdio` child goes straight to its entry point (no click,
no rich: start-up time to the `init` line is benchmarked); anything else goes to the CLI."""

import sys


def _run() -> None:
    if "--stdio" in sys.argv[1:]:
        from oharness.stdio import main as stdio_main

        sys.exit(stdio_main(sys.argv[1:]))
    from oharness.cli import main

    main(prog_name="oharness")


if __name__ == "__main__":
    _run()
