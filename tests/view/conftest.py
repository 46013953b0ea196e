"""Shared helpers for the view tests: fixture paths, the CLI runner, stream builders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from metaharness.cli.main import cli

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
ARTIFACTS = HERE.parent.parent / "test-artifacts"


def invoke(args: list[str], input: bytes | None = None, cwd: Path = HERE):
    """Run `metaharness <args>` in-process from `cwd`; returns click's Result."""
    import os

    runner = CliRunner()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return runner.invoke(cli, args, input=input, catch_exceptions=False)
    finally:
        os.chdir(old)


def stream_bytes(run: str, events: list[dict]) -> bytes:
    """Enveloped event lines (seq from 1) for payload dicts that carry their `event` name."""
    lines = []
    for seq, payload in enumerate(events, start=1):
        line = {"format": "metaharness.event/1", "seq": seq, "run": run}
        line.update(payload)
        lines.append(json.dumps(line, ensure_ascii=False, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
