"""`metaharness redecide`: recorded calls decided again by the run loop's own deciders.

On the project's fixture streams (a frame that removes `shell`; a policy with one more deny
rule), through the CLI (text, --json, --fail-on, a directory, bad input), and a property test:
a stream the run loop wrote under a frame, re-decided under that same frame, changes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from examples import examples

from metaharness.protocol import frame as frames
from metaharness.replay import redecide as rd
from metaharness.run.spec import RunSpec
from run.conftest import make_frame
from run.fake import Call, Turn, drive

FIXTURES = Path(__file__).resolve().parents[1] / "view" / "fixtures"
# Recorded streams whose calls carry the names the live adapters present (compare_codex.jsonl is a
# viewer fixture whose codex calls use names the codex adapter never presents, so it is not one).
CLAUDE_STREAMS = [FIXTURES / "compare_claude.jsonl", FIXTURES / "all_events.jsonl"]
# The frame each fixture stream ran under, as its deny reasons state it.
RUN_FRAME_OPS = {"compare_claude.jsonl": ["file.write", "shell"],
                 "all_events.jsonl": ["file.edit", "file.read", "file.write"]}


def frame_file(tmp_path: Path, ops: list, name: str = "frame.json", **kw) -> str:
    sealed = frames.seal(make_frame([op if isinstance(op, dict) else {"op": op} for op in ops], **kw))
    path = tmp_path / name
    path.write_bytes(frames.document_bytes(sealed))
    return str(path)


def cli(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "metaharness", "redecide", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=60)


def shell_calls(path: Path) -> set[str]:
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {e["call_id"] for e in events if e["event"] == "tool.requested" and e["name"] == "Bash"}


@pytest.mark.parametrize("stream", CLAUDE_STREAMS, ids=lambda p: p.name)
def test_removing_shell_from_the_runs_frame_denies_every_shell_call_and_nothing_else(tmp_path, stream):
    ops = RUN_FRAME_OPS[stream.name]
    same = rd.redecide([str(stream)], rd.FrameDecider(frames.load_frame(frame_file(tmp_path, ops, "same.json"))))
    assert same.changed() == [], "the run's own frame must decide every recorded call as the run did"

    narrower = [op for op in ops if op != "shell"]
    report = rd.redecide([str(stream)], rd.FrameDecider(frames.load_frame(frame_file(tmp_path, narrower))))
    shell = shell_calls(stream)
    assert shell, "the fixture has shell calls"
    was_allowed = {o.call.call_id for o in report.outcomes if o.call.call_id in shell and o.old.klass == "allow"}
    assert {o.call.call_id for o in report.changed()} == was_allowed
    assert all(o.change == "newly denied" and "Bash is shell" in o.new.reason for o in report.changed())
    assert all(o.new.klass == "deny" for o in report.outcomes if o.call.call_id in shell)


def test_a_policy_with_one_more_deny_rule_denies_exactly_its_calls(tmp_path):
    stream = FIXTURES / "compare_claude.jsonl"
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"permissions": {"allow": ["Bash", "Write"], "deny": ["Edit(//tmp/mh/work/notes.txt)"]}}))
    tighter = tmp_path / "tighter.json"
    tighter.write_text(json.dumps({"permissions": {"deny": ["Bash(cat *)"]}}))
    before = rd.redecide([str(stream)], rd.PolicyDeciderFor([str(base)], "manual"))
    assert before.changed() == [], "the base policy decides the fixture as its frame did"
    after = rd.redecide([str(stream)], rd.PolicyDeciderFor([str(base), str(tighter)], "manual"))
    changed = after.changed()
    assert [(o.call.call_id, o.change, o.new.decided_by) for o in changed] == [("toolu_04", "newly denied", "policy")]
    assert "Bash(cat *)" in changed[0].new.reason
    assert not list(tmp_path.glob("**/decisions.jsonl")), "redecide writes no decision trail"


def test_cli_text_json_fail_on_and_directory(tmp_path):
    corpus = tmp_path / "runs"
    (corpus / "monday").mkdir(parents=True)
    for stream in CLAUDE_STREAMS:
        (corpus / "monday" / stream.name).write_bytes(stream.read_bytes())
    (corpus / "notes.txt").write_text("not a stream, not read")
    frame = frame_file(tmp_path, ["file.edit", "file.read", "file.write"])

    text = cli(str(corpus), "--frame", frame)
    assert text.returncode == 1, text.stderr
    assert "newly denied: toolu_01 Bash" in text.stdout and "newly denied: toolu_04 Bash" in text.stdout
    assert "newly allowed: toolu_03 Edit" in text.stdout  # compare_claude's frame did not admit file.edit
    assert "7 calls in 2 streams: 4 kept, 2 newly denied, 1 newly allowed" in text.stdout

    document = json.loads(cli(str(corpus), "--frame", frame, "--json").stdout)
    assert document["summary"] == {"calls": 7, "kept": 4, "newly denied": 2, "newly allowed": 1, "changed": 0}
    assert {c["call_id"] for c in document["changed"]} == {"toolu_01", "toolu_03", "toolu_04"}
    first = next(c for c in document["changed"] if c["call_id"] == "toolu_01")
    assert first["old"] == {"verdict": "allow", "decided_by": "frame", "reason": None}
    assert first["new"]["verdict"] == "deny" and "Bash is shell" in first["new"]["reason"]

    narrower = frame_file(tmp_path, ["file.write"], "narrower.json")  # compare_claude's frame minus shell
    one = str(FIXTURES / "compare_claude.jsonl")
    assert cli(one, "--frame", narrower, "--fail-on", "allowed").returncode == 0
    assert cli(one, "--frame", narrower, "--fail-on", "denied").returncode == 1
    wider = frame_file(tmp_path, ["file.edit", "file.write", "shell"], "wider.json")
    assert cli(one, "--frame", wider, "--fail-on", "denied").returncode == 0
    assert cli(one, "--frame", wider, "--fail-on", "allowed").returncode == 1
    same = frame_file(tmp_path, ["file.write", "shell"], "same.json")
    unchanged = cli(one, "--frame", same)
    assert unchanged.returncode == 0 and "4 calls in 1 stream: 4 kept" in unchanged.stdout


def test_cli_refuses_bad_input_by_name(tmp_path):
    frame = frame_file(tmp_path, ["shell"])
    assert cli(str(FIXTURES / "compare_claude.jsonl")).returncode == 2  # neither --frame nor --policy
    both = cli(str(FIXTURES / "compare_claude.jsonl"), "--frame", frame, "--policy", frame)
    assert both.returncode == 2 and "not both" in both.stderr
    bad_frame = tmp_path / "edited.json"
    bad_frame.write_text(Path(frame).read_text().replace('"shell"', '"file.read"'))
    refused = cli(str(FIXTURES / "compare_claude.jsonl"), "--frame", str(bad_frame))
    assert refused.returncode == 2 and "FrameInvalid" in refused.stderr
    broken = tmp_path / "broken.jsonl"
    broken.write_text((FIXTURES / "compare_claude.jsonl").read_text() + "{not json\n")
    unreadable = cli(str(broken), "--frame", frame)
    assert unreadable.returncode == 2 and f"{broken}:" in unreadable.stderr and unreadable.stdout == ""
    bad_policy = tmp_path / "bad-policy.json"
    bad_policy.write_text(json.dumps({"permissions": {"deny": 7}}))
    policy = cli(str(FIXTURES / "compare_claude.jsonl"), "--policy", str(bad_policy))
    assert policy.returncode == 2 and "policy settings cannot be used" in policy.stderr


# --- agreement with the run loop (property) ------------------------------------------------

TOOLS = ["read", "write", "edit", "bash", "glob", "grep", "webfetch", "todo", "mcp__git__status", "teleport"]
OPS = ["dir.list", "file.edit", "file.read", "file.write", "search", "shell", "web.read", "task.todo"]
PATHS = ["a.txt", "src/b.py", "../outside.txt", "/etc/passwd", "src", "."]

calls = st.builds(lambda tool, path, n: Call(tool, {"path": path, "command": f"echo {n}", "content": "x"}),
                  st.sampled_from(TOOLS), st.sampled_from(PATHS), st.integers(0, 9))
scopes = st.one_of(st.none(), st.lists(st.fixed_dictionaries({
    "subjects": st.lists(st.sampled_from(["file:src/**", "file:*.txt", "file:/**", "file:**"]), min_size=1, max_size=2),
    "operations": st.lists(st.sampled_from(OPS), max_size=3).map(lambda ops: [{"op": op} for op in ops]),
}), min_size=1, max_size=2))


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(st.lists(calls, max_size=4), min_size=1, max_size=3),
       ops=st.lists(st.sampled_from(OPS), unique=True), mcp=st.booleans(), scope=scopes, deny_only=st.booleans())
async def test_the_runs_own_frame_redecides_every_call_as_the_run_did(tmp_path, turns, ops, mcp, scope, deny_only):
    ops = ops + ([{"op": "mcp.call", "server": "git", "tool": "status"}] if mcp else [])
    frame = frame_file(tmp_path, ops, subjects=scope)
    spec = RunSpec(kind="oharness", prompt="go", frame=frame, deny_only=deny_only, max_turns=len(turns))
    events, code, *_ = await drive(spec, turns=[Turn(list(t)) for t in turns])
    assert code == 0
    stream = tmp_path / "run.jsonl"
    stream.write_text("".join(json.dumps(e) + "\n" for e in events))
    report = rd.redecide([str(stream)], rd.FrameDecider(frames.load_frame(frame)))
    decided = {e["call_id"]: e for e in events if e["event"] == "tool.decided"}
    assert len(report.outcomes) == len(decided)
    for outcome in report.outcomes:
        run_decision = decided[outcome.call.call_id]["decision"]
        assert outcome.new.klass == rd.CLASS_OF_DECISION[run_decision["decision"]]
        assert outcome.new.reason == run_decision.get("reason")
    assert report.changed() == []


RULES = ["Bash", "Bash(echo *)", "Bash(rm *)", "Read", "Read(src/**)", "Write", "Write(*.txt)", "Edit", "Glob", "Grep"]
policies = st.fixed_dictionaries({kind: st.lists(st.sampled_from(RULES), max_size=3, unique=True)
                                  for kind in ("allow", "ask", "deny")})
MODES = ["manual", "accept-edits", "plan", "auto", "bypass"]


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(st.lists(calls, max_size=4), min_size=1, max_size=2), rules=policies,
       mode=st.sampled_from(MODES))
async def test_the_runs_own_policy_redecides_every_call_as_the_run_did(tmp_path, turns, rules, mode):
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"permissions": rules}))
    spec = RunSpec(kind="oharness", prompt="go", decisions="policy", policy_files=[str(policy)], policy_mode=mode,
                   policy_scopes="none", max_turns=len(turns))
    events, code, *_ = await drive(spec, turns=[Turn(list(t)) for t in turns])
    assert code == 0
    stream = tmp_path / "run.jsonl"
    stream.write_text("".join(json.dumps(e) + "\n" for e in events))
    report = rd.redecide([str(stream)], rd.PolicyDeciderFor([str(policy)], mode))
    decided = {e["call_id"]: e for e in events if e["event"] == "tool.decided"}
    assert len(report.outcomes) == len(decided)
    for outcome in report.outcomes:
        run_decided = decided[outcome.call.call_id]
        assert outcome.new.klass == rd.CLASS_OF_DECISION[run_decided["decision"]["decision"]]
        assert (outcome.new.decided_by, outcome.new.reason) == (run_decided["decided_by"],
                                                                run_decided["decision"].get("reason"))
    assert report.changed() == []
