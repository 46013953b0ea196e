"""A workflow run step by step, on oharness offline and on the real Claude Code and Codex
binaries through the loopback: handoffs passing and failing, retries quoting the failure,
checks, structured answers, routing, a frame refusal inside a step, the max-steps budget."""

from __future__ import annotations

import json

import pytest

from workflow_support import Case, cli, cli_run, copy_bugfix_workspace, edit, shell, write, BUGFIX

KINDS = [
    "oharness",
    "claude",
    "codex",
]


def done(case: Case, proc, code: int) -> None:
    assert proc.returncode == code, f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr[-3000:]}"
    case.assert_sound()
    started = [e for e in case.events() if e["event"] == "session.started"]
    assert [e["adapter"] for e in started] == [case.kind]


@pytest.mark.parametrize("kind", KINDS)
def test_artifact_handoff_passes(tmp_path, kind):
    case = Case(tmp_path, '''start = "write"
[nodes.write]
prompt = "Write out.md with the answer."
operations = ["file.write"]
handoff = { kind = "artifact", path = "out.md", non_empty = true }
''', {"calls": [write("out.md", "# the answer\n")]}, {"text": "Wrote out.md."}, kind=kind)
    proc = cli_run(case)
    done(case, proc, 0)
    assert case.steps() == [(1, "write", 1, "passed")]
    verdict = case.records("step.verdict")[0]
    assert verdict["handoff"]["passed"] and verdict["handoff"]["evidence"]["bytes"] == len("# the answer\n")
    assert case.records("workflow.ended")[0]["outcome"] == "completed"
    [frame] = case.frames()
    assert frame.prior[0].text == "the task" and frame.reaching[0].text.startswith("end: the artifact out.md")


@pytest.mark.parametrize("kind", KINDS)
def test_missing_artifact_is_retried_with_the_failure_in_the_frame(tmp_path, kind):
    case = Case(tmp_path, '''start = "write"
[nodes.write]
prompt = "Write out.md."
operations = ["file.write"]
handoff = { kind = "artifact", path = "out.md" }
max_attempts = 2
''', {"text": "I think I am done."}, {"calls": [write("out.md", "x\n")]}, {"text": "Now written."}, kind=kind)
    proc = cli_run(case)
    done(case, proc, 0)
    assert case.steps() == [(1, "write", 1, "failed"), (2, "write", 2, "passed")]
    second = case.frames()[1]
    failure = "handoff: the artifact out.md does not exist in the workspace"
    assert [(o.text, o.asked_by) for o in second.obligations] == [(f"attempt 1 failed: {failure}", "the handoff of write")]
    injected = [e["text"] for e in case.events() if e["event"] == "injection" and e["origin"] == "frame"]
    assert len(injected) == 2 and f"attempt 1 failed: {failure}" in injected[1]
    left = [e for e in case.events() if e["event"] == "step.left"]
    assert [e["outcome"]["outcome"] for e in left] == ["failed", "completed"]
    assert left[0]["outcome"]["reason"] == failure


@pytest.mark.parametrize("kind", KINDS)
def test_failing_check_exhausts_attempts_and_names_the_reason(tmp_path, kind):
    case = Case(tmp_path, '''start = "build"
[nodes.build]
prompt = "Make the build pass."
operations = ["shell"]
check = { name = "verify", command = "echo boom-$((1+2)); exit 3", timeout_s = 20 }
max_attempts = 2
''', {"text": "Tried once."}, {"text": "Tried twice."}, kind=kind)
    proc = cli_run(case)
    done(case, proc, 1)
    assert case.steps() == [(1, "build", 1, "failed"), (2, "build", 2, "failed")]
    check = case.records("step.verdict")[0]["check"]
    assert check["exit"] == 3 and check["output_tail"] == "boom-3\n" and not check["timed_out"]
    failure = "check verify exited 3; the tail of its output:\nboom-3"
    assert case.frames()[1].obligations[-1].text == f"attempt 1 failed: {failure}"
    assert case.frames()[1].obligations[-1].asked_by == "check verify"
    ended = case.records("workflow.ended")[0]
    assert ended["outcome"] == "failed" and ended["reason_name"] == "AttemptsExhausted"
    assert ended["reason"] == f"node build failed 2 of 2 attempt(s); the last: {failure}"
    assert "AttemptsExhausted" in proc.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_structured_answer_rejected_then_validated(tmp_path, kind):
    (tmp_path / "severity.schema.json").write_text(json.dumps({
        "type": "object", "required": ["severity"], "additionalProperties": False,
        "properties": {"severity": {"enum": ["low", "high"]}}}))
    case = Case(tmp_path, '''start = "triage"
[nodes.triage]
prompt = "Rate the severity."
handoff = { kind = "structured_answer", schema = "severity.schema.json" }
max_attempts = 2
''', {"text": 'Here:\n```json\n{"severity": "urgent"}\n```'}, {"text": '```json\n{"severity": "high"}\n```'},
        kind=kind)
    proc = cli_run(case)
    done(case, proc, 0)
    assert case.steps() == [(1, "triage", 1, "failed"), (2, "triage", 2, "passed")]
    first, second = case.records("step.verdict")
    assert first["failure"].startswith("handoff: the final answer does not validate against severity.schema.json: "
                                       "at $.severity: 'urgent' is not one of")
    assert second["handoff"]["evidence"] == {"answer": {"severity": "high"}}
    assert case.frames()[1].handoff.schema == "severity.schema.json"


