"""A batch across the three harnesses — scripted tasks with frames, a workflow task, a task whose
check fails — on oharness, and on the real Claude Code and Codex binaries driven offline through
the loopback model, inside a loopback-only network namespace when the
machine allows one (as the vendors' own end-to-end tests run)."""

from __future__ import annotations

import os
import subprocess

import pytest

from metaharness.protocol.stream import check_stream

from .conftest import METAHARNESS, REPO, last_by_cell, shell, write_frame, write_plan, write_scenario

VENDOR = REPO / ".vendor" / "node_modules" / ".bin"

pytestmark = pytest.mark.timeout(400)


def _need_vendors() -> None:
    missing = [name for name in ("claude", "codex") if not (VENDOR / name).exists()]
    if missing:
        message = f"the pinned vendor CLIs are missing in {VENDOR} ({', '.join(missing)}); `make vendor` installs them"
        if os.environ.get("METAHARNESS_REQUIRE_VENDOR") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def _namespace() -> bool:
    try:
        probe = subprocess.run(["unshare", "-rn", "sh", "-c", "ip link set lo up"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def batch(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    argv = [*METAHARNESS, "batch", *args]
    if _namespace():  # no way out but 127.0.0.1
        argv = ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *argv]
    return subprocess.run(argv, capture_output=True, timeout=timeout)


def _harnesses() -> list[dict]:
    return [{"kind": "oharness"}, {"kind": "claude", "vendor_dir": str(VENDOR)},
            {"kind": "codex", "vendor_dir": str(VENDOR)}]


def test_a_suite_on_oharness_claude_and_codex(tmp_path):
    _need_vendors()
    template = tmp_path / "template"
    template.mkdir()
    (template / "README.txt").write_text("the template\n")
    notes = write_scenario(tmp_path / "notes.json",
                           {"text": "Writing.", "calls": [{"op": "file.write", "input": {"path": "notes.txt", "content": "hello"}}]},
                           {"text": "Shell.", "calls": [shell("echo hi > shell.txt")]},
                           {"text": "Editing.", "calls": [{"op": "file.edit", "input": {"path": "notes.txt", "old": "hello", "new": "HELLO"}}]},
                           {"text": "done"})
    wrong = write_scenario(tmp_path / "wrong.json",
                           {"text": "Writing.", "calls": [{"op": "file.write", "input": {"path": "notes.txt", "content": "wrong"}}]},
                           {"text": "done"})
    frame = write_frame(tmp_path / "edit.frame.json", ["file.write", "file.edit"])
    check = {"command": "grep -qx HELLO notes.txt && test ! -e shell.txt"}
    tasks = [{"id": "notes", "prompt": "write the notes", "script": notes, "frame": frame, "workspace": str(template),
              "check": check},
             {"id": "wrong", "prompt": "write the notes", "script": wrong, "frame": frame, "workspace": str(template),
              "check": check}]
    bugfix = REPO / "examples" / "bugfix"
    tasks.append({"id": "bugfix", "prompt": "add(2, 3) should be 5", "workflow": str(bugfix / "bugfix.workflow.toml"),
                  "script": str(bugfix / "bugfix.scenario.json"), "workspace": str(bugfix / "workspace"),
                  "check": {"command": "python3 test_calc.py"}})
    plan = write_plan(tmp_path / "plan.json", tasks, _harnesses())
    out = tmp_path / "out"
    done = batch("run", plan, "--out", str(out), "--jobs", "2")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    cells = last_by_cell(out)
    assert len(cells) == 9
    for kind in ("oharness", "claude", "codex"):
        good, bad = cells[("notes", kind, 1)], cells[("wrong", kind, 1)]
        assert good["passed"] and good["check"] == "pass", (kind, good)
        assert good["calls"]["denied"] == 1 and good["calls"]["by_decider"]["frame"]["denied"] == 1, (kind, good)
        assert bad["check"] == "fail" and not bad["passed"] and bad["attempts"] == 1, (kind, bad)
        for task in ("notes", "wrong"):
            data = (out / task / kind / "1" / "events.jsonl").read_bytes()
            assert check_stream(data).status == "complete", (task, kind)
            assert f'"adapter":"{kind}"'.encode() in data
        # the workflow task: its cell ran `metaharness workflow run`, step by step, on this harness
        flow = cells[("bugfix", kind, 1)]
        assert flow["passed"] and flow["exit_code"] == 0 and flow["turns"] >= 3, (kind, flow)
        assert (out / "bugfix" / kind / "1" / "workflow" / "workflow.jsonl").exists()
        assert check_stream((out / "bugfix" / kind / "1" / "events.jsonl").read_bytes()).status == "complete"
    assert cells[("notes", "claude", 1)]["cost_usd"] is not None  # Claude Code reports a cost from the usage
    assert sorted(os.listdir(template)) == ["README.txt"]
    assert not (out / ".scratch").exists()  # every cell's workspace and home (vendor scratch included) is gone
    report = batch("report", str(out), "--html", str(tmp_path / "report.html"))
    assert report.returncode == 0, report.stderr.decode()
    assert (tmp_path / "report-runs" / "notes" / "oharness-vs-claude.html").exists()


def test_the_cost_budget_stops_scheduling_on_the_cells_costs(tmp_path, monkeypatch):
    _need_vendors()
    # Claude Code's default model may be newer than the shipped table: price every model alike, so
    # the capped cells are priced (an unpriced answer under a cap stops the run, PRICE_UNKNOWN)
    (tmp_path / "prices.toml").write_text('format = "metaharness.prices/1"\ntaken = "2031-01-01"\n'
                                          '[models."*"]\ninput = 3.0\noutput = 15.0\n')
    monkeypatch.setenv("METAHARNESS_PRICES", str(tmp_path / "prices.toml"))
    script = write_scenario(tmp_path / "hi.json", {"text": "hello"})
    tasks = [{"id": f"t{i}", "prompt": "say hello", "script": script} for i in range(3)]
    plan = write_plan(tmp_path / "plan.json", tasks, [{"kind": "claude", "vendor_dir": str(VENDOR), "decisions": "observe"}])
    out = tmp_path / "out"
    first = batch("run", plan, "--out", str(out), "--jobs", "1", "--max-runs", "1")
    assert first.returncode == 0, first.stderr.decode()[-2000:]
    cost = last_by_cell(out)[("t0", "claude", 1)]["cost_usd"]
    assert cost and cost > 0
    # resume with a cost budget a little over one run's cost: the second cell starts, the third does not
    second = batch("run", plan, "--out", str(out), "--jobs", "1", "--max-cost-usd", str(cost * 1.5))
    assert second.returncode == 0, second.stderr.decode()[-2000:]
    cells = last_by_cell(out)
    assert [cells[(f"t{i}", "claude", 1)]["status"] for i in range(3)] == ["ran", "ran", "skipped"]
    assert cells[("t2", "claude", 1)]["skipped"] == "budget"
