"""Shared helpers for the export tests: real streams made on oharness (offline, scripted),
Harbor's own ATIF validation, and the round-trip properties every exported run must keep."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from metaharness.export.atif import trajectory
from metaharness.export.source import read_streams

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
METAHARNESS = [sys.executable, "-m", "metaharness"]


def env(root: Path) -> dict[str, str]:
    scratch = root / "scratch"
    scratch.mkdir(exist_ok=True, mode=0o700)
    return dict(os.environ, METAHARNESS_SCRATCH_DIR=str(scratch))


def run_oharness(root: Path, scenario: Path, *args: str, answers: dict[str, dict] | None = None) -> Path:
    """`metaharness run oharness` on a scenario; its stdout saved as events.jsonl. With
    `answers` (a command → decision), every call asked for is answered on stdin."""
    work = root / "work"
    work.mkdir(parents=True, exist_ok=True)
    command = [*METAHARNESS, "run", "oharness", "--script", str(scenario), "-p", "do the task", "--cwd", str(work), *args]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env(root))
    lines: list[bytes] = []
    assert child.stdout is not None and child.stdin is not None
    for raw in child.stdout:
        lines.append(raw)
        event = json.loads(raw)
        if answers is not None and event["event"] == "tool.requested" and event["decision_required"]:
            decision = answers[event["input"]["command"]]
            child.stdin.write(json.dumps({"format": "metaharness.command/1", "id": f"c-{event['call_id']}",
                                          "command": "tool.decide", "call_id": event["call_id"],
                                          "decision": decision}).encode() + b"\n")
            child.stdin.flush()
    child.stdin.close()
    stderr = child.stderr.read().decode() if child.stderr else ""
    child.wait(timeout=60)
    out = root / "events.jsonl"
    out.write_bytes(b"".join(lines))
    assert lines and json.loads(lines[-1])["event"] == "stream.closed", stderr[-2000:]
    return out


def validated(doc: dict[str, Any]):
    """The trajectory through Harbor's validator (every error listed) and its model."""
    # Harbor's own ATIF models and validator (harbor==0.25.0; installed with --no-deps, see the
    # Makefile: its ATIF package imports only pydantic). A missing harbor fails these tests.
    from harbor.models.trajectories import Trajectory
    from harbor.utils.trajectory_validator import TrajectoryValidator

    validator = TrajectoryValidator()
    assert validator.validate(json.loads(json.dumps(doc))), validator.errors
    return Trajectory.model_validate(doc)


def events_of(source: Path) -> list[dict[str, Any]]:
    files = [source] if source.is_file() else [Path(s.path) for s in read_streams(str(source))]
    return [json.loads(line) for f in files for line in f.read_bytes().splitlines()]


def _census(calls: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"allowed": 0, "denied": 0, "replaced": 0, "abstained": 0, "by_seam": {}, "by_decider": {}}
    bucket = {"allow": "allowed", "deny": "denied", "replace": "replaced", "abstain": "abstained"}
    for call in calls:
        mine = call["extra"]["metaharness"]
        if "decision" not in mine:
            continue
        out[bucket[mine["decision"]]] += 1
        out["by_seam"][mine["seam"]] = out["by_seam"].get(mine["seam"], 0) + 1
        out["by_decider"][mine["decided_by"]] = out["by_decider"].get(mine["decided_by"], 0) + 1
    return out


def check_round_trip(source: Path) -> dict[str, Any]:
    """Export SOURCE, validate it with Harbor, and check it against the stream it came from:
    every call once with its decision, ids as on the wire, results on their calls, the census
    the run wrote, refused calls shown refused. Returns the trajectory."""
    doc = trajectory(read_streams(str(source)))
    validated(doc)
    events = events_of(source)
    calls = [c for s in doc["steps"] for c in s.get("tool_calls") or []]
    # ids stable: the calls are the stream's, in its order, each once
    assert [c["tool_call_id"] for c in calls] == [e["call_id"] for e in events if e["event"] == "tool.requested"]
    assert doc["trajectory_id"] == events[0]["run"]
    by_id = {c["tool_call_id"]: c for c in calls}
    decided = [e for e in events if e["event"] == "tool.decided"]
    assert len({e["call_id"] for e in decided}) == len(decided)
    for e in decided:  # every tool.decided exactly once, on its call
        mine = by_id[e["call_id"]]["extra"]["metaharness"]
        assert (mine["decision"], mine["decided_by"], mine["seam"]) == (
            e["decision"]["decision"], e["decided_by"], e["seam"])
        assert mine["ran"] is (e["decision"]["decision"] != "deny")
        if e["decision"]["decision"] == "deny":
            assert mine["reason"] == e["decision"]["reason"]
        if e["decision"]["decision"] == "replace":
            assert mine["replaced_input"] == e["decision"]["input"]
    undecided = [c["tool_call_id"] for c in calls if "decision" not in c["extra"]["metaharness"]]
    assert undecided == doc["extra"]["metaharness"].get("undecided_calls", [])
    # counts match the census, the one the run wrote in session.ended
    census = _census(calls)
    assert census == doc["extra"]["metaharness"]["census"]
    written = [e["census"] for e in events if e["event"] == "session.ended"]
    for key in ("allowed", "denied", "replaced", "abstained"):
        assert census[key] == sum(c[key] for c in written)
    # every result on the step of its call; a refused call's observation says refused
    for step in doc["steps"]:
        own = {c["tool_call_id"] for c in step.get("tool_calls") or []}
        for result in (step.get("observation") or {}).get("results", []):
            call_id = result["extra"]["metaharness"]["call_id"]
            if call_id in by_id:
                assert call_id in own
                refused = by_id[call_id]["extra"]["metaharness"].get("decision") == "deny"
                assert (result["extra"]["metaharness"]["status"] == "refused") is refused
    results = [e for e in events if e["event"] == "tool.result"]
    shown = [r for s in doc["steps"] for r in (s.get("observation") or {}).get("results", [])
             if r["extra"]["metaharness"].get("from") != "tool.decided"]
    assert len(shown) == len(results)
    for call_id, call in by_id.items():
        if call["extra"]["metaharness"].get("decision") == "deny":
            assert any(r.get("source_call_id") == call_id for s in doc["steps"]
                       for r in (s.get("observation") or {}).get("results", []))
    # the export is a function of the stream: the same bytes again
    assert trajectory(read_streams(str(source))) == doc
    return doc


def run_bugfix_workflow(root: Path, *args: str) -> Path:
    """The bundled bugfix workflow on scripted oharness in a copy of its workspace (ARGS added
    to `workflow run`); its run directory."""
    work = root / "work"
    shutil.copytree(EXAMPLES / "bugfix" / "workspace", work)
    out = root / "run"
    done = subprocess.run([*METAHARNESS, "workflow", "run", str(EXAMPLES / "bugfix" / "bugfix.workflow.toml"),
                           "--harness", "oharness", "--script", str(EXAMPLES / "bugfix" / "bugfix.scenario.json"),
                           "--cwd", str(work), "--out", str(out), "-p", "add(2, 3) should be 5", *args],
                          capture_output=True, text=True, timeout=120, env=env(root))
    assert done.returncode == 0, done.stdout + done.stderr
    return out