@pytest.mark.parametrize("kind", KINDS)
def test_bugfix_example_routes_back_to_fix_then_ends(tmp_path, kind):
    """The example of the docs: reproduce → fix → review, the review choosing fix once, then end."""
    import shutil

    work = copy_bugfix_workspace(tmp_path)
    case = Case(tmp_path, "", kind=kind)
    case.file = BUGFIX / "bugfix.workflow.toml"
    shutil.copy(BUGFIX / "bugfix.scenario.json", case.script)
    assert case.work == work
    proc = cli_run(case, task="add(2, 3) should be 5")
    done(case, proc, 0)
    assert case.steps() == [(1, "reproduce", 1, "passed"), (2, "fix", 1, "passed"), (3, "review", 1, "passed"),
                            (4, "fix", 1, "passed"), (5, "review", 1, "passed")]
    assert [r["choice"] for r in case.records("step.verdict") if r["step"]["node"] == "review"] == ["fix", "end"]
    assert "return a + b" in (work / "calc.py").read_text()
    frames = case.frames()
    assert frames[2].entities.members == ["fix", "end"]
    review_prior = [(p.text, p.source) for p in frames[2].prior]
    assert ("the bug reproduces: test_calc.py fails", "repro.md") in review_prior
    assert ("fix: check test-passes passed (exit 0)", "check test-passes") in review_prior
    assert frames[1].reaching[0].text.startswith("review: the check test-passes")
    # the ledger reads as a table
    show = __import__("workflow_support").cli(["show", str(case.out)], cwd=tmp_path)
    assert show.returncode == 0 and "passed → fix" in show.stdout and "passed → end" in show.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_frame_refusal_inside_a_step(tmp_path, kind):
    case = Case(tmp_path, '''start = "write"
[nodes.write]
prompt = "Write out.md (this step does not admit the shell)."
operations = ["file.write"]
handoff = { kind = "artifact", path = "out.md" }
''', {"calls": [shell("touch shell.txt")]}, {"calls": [write("out.md", "ok\n")]}, {"text": "done"}, kind=kind)
    proc = cli_run(case)
    done(case, proc, 0)
    decided = [e for e in case.events() if e["event"] == "tool.decided"]
    assert [(d["decision"]["decision"], d["decided_by"]) for d in decided] == [("deny", "frame"), ("allow", "frame")]
    assert not (case.work / "shell.txt").exists()
    assert case.steps() == [(1, "write", 1, "passed")]


@pytest.mark.parametrize("kind", KINDS)
def test_max_steps_stops_a_routing_loop(tmp_path, kind):
    case = Case(tmp_path, '''start = "work"
[nodes.work]
prompt = "Work."
next = ["review"]
[nodes.review]
prompt = "Review: answer again or end."
entities = ["work", "end"]
next = ["work", "end"]
''', {"text": "worked"}, {"text": "again\nwork"}, {"text": "worked"}, {"text": "end"}, kind=kind)
    proc = cli_run(case, "--max-steps", "3")
    done(case, proc, 1)
    assert case.steps() == [(1, "work", 1, "passed"), (2, "review", 1, "passed"), (3, "work", 1, "passed")]
    stopped = case.records("workflow.stopped")[0]
    assert (stopped["outcome"], stopped["reason_name"]) == ("budget", "MaxStepsReached")
    assert case.records("workflow.ended") == []  # a budget stop does not end the run
    # the same budget again is refused before anything is written; a larger one finishes the run
    before = case.ledger()
    again = cli(["resume", str(case.out)], cwd=case.root, namespace=kind != "oharness")
    assert again.returncode == 2 and "MaxStepsReached" in again.stderr, again.stderr
    assert case.ledger() == before
    more = cli(["resume", str(case.out), "--max-steps", "10"], cwd=case.root, namespace=kind != "oharness")
    assert more.returncode == 0, more.stdout + more.stderr
    assert case.steps()[3:] == [(4, "review", 1, "passed")]
    assert case.records("workflow.ended")[0]["outcome"] == "completed"


