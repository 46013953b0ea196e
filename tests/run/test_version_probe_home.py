"""The process kit's `--version` probe leaves nothing on disk: a vendor that writes into its
HOME even for `--version` (Codex makes `$HOME/.codex/tmp/arg0-linux/…`) gets a fresh HOME that
is removed afterwards, never the temp directory itself (which every run then littered)."""

from __future__ import annotations

import os
import stat
import tempfile

from metaharness.adapters.process import binary_version


def test_the_version_probe_runs_in_a_home_of_its_own_and_removes_it(tmp_path, monkeypatch):
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    seen = tmp_path / "home-seen"
    vendor = tmp_path / "vendor"
    vendor.write_text(f"#!/bin/sh\nmkdir -p \"$HOME/.codex/tmp/arg0-linux/x\"\necho \"$HOME\" > {seen}\n"
                      "echo 'vendor-cli 1.2.3'\n")
    vendor.chmod(vendor.stat().st_mode | stat.S_IXUSR)
    assert binary_version(str(vendor), os.environ["PATH"]) == "1.2.3"
    home = seen.read_text().strip()
    assert home != str(temp) and os.path.dirname(home) == str(temp)  # its own, inside TMPDIR
    assert os.listdir(temp) == []  # and gone
