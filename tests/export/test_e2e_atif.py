"""The real vendors: the same-task scenario (write allowed, shell denied by the frame, edit
allowed) on Claude Code, Codex, opencode and Gemini CLI, scripted on the local fake model,
exported and validated with Harbor's own ATIF models, the refused shell call shown refused,
and sent as OpenTelemetry spans to a local OTLP receiver."""

from __future__ import annotations

import os
import subprocess

import pytest

from .conftest import EXAMPLES, METAHARNESS, REPO, check_round_trip, env
from .test_otel import attrs, receiver, send  # noqa: F401 (receiver is a fixture)


VENDOR = REPO / ".vendor" / "node_modules" / ".bin"
KINDS = ("claude", "codex", "opencode", "gemini")


@pytest.mark.parametrize("kind", KINDS)
def test_the_same_task_on_each_vendor_exports_and_validates(kind, tmp_path, receiver):
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
    done = send(events, f"http://127.0.0.1:{receiver.server_port}/v1/traces")
    assert done.returncode == 0, done.stderr
    spans = receiver.spans()
    (root,) = [s for s in spans if not s.parent_span_id]
    assert root.name == f"invoke_agent {kind}" and attrs(root)["gen_ai.agent.name"] == kind
    tools = {attrs(s)["gen_ai.tool.call.id"]: attrs(s) for s in spans if s.name.startswith("execute_tool ")}
    assert [tools[c["tool_call_id"]]["metaharness.decision"] for s in doc["steps"] for c in s.get("tool_calls") or []] \
        == ["allow", "deny", "allow"]
    assert all(s.end_time_unix_nano >= s.start_time_unix_nano > 0 for s in spans)
