"""`metaharness batch check|run|report` and `schema batch`: refusals by name, resume after a kill, Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from metaharness.cli.main import cli
from metaharness.protocol.stream import check_stream

from .conftest import METAHARNESS, REPO, last_by_cell, results_of, runs_matching, write_plan, write_scenario


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_check_accepts_a_toml_plan_and_counts_its_cells(suite):
    tmp = suite["tmp"]
    notes = suite["tasks"][0]
    toml = tmp / "plan.toml"
    toml.write_text(f'''format = "metaharness.batch/1"
repeats = 3

[defaults]
vendor_dir = "vendor"
max_turns = 4

[[tasks]]
id = "notes"
prompt = "write notes"
script = "{Path(notes['script']).name}"
frame = "{Path(notes['frame']).name}"
workspace = "template"
check = {{ command = "grep -qx HELLO notes.txt", timeout_s = 5 }}

[[harnesses]]
kind = "oharness"

[[harnesses]]
kind = "claude"
vendor_dir = "own-vendor"
''')
    from metaharness.batch import load_plan

    plan = load_plan(str(toml))  # relative paths resolve against the plan's own directory
    assert plan.tasks[0].workspace == str(suite["template"])
    # a harness's own option wins over the plan's defaults; one it leaves out comes from them
    assert plan.harnesses[0].vendor_dir == str(tmp / "vendor") and plan.harnesses[1].vendor_dir == str(tmp / "own-vendor")
    assert plan.harnesses[0].max_turns == plan.harnesses[1].max_turns == 4
    # the check makes every cell's start checks: claude is not in the vendor dir the plan names
    result = invoke("batch", "check", str(toml))
    assert result.exit_code == 1, result.output
    refusals = result.stderr.strip().splitlines()
    assert len(refusals) == 1, result.stderr
    assert refusals[0].startswith("metaharness: task 'notes' on harness 'claude': VendorMissing: claude is not on "
                                  f"the child PATH ({tmp / 'own-vendor'}:")
    (tmp / "own-vendor").mkdir()
    (tmp / "own-vendor" / "claude").symlink_to(REPO / ".vendor" / "node_modules" / ".bin" / "claude")
    result = invoke("batch", "check", str(toml))
    assert result.exit_code == 0, result.stderr
    assert "1 task(s) × 2 harness(es) × 3 repeat(s) = 6 cell(s)" in result.output


def test_check_names_every_cell_the_run_would_refuse_at_start(suite):
    tmp = suite["tmp"]
    tasks = [dict(suite["tasks"][0]),
             {"id": "observed", "prompt": "p", "script": suite["tasks"][0]["script"], "frame": suite["tasks"][0]["frame"]}]
    harnesses = [{"kind": "oharness"}, {"kind": "oharness", "id": "watch", "decisions": "observe"},
                 {"kind": "codex", "vendor_dir": str(tmp / "nowhere")}]
    result = invoke("batch", "check", write_plan(tmp / "p.json", tasks, harnesses))
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    # the run's own refusals, by name, for each task × harness that would be refused
    assert "metaharness: task 'notes' on harness 'watch': ObserveWithFrame: observe mode records every call and " \
           "cannot enforce a frame" in lines
    assert any(line.startswith("metaharness: task 'observed' on harness 'codex': VendorMissing: codex is not on the "
                               f"child PATH ({tmp / 'nowhere'}:") for line in lines), lines
    assert len(lines) == 4, lines  # notes/watch, notes/codex, observed/watch, observed/codex
    assert not any("harness 'oharness'" in line for line in lines)
    # a policy file is loaded as the run loads it
    (tmp / "bad.json").write_text('{"permissions": {"deny": 5}}')
    task = {"id": "t", "prompt": "p", "script": suite["tasks"][0]["script"], "policy": [str(tmp / "bad.json")]}
    result = invoke("batch", "check", write_plan(tmp / "p.json", [task], [{"kind": "oharness", "decisions": "policy"}]))
    assert result.exit_code == 1
    assert result.stderr.startswith("metaharness: task 't' on harness 'oharness': PolicyInvalid: ") and \
        "'deny' is not a list" in result.stderr, result.stderr


@pytest.mark.parametrize("change, message", [
    (lambda p: p["harnesses"].append({"kind": "oharness"}), "harness 'oharness' appears twice"),
    (lambda p: p["harnesses"][0].update(modle="x"), "harness 'oharness' (#1): Object contains unknown field `modle`"),
    (lambda p: p["harnesses"][0].update(kind="nosuch"), "harness 'nosuch' (#1): Invalid enum value 'nosuch' - at `$.kind`"),
    (lambda p: p["tasks"][0].update(script="missing.json"), "task 'notes': its script file"),
    (lambda p: p["tasks"][0].pop("prompt"), "task 'notes' has no prompt"),
    (lambda p: p["tasks"][0].update(id="has space"), "task 'has space' (#1)"),
    (lambda p: p["tasks"].append(dict(p["tasks"][0])), "task 'notes' appears twice"),
    (lambda p: p.update(repeats=0), "the plan: Expected `int` >= 1"),
    (lambda p: p.update(format="metaharness.batch/2"), "the plan's format must be 'metaharness.batch/1'"),
])
def test_check_names_the_task_or_harness_at_fault(suite, change, message):
    tmp = suite["tmp"]
    raw = {"format": "metaharness.batch/1", "tasks": [dict(suite["tasks"][0])], "harnesses": [{"kind": "oharness"}]}
    change(raw)
    (tmp / "bad.json").write_text(json.dumps(raw))
    result = invoke("batch", "check", str(tmp / "bad.json"))
    assert result.exit_code == 1
    assert message in result.stderr, result.stderr


def test_a_bad_scenario_or_frame_is_refused_at_check(suite):
    tmp = suite["tmp"]
    (tmp / "bad-scenario.json").write_text('{"format": "metaharness.scenario/1", "turns": [{"calls": [{"op": "nope", "input": {}}]}]}')
    (tmp / "bad-frame.json").write_text('{"format": "metaharness.frame/1"}')
    for key, path, words in (("script", "bad-scenario.json", "turn"), ("frame", "bad-frame.json", "is not a sealed")):
        task = {**suite["tasks"][0], key: str(tmp / path)}
        plan = write_plan(tmp / "p.json", [task], [{"kind": "oharness"}])
        result = invoke("batch", "check", plan)
        assert result.exit_code == 1 and "task 'notes'" in result.stderr and words in result.stderr, result.stderr


def test_a_workflow_task_is_refused_by_name_where_workflows_do_not_exist(suite, monkeypatch):
    # An installation without the workflow package, so without `metaharness workflow run`.
    monkeypatch.setitem(sys.modules, "metaharness.workflow", None)
    tmp = suite["tmp"]
    (tmp / "flow.toml").write_text("# a workflow\n")
    task = {"id": "flow", "workflow": str(tmp / "flow.toml"), "workspace": str(suite["template"])}
    plan = write_plan(tmp / "plan.json", [task], [{"kind": "oharness"}])
    checked = invoke("batch", "check", plan)
    assert checked.exit_code == 1 and "WorkflowUnavailable: task 'flow' names a workflow" in checked.stderr
    started = invoke("batch", "run", plan, "--out", str(tmp / "out"))
    assert started.exit_code == 2 and "WorkflowUnavailable" in started.stderr
    assert not (tmp / "out").exists()  # refused before anything is written


def test_the_ray_backend_without_ray_is_refused_with_the_install_command(suite, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the extra were not installed
    tmp = suite["tmp"]
    plan = write_plan(tmp / "plan.json", [suite["tasks"][0]], [{"kind": "oharness"}])
    result = invoke("batch", "run", plan, "--out", str(tmp / "out"), "--backend", "ray")
    assert result.exit_code == 2
    assert "RayUnavailable" in result.stderr and "pip install 'metaharness[ray]'" in result.stderr
    assert not (tmp / "out").exists()


def test_an_unreachable_ray_address_is_one_sentence_in_seconds(suite):
    pytest.importorskip("ray")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    tmp = suite["tmp"]
    plan = write_plan(tmp / "plan.json", suite["tasks"][:1], [{"kind": "oharness"}])
    started = time.monotonic()
    result = invoke("batch", "run", plan, "--out", str(tmp / "out"), "--backend", "ray", "--ray-address", dead)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"metaharness: RayUnreachable: --ray-address {dead} cannot be reached "
                                    "(Connection refused)"), result.stderr
    assert time.monotonic() - started < 10 and not (tmp / "out").exists()


def test_schema_batch_validates_a_plan():
    import jsonschema

    result = invoke("schema", "batch")
    assert result.exit_code == 0
    schema = json.loads(result.output)
    assert schema["title"] == "metaharness.batch/1"
    good = {"format": "metaharness.batch/1", "tasks": [{"id": "a", "prompt": "go"}], "harnesses": [{"kind": "codex"}]}
    jsonschema.validate(good, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "harnesses": [{"kind": "codex", "modle": "x"}]}, schema)


def test_a_dir_of_another_plan_is_refused(suite):
    tmp = suite["tmp"]
    script = write_scenario(tmp / "s.json", {"text": "done"})
    one = write_plan(tmp / "one.json", [{"id": "a", "prompt": "go", "script": script}], [{"kind": "oharness", "decisions": "observe"}])
    two = write_plan(tmp / "two.json", [{"id": "b", "prompt": "go", "script": script}], [{"kind": "oharness", "decisions": "observe"}])
    assert invoke("batch", "run", one, "--out", str(tmp / "out"), "--jobs", "1").exit_code == 0
    refused = invoke("batch", "run", two, "--out", str(tmp / "out"))
    assert refused.exit_code == 2 and "holds the results of a different plan" in refused.stderr


def _slow_plan(tmp: Path, count: int) -> str:
    script = write_scenario(tmp / "slow.json", {"text": "thinking", "delay_ms": 1500}, {"text": "done"})
    tasks = [{"id": f"t{i}", "prompt": "go", "script": script} for i in range(count)]
    return write_plan(tmp / "plan.json", tasks, [{"kind": "oharness", "decisions": "observe"}])


def _start(plan: str, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([*METAHARNESS, "batch", "run", plan, "--out", str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_resume_after_the_batch_process_is_killed(tmp_path):
    plan, out = _slow_plan(tmp_path, 4), tmp_path / "out"
    proc = _start(plan, out, "--jobs", "1")
    _wait_for(lambda: (out / "results.jsonl").exists() and len(results_of(out)) >= 1)
    running = out / "t1" / "oharness" / "1" / "events.jsonl"
    _wait_for(lambda: running.exists() and running.stat().st_size > 0)  # the run is up (its first line written)
    proc.kill()
    proc.wait()
    # the running cell's run dies with the batch, and still closes its stream
    _wait_for(lambda: not runs_matching(str(out)), timeout=30)
    assert check_stream((out / "t1" / "oharness" / "1" / "events.jsonl").read_bytes()).status == "complete"
    first = last_by_cell(out)
    assert set(first) <= {("t0", "oharness", 1), ("t1", "oharness", 1)}
    resumed = _start(plan, out, "--jobs", "2")
    assert resumed.wait(120) == 0
    said = resumed.stderr.read().decode()
    kept = sum(1 for c in first.values() if c["status"] == "ran")
    assert f"resumed: {kept} cell(s) kept from before, {4 - kept} to run" in said, said
    cells = last_by_cell(out)
    assert len(cells) == 4 and all(c["status"] == "ran" and c["passed"] for c in cells.values())
    assert cells[("t0", "oharness", 1)] == first[("t0", "oharness", 1)]  # kept, not run again
    assert all(check_stream((out / f"t{i}" / "oharness" / "1" / "events.jsonl").read_bytes()).status == "complete"
               for i in range(4))


def test_ctrl_c_halts_running_cells_closes_every_stream_and_leaves_a_resumable_dir(tmp_path):
    plan, out = _slow_plan(tmp_path, 4), tmp_path / "out"
    proc = _start(plan, out, "--jobs", "2")
    _wait_for(lambda: all((out / f"t{i}" / "oharness" / "1" / "events.jsonl").exists() for i in (0, 1)))
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 130
    assert b"resumes" in proc.stderr.read()
    assert not runs_matching(str(out))
    for i in (0, 1):
        data = (out / f"t{i}" / "oharness" / "1" / "events.jsonl").read_bytes()
        assert check_stream(data).status == "complete"
        assert b'"reason":"steer-halt"' in data.splitlines()[-1]
    statuses = {k[0]: v["status"] for k, v in last_by_cell(out).items()}
    assert statuses == {"t0": "interrupted", "t1": "interrupted"}
    assert not (out / "t2").exists()
    resumed = _start(plan, out, "--jobs", "2")
    assert resumed.wait(120) == 0
    cells = last_by_cell(out)
    assert len(cells) == 4 and all(c["status"] == "ran" and c["passed"] for c in cells.values())


def test_the_bundled_example_plan_is_valid_and_finds_the_vendor_clis_wherever_it_is_copied(tmp_path, monkeypatch):
    examples = REPO / "examples"
    result = invoke("batch", "check", str(examples / "batch.toml"))
    assert result.exit_code == 0, result.stderr
    assert "1 task(s) × 3 harness(es) × 3 repeat(s) = 9 cell(s)" in result.output
    assert "vendor_dir =" not in (examples / "batch.toml").read_text().split("[[tasks]]")[1]  # no path to break
    for name in ("batch.toml", "same-task.scenario.json", "same-task.frame.json"):
        (tmp_path / name).write_bytes((examples / name).read_bytes())
    monkeypatch.delenv("METAHARNESS_VENDOR_DIR", raising=False)  # the checkout's pinned dir, found by itself
    monkeypatch.chdir(tmp_path)
    result = invoke("batch", "check", str(tmp_path / "batch.toml"))
    assert result.exit_code == 0, result.stderr
