"""`--otel` into a real Arize Phoenix (the `phoenix` fixture, tests/phoenix_server.py): a run, a
workflow and a batch send their spans live, as they go, and Phoenix holds the span tree each
event stream says, read back through its REST API — batch → cell → invoke_agent → (workflow.step)
→ turn → execute_tool, and workflow → invoke_agent → workflow.step → turn → execute_tool — with
names, parent links, the `metaharness.*` decisions and one span per node of every stream
(tests/export/test_phoenix.py's `check_trace`, the same checks `export otel` passes), nothing
lost when the processes exit, and all spans of a workflow or a batch in one trace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import EXAMPLES, METAHARNESS, env, run_bugfix_workflow, run_oharness
from .test_phoenix import check_trace, expected_tree, lines_of, when


@pytest.fixture
def project(phoenix, monkeypatch, request):
    """A Phoenix project of the test's own, named in the standard OTEL_RESOURCE_ATTRIBUTES of every
    process it starts; nothing else of the caller's OTEL_* or TRACEPARENT."""
    for key in [k for k in os.environ if k.startswith("OTEL_") or k in ("TRACEPARENT", "TRACESTATE")]:
        monkeypatch.delenv(key)
    name = f"live-{request.node.name.removeprefix('test_')[:40]}"
    for key, value in phoenix.project_env(name).items():
        monkeypatch.setenv(key, value)
    return name


def descendants(spans: list[dict[str, Any]], top: dict[str, Any]) -> list[dict[str, Any]]:
    """TOP's subtree below it, TOP itself as a root (its parent link cut), for `check_trace`."""
    below: dict[str | None, list[dict[str, Any]]] = {}
    for span in spans:
        below.setdefault(span["parent_id"], []).append(span)
    out, todo = [dict(top, parent_id=None)], [top["context"]["span_id"]]
    while todo:
        children = below.get(todo.pop(), [])
        out.extend(children)
        todo.extend(s["context"]["span_id"] for s in children)
    return out


def children_of(spans: list[dict[str, Any]], parent: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in spans if s["parent_id"] == parent["context"]["span_id"]]


def within(child: dict[str, Any], parent: dict[str, Any]) -> None:
    assert when(parent["start_time"]) <= when(child["start_time"]) <= when(child["end_time"]) <= when(
        parent["end_time"])


def no_drops(events: list[dict[str, Any]]) -> None:
    assert [e for e in events if e["event"] == "warning" and e["code"] == "OTEL_SPANS_DROPPED"] == []


def test_a_live_run_is_its_span_tree_in_phoenix(tmp_path, phoenix, project):
    source = run_oharness(tmp_path, EXAMPLES / "same-task.scenario.json", "--frame",
                          str(EXAMPLES / "same-task.frame.json"), "--otel", phoenix.otlp_endpoint)
    events = lines_of(source)
    no_drops(events)
    spans = phoenix.wait_for_spans(project, len(expected_tree(events)))
    assert len(spans) == len(expected_tree(events)) == 1 + 1 + 1 + 3  # run, step, turn, calls
    by_key = check_trace(spans, events, live=True)
    denied = [s for s in spans if s["attributes"].get("metaharness.decision") == "deny"]
    assert [s["name"] for s in denied] == ["execute_tool bash"]  # the frame's refusal, a guardrail event
    assert by_key[("step", 1)]["attributes"]["metaharness.step.state"] == "write-notes"


def test_a_live_workflow_is_workflow_run_steps_turns_calls_in_phoenix(tmp_path, phoenix, project):
    out = run_bugfix_workflow(tmp_path, "--otel", phoenix.otlp_endpoint)
    events = lines_of(out / "events.jsonl")
    no_drops(events)
    expected = expected_tree(events)
    spans = phoenix.wait_for_spans(project, 1 + len(expected))
    assert len(spans) == 1 + len(expected)
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    (top,) = [s for s in spans if s["parent_id"] is None]
    a = top["attributes"]
    assert top["name"] == "workflow bugfix"
    assert (a["metaharness.workflow.id"], a["metaharness.workflow.outcome"], a["gen_ai.agent.name"]) == (
        "bugfix", "completed", "oharness")
    assert a["metaharness.workflow.session"] == 1
    (run,) = children_of(spans, top)
    within(run, top)
    assert run["name"] == "invoke_agent oharness" and run["attributes"]["metaharness.run.id"] == events[0]["run"]
    by_key = check_trace(descendants(spans, run), events, live=True)
    steps = sorted((k for k in by_key if k[0] == "step"), key=lambda k: k[1])
    assert [by_key[k]["attributes"]["metaharness.step.state"] for k in steps] == [
        "reproduce", "fix", "review", "fix", "review"]
    assert all(by_key[k]["parent_id"] is not None for k in steps)
    # every turn under a step, every call under a turn: the whole chain, in Phoenix's own links
    by_id = {s["context"]["span_id"]: s for s in spans}
    for key, span in by_key.items():
        if key[0] == "tool":
            turn = by_id[span["parent_id"]]
            step = by_id[turn["parent_id"]]
            assert (turn["name"].split()[0], step["name"].split()[0]) == ("turn", "workflow.step")
            assert by_id[step["parent_id"]]["context"]["span_id"] == run["context"]["span_id"]


