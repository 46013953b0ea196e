"""The real vendors: the same-task scenario (write allowed, shell denied by the frame, edit
allowed) on Claude Code, Codex, opencode and Gemini CLI, scripted on the local fake model,
exported and validated with Harbor's own ATIF models, the refused shell call shown refused."""

from __future__ import annotations

import os
import subprocess

import pytest

from .conftest import EXAMPLES, METAHARNESS, REPO, check_round_trip, env

pytestmark = pytest.mark.e2e

VENDOR = REPO / ".vendor" / "node_modules" / ".bin"
KINDS = ("claude", "codex", "opencode", "gemini")


@pytest.mark.parametrize("kind", KINDS)
def test_the_same_task_on_each_vendor_exports_and_validates(kind, tmp_path):
    binary = VENDOR / kind
    if not binary.exists():
        if os.environ.get("METAHARNESS_REQUIRE_VENDOR") == "1":
            pytest.fail(f"{kind} is not installed in {VENDOR} (make vendor)")
        pytest.skip(f"{kind} is not installed in {VENDOR} (make vendor)")
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([*METAHARNESS, "run", kind, "--script", str(EXAMPLES / "same-task.scenario.json"),
                           "--frame", str(EXAMPLES / "same-task.frame.json"), "-p", "do the task", "--cwd", str(work),
                           "--decision-timeout-ms", "2000", "--vendor-dir", str(VENDOR)],
                          capture_output=True, timeout=300, stdin=subprocess.DEVNULL, env=env(tmp_path))
    events = tmp_path / "events.jsonl"
    events.write_bytes(done.stdout)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    doc = check_round_trip(events)
    assert doc["agent"]["name"] == kind and doc["agent"]["version"] != "unknown"
    calls = [c["extra"]["metaharness"] for s in doc["steps"] for c in s.get("tool_calls") or []]
    assert [(c["operations"], c["decision"], c["ran"]) for c in calls] == [
        (["file.write"], "allow", True), (["shell"], "deny", False), (["file.edit"], "allow", True)]
    assert not (work / "shell.txt").exists()
