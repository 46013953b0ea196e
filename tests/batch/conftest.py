"""Helpers for the batch tests: scenario, frame and plan writers, results readers."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from metaharness.protocol.frame import document_bytes, seal

# Ray, when a test starts it, binds every process to 127.0.0.1 and reports nothing anywhere
# (read when ray is first imported, so set before any test module imports it).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

REPO = Path(__file__).resolve().parents[2]
METAHARNESS = [sys.executable, "-m", "metaharness"]


def write_scenario(path: Path, *turns: dict[str, Any]) -> str:
    path.write_text(json.dumps({"format": "metaharness.scenario/1", "turns": list(turns)}))
    return str(path)


def write_frame(path: Path, ops: list[str], state: str = "work") -> str:
    frame = seal({
        "workflow": {"id": "batch-tests", "version": "1"}, "node": {"id": state},
        "step": {"workflow": "batch-tests", "state": state, "index": 1, "attempt": 1},
        "prior": [], "obligations": [], "reaching": [], "next": [], "handoff": {"handoff": "none"},
        "operations": [{"op": op} for op in ops],
    })
    path.write_bytes(document_bytes(frame))
    return str(path)


def shell(command: str) -> dict[str, Any]:
    return {"op": "shell", "input": {"command": command}}


def write_plan(path: Path, tasks: list[dict], harnesses: list[dict], repeats: int = 1, **extra: Any) -> str:
    path.write_text(json.dumps({"format": "metaharness.batch/1", "tasks": tasks, "harnesses": harnesses,
                                "repeats": repeats, **extra}))
    return str(path)


def runs_matching(marker: str) -> list[int]:
    """Pids of the `metaharness run` processes whose command line mentions `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path("/proc", entry, "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[1:4] == [b"-m", b"metaharness", b"run"] and any(marker.encode() in a for a in argv):
                found.append(int(entry))
    return found


def results_of(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]


def last_by_cell(out: Path) -> dict[tuple, dict]:
    found = {}
    for line in results_of(out):
        found[(line["task"], line["harness"], line["repeat"])] = line
    return found


def table(out: Path) -> list[dict]:
    """The results table without its timing fields, sorted by cell."""
    from metaharness.batch.results import TIMING_FIELDS

    rows = []
    for key, line in sorted(last_by_cell(out).items()):
        rows.append({k: v for k, v in line.items() if k not in TIMING_FIELDS})
    return rows


@pytest.fixture
def suite(tmp_path: Path) -> dict[str, Any]:
    return make_suite(tmp_path)


def make_suite(tmp_path: Path) -> dict[str, Any]:
    """A plan of three tasks on oharness under two harness configurations.

    * notes: a frame admits file.write/file.edit; the shell call is denied; check passes;
    * fails: the model writes the wrong content; its check fails;
    * isolate: the shell call records what the workspace held and the HOME it ran with.
    """
    template = tmp_path / "template"
    template.mkdir()
    (template / "README.txt").write_text("the template\n")
    notes = write_scenario(tmp_path / "notes.json",
                           {"calls": [{"op": "file.write", "input": {"path": "notes.txt", "content": "hello"}}]},
                           {"calls": [shell("echo hi > shell.txt")]},
                           {"calls": [{"op": "file.edit", "input": {"path": "notes.txt", "old": "hello", "new": "HELLO"}}]},
                           {"text": "done"})
    fails = write_scenario(tmp_path / "fails.json",
                           {"calls": [{"op": "file.write", "input": {"path": "notes.txt", "content": "wrong"}}]},
                           {"text": "done"})
    isolate = write_scenario(tmp_path / "isolate.json",
                             {"calls": [shell("s=$(ls -A); echo \"$s\" > seen.txt; echo $HOME > home.txt; echo mine > leak.txt")],
                              "delay_ms": 400},
                             {"text": "done"})
    frame = write_frame(tmp_path / "edit.frame.json", ["file.write", "file.edit"])
    tasks = [
        {"id": "notes", "prompt": "write notes", "script": notes, "frame": frame, "workspace": str(template),
         "check": {"command": "grep -qx HELLO notes.txt"}},
        {"id": "fails", "prompt": "write notes", "script": fails, "workspace": str(template),
         "check": {"command": "grep -qx HELLO notes.txt"}},
        {"id": "isolate", "prompt": "look around", "script": isolate, "workspace": str(template),
         "check": {"command": 'test "$(cat seen.txt)" = README.txt && test "$(cat home.txt)" != "$REAL_HOME"'}},
    ]
    harnesses = [{"kind": "oharness", "id": "oh-frame"}, {"kind": "oharness", "id": "oh-policy", "decisions": "policy",
                                                     "policy_mode": "bypass"}]
    return {"tmp": tmp_path, "template": template, "tasks": tasks, "harnesses": harnesses}
