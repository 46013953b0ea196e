"""`metaharness doctor`: says how to point at a binary, and keeps nothing on disk."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from metaharness.cli.main import cli

from .support import VENDOR_DIR


def test_doctor_without_a_binary_suggests_vendor_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no claude, no node
    monkeypatch.delenv("METAHARNESS_VENDOR_DIR", raising=False)
    # As outside a source checkout: no `.vendor` the shared child PATH would fall back to.
    monkeypatch.setattr("metaharness.adapters.process.child.default_vendor_dir", lambda: None)
    result = CliRunner().invoke(cli, ["doctor", "claude"])
    assert result.exit_code == 1
    assert "FAIL binary on the child PATH" in result.stdout
    assert "point at one with --vendor-dir DIR (or METAHARNESS_VENDOR_DIR)" in result.stderr


def test_doctor_with_vendor_dir_does_not_repeat_the_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    result = CliRunner().invoke(cli, ["doctor", "claude", "--vendor-dir", str(tmp_path)])
    assert result.exit_code == 1 and "--vendor-dir" not in result.stderr


def test_doctor_claude_leaves_no_scratch_directory(tmp_path, monkeypatch):
    if not os.path.exists(os.path.join(VENDOR_DIR, "claude")):
        pytest.skip("the pinned Claude Code CLI is not installed (make vendor)")
    base = tmp_path / "scratch"
    base.mkdir()
    monkeypatch.setenv("METAHARNESS_SCRATCH_DIR", str(base))
    result = CliRunner().invoke(cli, ["doctor", "claude", "--vendor-dir", VENDOR_DIR])
    assert "control-channel capabilities" in result.stdout, result.stdout
    assert list(base.iterdir()) == []
