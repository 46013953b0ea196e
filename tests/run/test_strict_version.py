"""--strict-version: a vendor binary off its pin is refused by name before anything runs, on
the version the shared kit reads from `binary --version` (adapters/process)."""

from __future__ import annotations

import os

import pytest

from metaharness.adapters.base import StartRefusal
from metaharness.adapters.claude import ClaudeAdapter
from metaharness.adapters.codex import CodexAdapter
from metaharness.run.spec import RunSpec


def fake_binary(directory, name: str, says: str) -> str:
    path = directory / name
    path.write_text(f"#!/bin/sh\necho '{says}'\n")
    os.chmod(path, 0o755)
    return str(directory)


@pytest.mark.parametrize("adapter_class, name, says, off", [
    (ClaudeAdapter, "claude", "0.0.1 (Claude Code)", "0.0.1"),
    (CodexAdapter, "codex", "codex-cli 0.0.2", "0.0.2"),
])
async def test_a_binary_off_its_pin_is_refused_with_the_version_it_reported(tmp_path, adapter_class, name, says, off):
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    spec = RunSpec(kind=name, prompt="go", vendor_dir=fake_binary(vendor, name, says), strict_version=True,
                   cwd=str(tmp_path), credentials="none", model_endpoint="http://127.0.0.1:9")
    adapter = adapter_class(spec)
    with pytest.raises(StartRefusal) as refused:
        adapter.plan()
        await adapter.start(None)  # Codex reads the version when it starts, before spawning
    assert refused.value.name == "VersionOffPin" and off in refused.value.sentence
