"""A Codex run that requires replace is told which flag delivers it."""

from __future__ import annotations

import json
import subprocess
import sys


def test_require_replace_on_codex_names_the_relay_flag(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "metaharness", "run", "codex", "--require-command", "replace",
                           "--cwd", str(tmp_path), "-p", "go"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "cannot honour what this run requires: replace" in proc.stderr
    assert "--codex-replace-relay" in proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    # The wire reason stays the protocol's sentence; the hint is for the person reading stderr.
    assert lines[0]["outcome"]["refused"]["reason"] == (
        "this run's configuration needs replace and the codex adapter cannot deliver it")


def test_the_call_level_replace_refusal_names_the_relay_too():
    from metaharness.adapters.codex.seam import REPLACE_REASON

    assert "--codex-replace-relay" in REPLACE_REASON