@pytest.mark.parametrize("kind", KINDS)
def test_routing_answer_that_names_no_member_fails_the_step(tmp_path, kind):
    case = Case(tmp_path, '''start = "pick"
[nodes.pick]
prompt = "Pick a or end."
entities = ["a", "end"]
next = ["a", "end"]
max_attempts = 2
[nodes.a]
prompt = "a"
''', {"text": "maybe a?"}, {"text": "fine:\na"}, {"text": "did a"}, kind=kind)
    proc = cli_run(case)
    done(case, proc, 0)
    assert case.steps() == [(1, "pick", 1, "failed"), (2, "pick", 2, "passed"), (3, "a", 1, "passed")]
    assert case.records("step.verdict")[0]["failure"] == (
        "routing: the last non-empty line of the final answer is 'maybe a?', not exactly one of a, end")


def test_a_check_that_outlives_its_timeout_is_killed_and_fails_the_step(tmp_path):
    case = Case(tmp_path, '''start = "s"
[nodes.s]
prompt = "Wait."
check = { name = "slow", command = "echo started; sleep 30; echo never", timeout_s = 1 }
''', {"text": "waiting"})
    proc = cli_run(case)
    done(case, proc, 1)
    check = case.records("step.verdict")[0]["check"]
    assert check == {"name": "slow", "exit": None, "timed_out": True, "output_tail": "started\n", "passed": False,
                     "error": None}
    assert case.records("workflow.ended")[0]["reason"].endswith(
        "the last: check slow timed out (killed); the tail of its output:\nstarted")


def test_policy_mode_decides_within_what_the_frame_admits(tmp_path):
    case = Case(tmp_path, '''start = "w"
[nodes.w]
prompt = "Write out.md."
operations = ["file.write"]
handoff = { kind = "artifact", path = "out.md" }
''', {"calls": [shell("touch shell.txt")]}, {"calls": [write("out.md", "ok\n")]}, {"text": "done"})
    proc = cli_run(case, "--decisions", "policy", "--policy-mode", "bypass")
    done(case, proc, 0)
    decided = [(d["decision"]["decision"], d["decided_by"]) for d in case.events() if d["event"] == "tool.decided"]
    assert decided == [("deny", "frame"), ("allow", "policy")]
    assert not (case.work / "shell.txt").exists()
    usage = cli_run(Case(tmp_path / "other", "start = \"w\"\n[nodes.w]\nprompt = \"x\"\n"), "--policy-mode", "bypass")
    assert usage.returncode == 2 and "need --decisions policy" in usage.stderr


@pytest.mark.parametrize("kind", KINDS)
def test_max_turns_gives_a_failing_step_another_turn_in_the_same_attempt(tmp_path, kind):
    case = Case(tmp_path, '''start = "a"
[nodes.a]
prompt = "Write a.md."
operations = ["file.write"]
handoff = { kind = "artifact", path = "a.md" }
next = ["b"]
[nodes.b]
prompt = "Say done."
''', {"text": "done, I think"}, {"calls": [write("a.md", "a\n")]}, {"text": "now really"}, {"text": "done"},
        kind=kind)
    proc = cli_run(case, "--max-turns", "2")
    done(case, proc, 0)
    assert case.steps() == [(1, "a", 1, "passed"), (2, "b", 1, "passed")]
    verdicts = [(r["step"]["index"], r["turn"], r["passed"]) for r in case.records("step.verdict")]
    assert verdicts == [(1, 1, False), (1, 2, True), (2, 1, True)]
    injected = [e["text"] for e in case.events() if e["event"] == "injection" and e["origin"] == "message.inject"]
    assert injected[0] == "This step is not done yet: handoff: the artifact a.md does not exist in the workspace"
    assert len(case.frames()) == 2  # no new frame inside a step
