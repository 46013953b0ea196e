"""The local pool on real oharness runs: verdicts, overlap, isolation, budget, timeout, retries."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from metaharness.batch import BatchOptions, load_plan, run_batch
from metaharness.batch.preflight import PreflightRefused
from metaharness.batch.results import CellResult
from metaharness.protocol.stream import check_stream

from .conftest import REPO, last_by_cell, results_of, shell, write_plan, write_scenario


def run(plan_path: str, out: Path, admitted: bool = False, **options) -> list[CellResult]:
    async def go():
        return [r async for r in run_batch(load_plan(plan_path), str(out), admitted=admitted, **options)]

    return asyncio.run(go())


def test_a_suite_of_tasks_on_two_harnesses(suite, monkeypatch):
    monkeypatch.setenv("REAL_HOME", os.path.expanduser("~"))
    tmp = suite["tmp"]
    plan = write_plan(tmp / "plan.json", suite["tasks"], suite["harnesses"], repeats=2)
    out = tmp / "out"
    yielded = run(plan, out, jobs=2, keep_workspaces=True)
    assert len(yielded) == 12
    cells = last_by_cell(out)
    assert len(cells) == 12 and len(results_of(out)) == 12
    for (task, harness, repeat), line in cells.items():
        events = out / task / harness / str(repeat) / "events.jsonl"
        assert check_stream(events.read_bytes()).status == "complete", (task, harness, repeat)
        assert line["stream"] == "complete" and line["exit_code"] == 0 and line["attempts"] == 1
        assert (out / task / harness / str(repeat) / "check.txt").exists()
    # the frame denies the shell call under both deciders; the failing task's check fails everywhere
    notes = cells[("notes", "oh-frame", 1)]
    assert notes["passed"] and notes["check"] == "pass"
    assert notes["calls"]["requested"] == 3 and notes["calls"]["denied"] == 1
    assert notes["calls"]["by_decider"] == {"frame": {"allowed": 2, "denied": 1}}
    policy = cells[("notes", "oh-policy", 1)]
    assert policy["passed"] and policy["calls"]["denied"] == 1
    assert policy["calls"]["by_decider"]["policy"] == {"allowed": 2}
    for harness in ("oh-frame", "oh-policy"):
        for repeat in (1, 2):
            failed = cells[("fails", harness, repeat)]
            assert failed["check"] == "fail" and failed["check_exit_code"] not in (0, None) and not failed["passed"]
            assert failed["close_reason"] == "completed" and failed["attempts"] == 1  # a verdict, never retried
    # isolation: every cell saw only the template, with a HOME of its own; the template is untouched
    for repeat in (1, 2):
        assert cells[("isolate", "oh-policy", repeat)]["passed"]
    homes = {(out / "isolate" / "oh-policy" / str(r) / "workspace" / "home.txt").read_text() for r in (1, 2)}
    assert len(homes) == 2 and not any(h.strip() == os.path.expanduser("~") for h in homes)
    assert sorted(os.listdir(suite["template"])) == ["README.txt"]
    assert not (out / ".scratch").exists()
    # runs really overlapped in time (two at a time)
    spans = sorted((c["started_at"], c["started_at"] + c["wall_ms"] / 1000) for c in cells.values())
    assert any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:])), spans


def test_a_run_refused_at_start_is_recorded_with_its_refusal_and_not_retried(suite, tmp_path):
    notes = suite["tasks"][0]
    plan = write_plan(tmp_path / "plan.json", [notes], [{"kind": "oharness", "decisions": "observe"}])
    with pytest.raises(PreflightRefused) as refused:  # run_batch refuses it before any cell runs
        run(plan, tmp_path / "out", jobs=1)
    assert refused.value.sentences[0].startswith("task 'notes' on harness 'oharness': ObserveWithFrame: ")
    assert not (tmp_path / "out").exists()
    # a cell whose run refuses all the same (its start checks not made first: `admitted`) is a result
    [result] = run(plan, tmp_path / "out", admitted=True, jobs=1, retries=2)
    assert result.exit_code == 2 and result.attempts == 1 and not result.passed and result.infra is None
    assert result.refusal.startswith("ObserveWithFrame: ")
    assert result.stream == "complete" and result.check == "none"


def _slow_plan(tmp: Path, count: int, delay_ms: int = 300, **task_extra) -> str:
    script = write_scenario(tmp / "slow.json", {"text": "thinking", "delay_ms": delay_ms}, {"text": "done"})
    tasks = [{"id": f"t{i}", "prompt": "go", "script": script, **task_extra} for i in range(count)]
    return write_plan(tmp / "slow-plan.json", tasks, [{"kind": "oharness", "decisions": "observe"}])


def test_max_runs_stops_scheduling_and_records_skipped_cells(tmp_path):
    out = tmp_path / "out"
    yielded = run(_slow_plan(tmp_path, 5), out, jobs=2, max_runs=3)
    cells = last_by_cell(out)
    ran = [c for c in cells.values() if c["status"] == "ran"]
    skipped = [c for c in cells.values() if c["status"] == "skipped"]
    assert len(ran) == 3 and all(c["passed"] for c in ran)
    assert len(skipped) == 2 and all(c["skipped"] == "budget" for c in skipped)
    assert {c["task"] for c in skipped} == {"t3", "t4"}  # plan order: the last cells are the unscheduled ones
    assert len(yielded) == 5
    assert not (out / "t3").exists()


def test_a_cell_over_its_time_limit_is_halted_and_its_stream_still_closes(tmp_path):
    out = tmp_path / "out"
    script = write_scenario(tmp_path / "stuck.json", {"text": "thinking", "delay_ms": 60000}, {"text": "done"})
    plan = write_plan(tmp_path / "plan.json", [{"id": "stuck", "prompt": "go", "script": script, "timeout_s": 2,
                                               "check": {"command": "true"}}],
                      [{"kind": "oharness", "decisions": "observe"}])
    [result] = run(plan, out, jobs=1, retries=2)
    assert result.timed_out and not result.passed and result.attempts == 1  # a timeout is not retried
    assert result.stream == "complete" and result.close_reason == "steer-halt"
    assert result.check == "none"  # a halted run is not checked
    assert result.wall_ms < 15000
    data = (out / "stuck" / "oharness" / "1" / "events.jsonl").read_bytes()
    assert data.rstrip().endswith(b"}") and b'"event":"stream.closed"' in data.splitlines()[-1]


def _killing_plan(tmp: Path, marker: Path, monkeypatch) -> str:
    # The first attempt's shell call kills the harness (oharness, the shell's parent) with SIGKILL.
    # Confined, oharness is its PID namespace's init, which ignores a SIGKILL from inside: these
    # tests are about a crashed harness, so they run it unconfined.
    monkeypatch.setenv("METAHARNESS_NAMESPACE", "off")
    command = f"if [ ! -e {marker} ]; then touch {marker}; kill -9 $PPID; fi; echo ok > done.txt"
    script = write_scenario(tmp / "kill.json", {"calls": [shell(command)]}, {"text": "done"})
    return write_plan(tmp / "plan.json", [{"id": "crash", "prompt": "go", "script": script,
                                           "check": {"command": "test -e done.txt"}}],
                      [{"kind": "oharness", "decisions": "observe"}])


def test_a_cell_whose_harness_is_killed_is_retried_and_recorded(tmp_path, monkeypatch):
    out = tmp_path / "out"
    [result] = run(_killing_plan(tmp_path, tmp_path / "killed-once", monkeypatch), out, jobs=1, retries=1)
    assert result.attempts == 2 and result.passed and result.infra is None
    assert result.retried_for == ["the harness ended without a terminal record (exit 3)"]
    assert last_by_cell(out)[("crash", "oharness", 1)]["retried_for"] == result.retried_for


def test_without_retries_the_infrastructure_failure_is_the_result(tmp_path, monkeypatch):
    out = tmp_path / "out"
    [result] = run(_killing_plan(tmp_path, tmp_path / "killed-once", monkeypatch), out, jobs=1)
    assert result.attempts == 1 and not result.passed
    assert result.exit_code == 3 and result.stream == "complete" and result.close_reason == "error"
    assert result.infra == "the harness ended without a terminal record (exit 3)"
    # the shell went on after killing its harness, so the check passes: a crashed run still does not
    assert result.check == "pass" and not result.passed


class _FakeBackend:
    """Cells that report a cost without running anything: the budget rule alone under test."""

    def __init__(self, cost: float) -> None:
        self.slots = 1
        self.cost = cost
        self.seen: list[str] = []

    async def execute(self, job):
        self.seen.append(job.task.id)
        os.makedirs(job.out_dir, exist_ok=True)  # a complete stream, as a real cell leaves
        Path(job.out_dir, "events.jsonl").write_bytes((REPO / "tests/view/fixtures/compare_codex.jsonl").read_bytes())
        return CellResult(task=job.task.id, harness=job.harness.name, kind=job.harness.kind, repeat=job.repeat,
                          exit_code=0, close_reason="completed", stream="complete", passed=True,
                          cost_usd=self.cost, attempts=job.attempt)

    def close(self) -> None:
        pass


def test_max_cost_counts_reported_costs_over_the_batch(tmp_path):
    out = tmp_path / "out"
    plan = load_plan(_slow_plan(tmp_path, 6))
    backend = _FakeBackend(1.0)

    async def go():
        return [r async for r in run_batch(plan, str(out), BatchOptions(max_cost_usd=2.5), backend=backend)]

    results = asyncio.run(go())
    assert backend.seen == ["t0", "t1", "t2"]  # the third starts at $2.00 < $2.50; after it $3.00 stops the rest
    assert [r.status for r in results] == ["ran"] * 3 + ["skipped"] * 3
    # a resume keeps the budget over the whole batch: the cost already spent counts
    backend2 = _FakeBackend(1.0)

    async def again():
        return [r async for r in run_batch(plan, str(out), BatchOptions(max_cost_usd=2.5), backend=backend2)]

    assert [r.status for r in asyncio.run(again())] == ["skipped"] * 3 and backend2.seen == []


def test_a_vendor_binary_missing_where_the_cell_runs_is_refused_by_name(tmp_path):
    script = write_scenario(tmp_path / "s.json", {"text": "done"})
    empty = tmp_path / "no-vendor"
    empty.mkdir()
    plan = write_plan(tmp_path / "plan.json", [{"id": "a", "prompt": "go", "script": script}],
                      [{"kind": "codex", "vendor_dir": str(empty), "decisions": "observe"}])
    # (where the start checks ran elsewhere: a worker without the binary the driver found)
    [result] = run(plan, tmp_path / "out", admitted=True, jobs=1, retries=2)
    assert result.refusal is not None and result.refusal.startswith("VendorMissing: "), result
    assert result.exit_code == 2 and result.attempts == 1 and not result.passed


def test_the_live_display_and_the_plain_lines(tmp_path):
    import io

    from rich.console import Console

    from metaharness.batch.progress import Display
    from metaharness.batch.runner import Progress

    done = CellResult(task="notes", harness="claude", kind="claude", repeat=2, exit_code=0, close_reason="completed",
                      stream="complete", check="pass", passed=True, cost_usd=0.25, wall_ms=1500)
    buffer = io.StringIO()
    live = Display(Console(file=buffer, force_terminal=True, width=120), live=True, slots=2)
    progress = Progress(total=4, done=1, passed=1, running={"notes/codex/1"}, cost_usd=0.25, last=done)
    live.update(progress)
    live.close()
    text = buffer.getvalue()
    assert "1/4 done" in text and "notes/codex/1" in text and "$0.2500" in text and "eta" in text
    plain_buffer = io.StringIO()
    plain = Display(Console(file=plain_buffer, force_terminal=False, width=200), live=False, slots=2)
    plain.update(progress)  # nothing: plain output is one line per finished cell
    plain.result(done)
    plain.result(CellResult(task="x", harness="h", kind="oharness", repeat=1, status="skipped", skipped="budget"))
    assert plain_buffer.getvalue().splitlines() == [
        "notes/claude/2: pass (exit 0, closed completed, check pass, 0 denied, cost $0.2500, 1.5 s)",
        "x/h/1: skipped: budget"]


def test_a_check_over_its_time_limit_is_killed_and_fails_the_cell(tmp_path):
    script = write_scenario(tmp_path / "s.json", {"text": "done"})
    plan = write_plan(tmp_path / "plan.json", [{"id": "slow-check", "prompt": "go", "script": script,
                                               "check": {"command": "sleep 60", "timeout_s": 1}}],
                      [{"kind": "oharness", "decisions": "observe"}])
    [result] = run(plan, tmp_path / "out", jobs=1, retries=2)
    assert result.check == "timeout" and result.check_exit_code is None and not result.passed
    assert result.attempts == 1 and result.wall_ms < 20000 and not result.timed_out
    assert "exceeded 1 s" in (tmp_path / "out" / "slow-check" / "oharness" / "1" / "check.txt").read_text()


def test_a_run_option_the_command_refuses_is_a_result_not_a_retry(tmp_path):
    # `metaharness workflow run` takes no --require-command: the cell's command line is refused as usage
    bugfix = REPO / "examples" / "bugfix"
    plan = write_plan(tmp_path / "plan.json", [{"id": "flow", "workflow": str(bugfix / "bugfix.workflow.toml"),
                                               "script": str(bugfix / "bugfix.scenario.json"),
                                               "workspace": str(bugfix / "workspace")}],
                      [{"kind": "oharness", "required_commands": ["halt"]}])
    [result] = run(plan, tmp_path / "out", jobs=1, retries=2)
    assert result.exit_code == 2 and result.attempts == 1 and result.infra is None and not result.passed
    assert result.refusal == "Error: No such option '--require-command'.", result.refusal
    assert result.stream == "missing"
