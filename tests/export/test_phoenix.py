"""`metaharness export otel` into a real Arize Phoenix (the `phoenix` fixture: a server of the
pinned version on 127.0.0.1, tests/phoenix_server.py), read back through Phoenix's REST API and
checked against the stream it came from: one span per run, step, turn and call, each under the
parent the stream puts it in, with its `gen_ai.*` and `metaharness.*` attributes, and Phoenix
reading the run as an agent and the calls as tools. A stream of each harness of the registry
(Claude Code and Codex recorded on the pinned binaries, opencode, Gemini CLI and Qwen Code from
their conformance recordings, oharness run here) and a workflow run; then the trace in Phoenix's own UI in the
browser, its screenshot the OpenTelemetry guide's image.

The Claude Code and Codex streams (tests/fixtures/{claude,codex}/same-task.events.jsonl) were
recorded with `metaharness run KIND --script examples/same-task.scenario.json --frame
examples/same-task.frame.json -p "do the task" --decision-timeout-ms 2000`.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from metaharness.protocol.harnesses import KINDS, harness

from .conftest import EXAMPLES, METAHARNESS, REPO, run_bugfix_workflow, run_oharness

FIXTURES = REPO / "tests" / "fixtures"
RECORDED = {
    "claude": FIXTURES / "claude" / "same-task.events.jsonl",
    "codex": FIXTURES / "codex" / "same-task.events.jsonl",
    "opencode": FIXTURES / "opencode" / "read-shell-write.events.jsonl",
    "gemini": FIXTURES / "gemini" / "read-shell-write.events.jsonl",
    "qwen": FIXTURES / "qwen" / "read-shell-write.events.jsonl",
}
# gen_ai.provider.name as the registry spells it for each harness (opencode and Qwen Code name none; oharness's
# scripted model is `scripted:default`).
PROVIDER = {**{kind: harness(kind).provider for kind in RECORDED}, "oharness": "scripted"}
# The screenshot goes to test-artifacts/ (git-ignored) on every run, and over the guide's image
# when METAHARNESS_UPDATE_SCREENSHOTS=1 (then review and commit it).
SCREENSHOT = REPO / "test-artifacts" / "phoenix-trace.png"
GUIDE_IMAGE = REPO / "docs" / "assets" / "phoenix-trace.png"


def export(phoenix, source: Path, project: str, *extra: str) -> None:
    done = subprocess.run([*METAHARNESS, "export", "otel", str(source), "--endpoint", phoenix.otlp_endpoint, *extra],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **phoenix.project_env(project)})
    assert done.returncode == 0, done.stderr


def lines_of(source: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in source.read_bytes().splitlines()]


def expected_tree(events: list[dict[str, Any]]) -> dict[tuple, tuple[str, tuple | None]]:
    """What the stream says the trace holds: each node's (name, parent node), by a key Phoenix's
    spans carry too (the run; a step by its index; a turn by its number; a call by its id)."""
    tree: dict[tuple, tuple[str, tuple | None]] = {("run",): (f"invoke_agent {events[0]['adapter']}", None)}
    step = turn = None
    for e in events:
        kind = e["event"]
        if kind == "step.entered":
            step = ("step", e["step"]["index"])
            tree[step] = (f"workflow.step {e['step']['state']}", ("run",))
        elif kind == "step.left":
            step = turn = None
        elif kind == "turn.started":
            turn = ("turn", e["turn"])
            assert turn not in tree  # a turn's number is its key
            tree[turn] = (f"turn {e['turn']}", step or ("run",))
        elif kind == "turn.ended":
            turn = None
        elif kind == "tool.requested":
            tree[("tool", e["call_id"])] = (f"execute_tool {e['name']}", turn or step or ("run",))
    return tree


def key_of(span: dict[str, Any]) -> tuple:
    a = span["attributes"]
    if span["parent_id"] is None:
        return ("run",)
    for key, attribute in (("tool", "gen_ai.tool.call.id"), ("turn", "metaharness.turn"),
                           ("step", "metaharness.step.index")):
        if attribute in a:
            return (key, a[attribute])
    raise AssertionError(f"a span metaharness does not make: {span['name']}")


def when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def check_trace(spans: list[dict[str, Any]], events: list[dict[str, Any]], *,
                live: bool = False) -> dict[tuple, dict[str, Any]]:
    """The spans Phoenix holds against the stream: tree, attributes, decisions, times. Returns
    them by key. LIVE (`--otel`): the run span opens before the session's first stamp (its
    context is handed to the harness it starts), so it starts at or before it."""
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    by_id = {s["context"]["span_id"]: s for s in spans}
    by_key = {key_of(s): s for s in spans}
    assert len(by_key) == len(spans)
    # the tree: every node once, named and parented as the stream says, nothing else
    found = {key: (s["name"], key_of(by_id[s["parent_id"]]) if s["parent_id"] else None) for key, s in by_key.items()}
    assert found == expected_tree(events)
    # the run: the agent Phoenix shows, with the session's facts and the census the run wrote
    started, ended, closed = events[0], next(e for e in events if e["event"] == "session.ended"), events[-1]
    root = by_key[("run",)]
    a = root["attributes"]
    assert root["span_kind"] == "AGENT"
    assert (a["gen_ai.operation.name"], a["gen_ai.agent.name"]) == ("invoke_agent", started["adapter"])
    assert a.get("gen_ai.provider.name") == PROVIDER[started["adapter"]]
    assert a["gen_ai.request.model"] == started["model"] and a["gen_ai.conversation.id"] == started["session_id"]
    assert (a["metaharness.run.id"], a["metaharness.close_reason"]) == (started["run"], closed["reason"])
    assert a["metaharness.harness.version"] == started["harness_version"]
    assert {k: a[f"metaharness.census.{k}"] for k in ("allowed", "denied", "replaced", "abstained")} == {
        k: ended["census"][k] for k in ("allowed", "denied", "replaced", "abstained")}
    # every call: a tool span with the decision the stream recorded; a refusal is a guardrail event
    decided = {e["call_id"]: e for e in events if e["event"] == "tool.decided"}
    digests, digest = {}, None  # each call under the frame last entered (a step's, or a turn's)
    for e in events:
        digest = e.get("frame_digest") or digest if e["event"] in ("step.entered", "turn.started") else digest
        if e["event"] == "tool.requested" and digest:
            digests[e["call_id"]] = digest
    for e in (e for e in events if e["event"] == "tool.requested"):
        span = by_key[("tool", e["call_id"])]
        a = span["attributes"]
        assert span["span_kind"] == "TOOL"
        assert (a["gen_ai.operation.name"], a["gen_ai.tool.name"], a["metaharness.seam"]) == (
            "execute_tool", e["name"], e["seam"])
        d = decided.get(e["call_id"])
        assert (a.get("metaharness.decision"), a.get("metaharness.decided_by")) == (
            (d["decision"]["decision"], d["decided_by"]) if d else (None, None))
        assert a.get("metaharness.latency_ms") == (d or {}).get("latency_ms")
        assert a.get("metaharness.frame_digest") == digests.get(e["call_id"])
        denied = d is not None and d["decision"]["decision"] == "deny"
        assert [ev["name"] for ev in span["events"]] == (["guardrail"] if denied else [])
        if denied:
            assert (span["status_code"], span["status_message"]) == ("ERROR", f"refused by {d['decided_by']}")
            assert span["events"][0]["attributes"]["metaharness.reason"] == d["decision"]["reason"]
            assert a["metaharness.reason"] == d["decision"]["reason"]
        assert "gen_ai.tool.call.arguments" not in a  # only with --content
    # each turn's tokens are the usage the stream reported inside it
    turn = None
    tokens: dict[tuple, int] = {}
    for e in events:
        turn = ("turn", e["turn"]) if e["event"] == "turn.started" else None if e["event"] == "turn.ended" else turn
        if e["event"] == "usage" and turn and e["usage"].get("input_tokens") is not None:
            tokens[turn] = tokens.get(turn, 0) + e["usage"]["input_tokens"]
    assert {k: s["attributes"]["gen_ai.usage.input_tokens"] for k, s in by_key.items()
            if k[0] == "turn" and "gen_ai.usage.input_tokens" in s["attributes"]} == tokens
    # times: the run starts at the stream's first stamp; every span lies within its parent
    stamps = [when(e["at"]) for e in events if e.get("at")]
    if stamps and live:
        assert when(root["start_time"]) <= stamps[0]
    elif stamps:
        assert when(root["start_time"]) == stamps[0]
    for span in spans:
        assert when(span["start_time"]) <= when(span["end_time"])
        if span["parent_id"]:
            parent = by_id[span["parent_id"]]
            assert when(parent["start_time"]) <= when(span["start_time"])
            assert when(span["end_time"]) <= when(parent["end_time"])
    return by_key


@pytest.fixture(scope="module")
def oharness_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("oharness")
    return run_oharness(root, EXAMPLES / "same-task.scenario.json", "--frame", str(EXAMPLES / "same-task.frame.json"))


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_of_each_harness_is_its_span_tree_in_phoenix(kind, phoenix, oharness_run):
    source = oharness_run if kind == "oharness" else RECORDED[kind]
    events = lines_of(source)
    assert events[0]["adapter"] == kind
    project = f"run-{kind}"
    export(phoenix, source, project)
    spans = phoenix.wait_for_spans(project, len(expected_tree(events)))
    by_key = check_trace(spans, events)
    assert sum(s["attributes"].get("metaharness.decision") == "deny" for s in spans) == 1  # the shell call, refused
    assert any(k[0] == "step" for k in by_key)  # each of these ran one step, under its frame


def test_a_workflow_run_is_its_steps_in_phoenix_with_content_when_asked(tmp_path, phoenix):
    run = run_bugfix_workflow(tmp_path)
    (source,) = [run / "events.jsonl"]
    events = lines_of(source)
    export(phoenix, run, "workflow", "--content")
    spans = phoenix.wait_for_spans("workflow", len(expected_tree(events)))
    by_key = check_trace([dict(s, attributes={k: v for k, v in s["attributes"].items()
                                              if k != "gen_ai.tool.call.arguments"}) for s in spans], events)
    steps = sorted((k for k in by_key if k[0] == "step"), key=lambda k: k[1])
    entered = [e for e in events if e["event"] == "step.entered"]
    assert [by_key[k]["attributes"]["metaharness.step.state"] for k in steps] == [e["step"]["state"] for e in entered] \
        == ["reproduce", "fix", "review", "fix", "review"]
    for key, e in zip(steps, entered):
        a = by_key[key]["attributes"]
        assert (a["metaharness.step.outcome"], a["metaharness.frame_digest"]) == ("completed", e["frame_digest"])
        assert a["metaharness.step.workflow"] == e["step"]["workflow"] and a["metaharness.step.attempt"] == e["step"][
            "attempt"]
    # --content: each call's arguments and result as the stream holds them
    results = {e["call_id"]: e for e in events if e["event"] == "tool.result"}
    for e in (e for e in events if e["event"] == "tool.requested"):
        a = {s["attributes"]["gen_ai.tool.call.id"]: s["attributes"] for s in spans
             if "gen_ai.tool.call.id" in s["attributes"]}[e["call_id"]]
        assert json.loads(a["gen_ai.tool.call.arguments"]) == e["input"]
        if e["call_id"] in results and results[e["call_id"]].get("content") is not None:
            content = results[e["call_id"]]["content"]
            assert a["gen_ai.tool.call.result"] == (content if isinstance(content, str) else json.dumps(
                content, sort_keys=True))


def test_the_trace_in_phoenixs_ui(phoenix, chromium):
    """Phoenix's own page for the Claude Code run's trace shows its span tree (screenshot for the guide)."""
    events = lines_of(RECORDED["claude"])
    project = "ui-claude"
    export(phoenix, RECORDED["claude"], project)
    spans = phoenix.wait_for_spans(project, len(expected_tree(events)))
    check_trace(spans, events)
    names = sorted({s["name"] for s in spans})
    page = chromium.new_page(viewport={"width": 1400, "height": 820})
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(phoenix.trace_url(project, spans[0]["context"]["trace_id"]))
    for name in names:
        page.get_by_text(name, exact=True).first.wait_for(state="visible", timeout=30_000)
    # the refused call opened: its decision and the frame's reason on Phoenix's span page
    page.get_by_text("execute_tool Bash", exact=True).first.click()
    page.get_by_text("refused by frame").first.wait_for(state="visible", timeout=15_000)
    SCREENSHOT.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT))
    if os.environ.get("METAHARNESS_UPDATE_SCREENSHOTS") == "1":
        GUIDE_IMAGE.parent.mkdir(exist_ok=True)
        GUIDE_IMAGE.write_bytes(SCREENSHOT.read_bytes())
    outside = [url for url in requests if not url.startswith((phoenix.url, "data:", "blob:"))]
    assert outside == []  # Phoenix's page fetched nothing from anywhere else
    page.close()
