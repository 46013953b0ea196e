"""Property: nothing burns a workflow run. A scripted workflow stopped at any step boundary or
mid-step — by SIGINT, by SIGTERM, or by its harness dying — and then resumed with no option
at all (the ledger keeps the run options, the scenario continues where the ledger left it)
ends exactly as an uninterrupted run does: the same workspace, the same established lines,
the same verdicts and the same outcome.

The stop points are enumerated (every boundary and the middle of every step of a three-node
run with a retry), each taken by one of the three kinds in turn, so every kind meets both a
boundary and a mid-step; a slow model answer at each point keeps the stop where it is aimed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from workflow_support import METAHARNESS, Case, cli, write

FLOW = '''start = "a"
[nodes.a]
prompt = "Write a.md."
operations = ["file.write"]
handoff = { kind = "artifact", path = "a.md" }
establishes = ["a.md holds the plan"]
next = ["b"]
[nodes.b]
prompt = "Write b.md saying good."
operations = ["file.write"]
check = { command = "grep -q good b.md", name = "b-good" }
max_attempts = 2
establishes = ["b.md is good"]
next = ["c"]
[nodes.c]
prompt = "Write c.md."
operations = ["file.write"]
handoff = { kind = "artifact", path = "c.md" }
'''
SLOW = 200  # ms: each step's answers wait this long, so a stop aimed at a point lands inside it


def _turns() -> list[dict]:
    def step(path: str, content: str, text: str) -> list[dict]:
        return [{"calls": [write(path, content)], "delay_ms": SLOW}, {"text": text, "delay_ms": SLOW}]
    return [*step("a.md", "plan\n", "a done"), *step("b.md", "bad\n", "b tried"),
            *step("b.md", "good\n", "b done"), *step("c.md", "end\n", "c done")]


# (what to wait for, how many): mid-step = after the step's write came back; boundary = after a step ended.
POINTS = [("tool.result", 1), ("step.ended", 1), ("tool.result", 2), ("step.ended", 2), ("tool.result", 3),
          ("step.ended", 3), ("tool.result", 4)]
KINDS = ["sigint", "sigterm", "harness-death"]
CASES = [(point, KINDS[i % 3]) for i, point in enumerate(POINTS)]


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            break  # a line being written
    return out


def _reached(case: Case, point: tuple[str, int]) -> bool:
    what, count = point
    if what == "step.ended":
        return sum(r["record"] == "step.ended" for r in _lines(case.out / "workflow.jsonl")) >= count
    return sum(e.get("event") == what for e in _lines(case.out / "events.jsonl")) >= count


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def _kill_harness(host: int) -> None:
    for pid in _descendants(host):
        try:
            if b"--stdio" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _outcome(case: Case) -> dict:
    ended = [r for r in case.ledger() if r["record"] == "step.ended"]
    verdicts = [(r["step"]["node"], r["step"]["attempt"], r["passed"], r["failure"],
                 r["check"]["exit"] if r["check"] else None)
                for r in case.ledger() if r["record"] == "step.verdict"
                if any(e["step"] == r["step"] for e in ended)]  # the verdicts of the steps that ended
    return {
        "workspace": {p.name: p.read_text() for p in sorted(case.work.iterdir()) if p.is_file()},
        "steps": [(r["step"]["node"], r["step"]["attempt"], r["outcome"], r["reason"]) for r in ended],
        "established": [[(p["text"], p["source"]) for p in r["established"]] for r in ended],
        "verdicts": verdicts,
        "last_prior": [(p.text, p.source) for p in case.frames()[-1].prior],
        "ended": [(r["outcome"], r["reason_name"]) for r in case.ledger() if r["record"] == "workflow.ended"],
    }


def _start(case: Case) -> list[str]:
    return [str(METAHARNESS), "workflow", "run", str(case.file), "--harness", "oharness", "--out", str(case.out),
            "--cwd", str(case.work), "--script", str(case.script), "-p", "three files"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    case = Case(tmp_path_factory.mktemp("whole"), FLOW, *_turns())
    done = cli(_start(case)[2:], cwd=case.root)
    assert done.returncode == 0, done.stdout + done.stderr
    return _outcome(case)


@pytest.mark.parametrize("point,kind", CASES, ids=[f"{k}-after-{p[0]}-{p[1]}" for p, k in CASES])
def test_a_stopped_run_resumes_to_the_uninterrupted_end(tmp_path, uninterrupted, point, kind):
    case = Case(tmp_path, FLOW, *_turns())
    env = dict(os.environ, METAHARNESS_SCRATCH_DIR=str(tmp_path / "scratch"))
    host = subprocess.Popen(_start(case), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=str(tmp_path))
    try:
        deadline = time.monotonic() + 60
        while not _reached(case, point):
            assert host.poll() is None, host.communicate()
            assert time.monotonic() < deadline, "the stop point never came"
            time.sleep(0.02)
        if kind == "harness-death":
            _kill_harness(host.pid)
        else:
            host.send_signal(signal.SIGINT if kind == "sigint" else signal.SIGTERM)
        out, err = host.communicate(timeout=60)
    finally:
        if host.poll() is None:
            host.kill()
    assert host.returncode == 3, out + err  # stopped unfinished, resumable
    assert case.records("workflow.ended") == []
    # resumed with no option at all: harness, script, workspace, task and budgets come from the ledger
    done = cli(["resume", str(case.out)], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _outcome(case) == uninterrupted