def batch_plan(root: Path) -> Path:
    """Two tasks on oharness: the same task under its frame (a call refused), and a shell task
    with no frame (every call allowed by the default policy)."""
    for name in ("same-task.scenario.json", "same-task.frame.json"):
        shutil.copy(EXAMPLES / name, root / name)
    (root / "shell.scenario.json").write_text(json.dumps({"format": "metaharness.scenario/1", "turns": [
        {"text": "Two commands.", "calls": [{"op": "shell", "input": {"command": "echo one > one.txt"}},
                                            {"op": "shell", "input": {"command": "echo two > two.txt"}}]},
        {"text": "done"}]}))
    plan = root / "plan.toml"
    plan.write_text('format = "metaharness.batch/1"\n\n'
                    '[[tasks]]\nid = "same-task"\nprompt = "do the task"\nscript = "same-task.scenario.json"\n'
                    'frame = "same-task.frame.json"\n\n'
                    '[[tasks]]\nid = "shell"\nprompt = "run two commands"\nscript = "shell.scenario.json"\n\n'
                    '[[harnesses]]\nkind = "oharness"\n')
    return plan


def test_a_live_batch_is_batch_cells_runs_in_one_trace_in_phoenix(tmp_path, phoenix, project):
    plan = batch_plan(tmp_path)
    out = tmp_path / "out"
    done = subprocess.run([*METAHARNESS, "batch", "run", str(plan), "--out", str(out), "--jobs", "2",
                           "--backend", "local", "--otel", phoenix.otlp_endpoint],
                          capture_output=True, text=True, timeout=300, env=env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OpenTelemetry collector" not in done.stderr
    streams = {}
    for path in out.rglob("events.jsonl"):
        events = lines_of(path)
        no_drops(events)
        streams[events[0]["run"]] = (path, events)
    assert len(streams) == 2
    nodes = sum(len(expected_tree(events)) for _path, events in streams.values())
    spans = phoenix.wait_for_spans(project, 1 + 2 + nodes)
    assert len(spans) == 1 + 2 + nodes
    assert len({s["context"]["trace_id"] for s in spans}) == 1  # the batch, its cells and their runs: one trace
    (top,) = [s for s in spans if s["parent_id"] is None]
    a = top["attributes"]
    assert top["name"] == "batch out"
    assert (a["metaharness.batch.cells"], a["metaharness.batch.done"], a["metaharness.batch.out"]) == (
        2, 2, str(out))
    cells = children_of(spans, top)
    assert sorted(c["name"] for c in cells) == ["cell same-task oharness #1", "cell shell oharness #1"]
    denied = {}
    for cell in cells:
        within(cell, top)
        c = cell["attributes"]
        assert (c["metaharness.cell.harness"], c["gen_ai.agent.name"], c["metaharness.cell.status"]) == (
            "oharness", "oharness", "ran")
        assert (c["metaharness.cell.repeat"], c["metaharness.cell.attempt"]) == (1, 1)
        (run,) = children_of(spans, cell)  # each cell's run under its own cell
        within(run, cell)
        path, events = streams[run["attributes"]["metaharness.run.id"]]
        assert c["metaharness.cell.task"] in path.relative_to(out).parts[0]  # the cell's own stream
        by_key = check_trace(descendants(spans, run), events, live=True)
        denied[c["metaharness.cell.task"]] = sorted(
            s["name"] for s in by_key.values() if s["attributes"].get("metaharness.decision") == "deny")
        # batch → cell → invoke_agent → (the frame's step) → turn → execute_tool
        by_id = {s["context"]["span_id"]: s for s in spans}
        for key, span in by_key.items():
            if key[0] == "tool":
                chain, link = [], span
                while link["parent_id"] is not None:
                    link = by_id[link["parent_id"]]
                    chain.append(link["name"].split()[0])
                assert chain == (["turn", "workflow.step", "invoke_agent", "cell", "batch"] if
                                 c["metaharness.cell.task"] == "same-task" else ["turn", "invoke_agent", "cell", "batch"])
    assert denied == {"same-task": ["execute_tool bash"], "shell": []}
