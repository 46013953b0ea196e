"""Resume: the host killed mid-step loses nothing it decided; `workflow resume DIR`
continues after the last completed step in a new session, its frames carrying the prior
lines; a changed workflow file and an ended run are refused by name."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from workflow_support import METAHARNESS, NETNS, VENDOR, Case, cli, netns_ok, scenario, write

KINDS = ["oharness", "claude", "codex"]

TWO = '''start = "a"
[nodes.a]
prompt = "Write a.md."
operations = ["file.write"]
handoff = { kind = "artifact", path = "a.md" }
establishes = ["a.md holds the first half"]
next = ["b"]
[nodes.b]
prompt = "Write b.md."
operations = ["file.write"]
handoff = { kind = "artifact", path = "b.md" }
'''


def _command(case: Case, args: list[str]) -> list[str]:
    command = [str(METAHARNESS), "workflow", *args]
    if case.kind != "oharness":
        command += ["--vendor-dir", str(VENDOR)]
        if netns_ok():
            command = ["unshare", "--user", "--map-root-user", "--net", "--mount", sys.executable, str(NETNS),
                       str(case.root / "dns.log"), "--", *command]
    return command


def _wait(predicate, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _turn_started(case: Case, turn: int) -> bool:
    path = case.out / "events.jsonl"
    if not path.exists():
        return False
    return any(json.loads(l).get("event") == "turn.started" and json.loads(l).get("turn") == turn
               for l in path.read_text().splitlines() if l.strip())


@pytest.mark.parametrize("kind", KINDS)
def test_resume_after_the_host_is_killed_mid_step(tmp_path, kind):
    case = Case(tmp_path, TWO, {"calls": [write("a.md", "first\n")]}, {"text": "a done"},
                {"id": "slow", "delay_ms": 120000, "text": "never seen"}, kind=kind)
    args = ["run", str(case.file), "--harness", kind, "--out", str(case.out), "--cwd", str(case.work),
            "--script", str(case.script), "-p", "two halves"]
    env = dict(os.environ, METAHARNESS_SCRATCH_DIR=str(tmp_path / "scratch"))
    host = subprocess.Popen(_command(case, args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, env=env, cwd=str(tmp_path))
    try:
        _wait(lambda: _turn_started(case, 2))
    finally:
        os.killpg(host.pid, signal.SIGKILL)  # the host and every child it started
        host.wait(30)
        # what the killed run could not remove: its scratch roots and any runtime directory
        # one links to outside tmp_path (Claude Code's, when the root is too deep for a socket)
        from metaharness.adapters.process import remove_scratch

        for root in (tmp_path / "scratch").glob("*"):
            remove_scratch(root, keep_chosen=False)
    before = case.ledger()
    assert [r["record"] for r in before] == ["workflow.started", "step.entered", "step.verdict", "step.ended",
                                             "step.entered"]
    assert before[-1]["step"] == {"index": 2, "node": "b", "attempt": 1}
    show = cli(["show", str(case.out)], cwd=tmp_path, env={"COLUMNS": "160"})
    assert show.returncode == 0 and "unfinished" in show.stdout and "resume` continues it" in show.stdout
    # the resumed session gets a script of its own: it answers step 2 afresh
    scenario(case.script, {"calls": [write("b.md", "second\n")]}, {"text": "b done"})
    resume = ["resume", str(case.out), "--script", str(case.script)]
    done = subprocess.run(_command(case, resume), capture_output=True, text=True, timeout=300, env=env,
                          cwd=str(tmp_path), stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    after = case.ledger()
    assert after[:len(before)] == before, "resume rewrote what was already decided"
    started = after[len(before)]
    assert started["record"] == "workflow.started" and started["session"] == 2
    assert started["interrupted_step"] == 2
    assert started["resumed_at"] == {"index": 3, "node": "b", "attempt": 1}
    assert case.steps() == [(1, "a", 1, "passed"), (3, "b", 1, "passed")]
    frame = case.frames()[-1]
    assert frame.step.index == 3
    assert [(p.text, p.source) for p in frame.prior] == [
        ("two halves", "the task given to the workflow"),
        ("a.md holds the first half", "a.md"),
        ("a produced the artifact a.md", "a.md"),
    ]
    case.assert_sound("events-2.jsonl")
    assert (case.work / "b.md").read_text() == "second\n"
    # an ended run has nothing to resume
    again = subprocess.run(_command(case, resume), capture_output=True, text=True, timeout=60, env=env,
                           cwd=str(tmp_path), stdin=subprocess.DEVNULL)
    assert again.returncode == 2 and "WorkflowEnded" in again.stderr


def test_resume_refuses_a_changed_workflow_file(tmp_path):
    case = Case(tmp_path, TWO, {"calls": [write("a.md", "first\n")]}, {"text": "a done"}, {"text": "no b.md"})
    proc = cli(["run", str(case.file), "--harness", "oharness", "--out", str(case.out), "--cwd", str(case.work),
                "--script", str(case.script)], cwd=tmp_path)
    assert proc.returncode == 1  # b failed its only attempt
    # a failed run has ended too; a stopped one is what resume continues — fake a stop by trimming the ledger
    lines = (case.out / "workflow.jsonl").read_text().splitlines()
    (case.out / "workflow.jsonl").write_text("\n".join(lines[:4]) + "\n")
    case.file.write_text(case.file.read_text().replace("Write b.md.", "Write b.md now."))
    done = cli(["resume", str(case.out), "--script", str(case.script)], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("metaharness: WorkflowChanged: ") and str(case.file) in done.stderr
    assert (case.out / "workflow.jsonl").read_text().splitlines() == lines[:4]


def test_sigterm_stops_the_host_resumably(tmp_path):
    case = Case(tmp_path, TWO, {"calls": [write("a.md", "first\n")]}, {"text": "a done"},
                {"id": "slow", "delay_ms": 120000, "text": "never seen"})
    args = ["run", str(case.file), "--harness", "oharness", "--out", str(case.out), "--cwd", str(case.work),
            "--script", str(case.script)]
    host = subprocess.Popen([str(METAHARNESS), "workflow", *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(tmp_path))
    _wait(lambda: _turn_started(case, 2))
    host.send_signal(signal.SIGTERM)
    out, err = host.communicate(timeout=60)
    assert host.returncode == 3, out + err
    last = case.ledger()[-1]
    assert last["record"] == "workflow.stopped" and last["reason_name"] == "Stopped"
    case.assert_sound()  # the halted session still closed its stream
    scenario(case.script, {"calls": [write("b.md", "second\n")]}, {"text": "b done"})
    done = cli(["resume", str(case.out), "--script", str(case.script)], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert case.steps() == [(1, "a", 1, "passed"), (3, "b", 1, "passed")]


def test_a_ledger_line_cut_by_a_kill_is_dropped_and_a_corrupt_one_refused(tmp_path):
    from metaharness.workflow.ledger import LedgerError, read, resume_point

    case = Case(tmp_path, TWO, {"calls": [write("a.md", "first\n")]}, {"text": "a done"}, {"text": "no b.md"})
    assert case.run().outcome == "failed"
    lines = (case.out / "workflow.jsonl").read_text().splitlines(keepends=True)
    (case.out / "workflow.jsonl").write_text("".join(lines[:5]) + lines[5][:17])  # cut mid-write
    point = resume_point(read(str(case.out)))
    assert (point.position.node, point.next_index, point.interrupted_step) == ("b", 3, 2)
    (case.out / "workflow.jsonl").write_text("".join(lines[:2]) + "{not json\n" + "".join(lines[2:5]))
    with pytest.raises(LedgerError, match="LedgerInvalid: .* line 3 is not JSON"):
        read(str(case.out))
