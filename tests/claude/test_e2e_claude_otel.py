"""`metaharness run claude --otel` into a real Arize Phoenix (the `phoenix` fixture): the pinned
Claude Code, offline against the loopback model inside the loopback-only network namespace, sends
its run's spans live, and Phoenix holds the span tree its event stream says (tests/export/
test_phoenix.py's `check_trace`: names, parents, decisions, one span per node). The namespace's
loopback is its own, so Phoenix's port on the host is reached through a relay (nsrun.py --forward:
a Unix socket, which crosses network namespaces); no name is looked up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from export.test_phoenix import check_trace, expected_tree

from .support import ClaudeRun

pytestmark = pytest.mark.timeout(180)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


async def test_a_live_claude_code_run_is_its_span_tree_in_phoenix(tmp_path, phoenix):
    project = "live-claude"
    port = int(phoenix.url.rsplit(":", 1)[1])
    run = await ClaudeRun(str(tmp_path), json.loads((EXAMPLES / "same-task.scenario.json").read_text()),
                          ["--frame", str(EXAMPLES / "same-task.frame.json"), "--otel", phoenix.otlp_endpoint],
                          env=phoenix.project_env(project), reach=port).start()
    rc = await run.finish(timeout=120)
    assert rc == 0, run.stderr.decode()[-2000:]
    run.assert_complete()
    run.assert_no_dns()
    events = run.events
    assert events[0]["adapter"] == "claude" and events[-1]["reason"] == "completed"
    assert [e for e in events if e["event"] == "warning" and e["code"] == "OTEL_SPANS_DROPPED"] == []
    spans = phoenix.wait_for_spans(project, len(expected_tree(events)))
    assert len(spans) == len(expected_tree(events))
    by_key = check_trace(spans, events, live=True)
    denied = [s["name"] for s in spans if s["attributes"].get("metaharness.decision") == "deny"]
    assert denied == ["execute_tool Bash"]  # the frame's refusal of the shell call
    assert not (Path(run.work) / "shell.txt").exists()
    assert (Path(run.work) / "notes.txt").read_text() == "HELLO"
    assert by_key[("run",)]["attributes"]["gen_ai.provider.name"] == "anthropic"
